"""csparql: C-SPARQL continuous queries as Airflow-orchestrated micro-batches on Spark over Delta tables.

The names a user imports, each loaded on first use (``import csparql`` itself loads neither Spark, nor Airflow,
nor Delta: Spark's executors import the package too)::

    import csparql

    plan = csparql.compile_query(text)                        # parse, check and translate a query
    evaluation = csparql.evaluate(plan, "2010-03-22T10:10:00Z")  # one window, on Spark
    results = csparql.StoredResults(csparql.Warehouse("delta_tables"), "tollgates")

In an Airflow DAG file, ``csparql.csparql_dags()`` builds every registered query's DAG, and
``csparql.CsparqlEvaluateWindowOperator`` evaluates a query's window in a DAG of one's own.
"""

from __future__ import annotations

import importlib
from importlib import metadata

PUBLIC_NAMES = {
    # the language
    "compile_query": "csparql.core.frontend",
    "parse_query": "csparql.core.frontend",
    "QueryError": "csparql.core.language.errors",
    "parse_instant": "csparql.core.windows",
    "format_instant": "csparql.core.windows",
    # evaluating on Spark, reading results
    "evaluate": "csparql.engine.runner",
    "Engine": "csparql.engine.runner",
    "Evaluation": "csparql.engine.runner",
    "Warehouse": "csparql.storage.warehouse",
    "StoredResults": "csparql.storage.stored",
    "Settings": "csparql.deploy.settings",
    # Airflow
    "csparql_dags": "csparql.orchestration.factory",
    "CsparqlEvaluateWindowOperator": "csparql.orchestration.operators",
    "CsparqlIngestOperator": "csparql.orchestration.operators",
    "CsparqlConsumeOperator": "csparql.orchestration.operators",
    "WindowCompleteTrigger": "csparql.orchestration.triggers",
}
"""Each public name and the module it is defined in."""

__all__ = ["__version__", *PUBLIC_NAMES]


def __getattr__(name: str):
    if name == "__version__":
        return metadata.version("csparql")
    if name in PUBLIC_NAMES:
        value = getattr(importlib.import_module(PUBLIC_NAMES[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'csparql' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})

"""The provider info Airflow reads through the ``apache_airflow_provider`` entry point (``pyproject.toml``):
what ``airflow providers list`` / ``get`` show, and the ``[csparql]`` configuration section that
``airflow config list --section csparql`` shows with its defaults and descriptions (``csparql.deploy.settings``).

Plain data, no Airflow import: Airflow calls ``get_provider_info()`` while it discovers its providers.
"""

from __future__ import annotations

from importlib import metadata

from csparql.deploy.settings import airflow_config_section

DISTRIBUTION = "csparql"
INTEGRATION = "C-SPARQL"
PLUGIN_CLASS = "csparql.plugin.CsparqlPlugin"
SPARK_CONNECTION_TYPES = ("spark", "spark_connect")
"""The connection types (of apache-airflow-providers-apache-spark) that name the Spark csparql runs on."""


def version() -> str:
    """The installed distribution's version (``0.0.0`` when csparql runs from a source tree not installed)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "0.0.0"


def get_provider_info() -> dict:
    """The provider's description for Airflow's providers manager (``provider_info.schema.json``)."""
    return {
        "package-name": DISTRIBUTION,
        "name": "csparql",
        # plain text: `airflow providers list` strips backticks, underscores and angle brackets
        "description": "C-SPARQL continuous queries as Airflow-orchestrated micro-batches on Spark over Delta "
                       "tables. Spark runs inside each task, on a Spark Connect server or on a cluster through "
                       "spark-submit, reached through a connection of the Apache Spark provider.",
        "versions": [version()],
        "integrations": [{
            "integration-name": INTEGRATION,
            "external-doc-url": "https://github.com/csparql/csparql#install-into-your-airflow",
            "tags": ["software"],
        }],
        "operators": [{
            "integration-name": INTEGRATION,
            "python-modules": ["csparql.orchestration.operators", "csparql.orchestration.revisions"],
        }],
        "triggers": [{
            "integration-name": INTEGRATION,
            "python-modules": ["csparql.orchestration.triggers"],
        }],
        "plugins": [{"name": "csparql", "plugin-class": PLUGIN_CLASS}],
        "config": airflow_config_section(),
    }

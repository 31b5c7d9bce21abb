"""Running one conformance case: the engine's side, the independent side, and the comparison.

``python -m conformance.harness w3c [substring…]`` / ``generated [seed-range]`` / ``examples`` (with
``tests`` on ``PYTHONPATH``) runs cases outside pytest and prints every mismatch, which is handy while
fixing the engine.
"""

from __future__ import annotations

import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

from rdflib import Variable

from csparql.core.frontend import compile_query, parse_query
from csparql.core.language import syntax as sx

from conformance import reference
from conformance.compare import Results, compare, from_engine
from conformance.reference import Case

WORKERS = 3


# PySpark's DataFrame debugging sends the Python call site to the JVM on every Column function (several
# round trips each); it is a static setting, so it goes on the command line of the JVM PySpark starts.
SUBMIT_ARGS = "--conf spark.python.sql.dataFrameDebugging.enabled=false pyspark-shell"


def prepare_environment() -> None:
    """Call before the SparkSession is created."""
    import logging
    import os

    os.environ.setdefault("PYSPARK_SUBMIT_ARGS", SUBMIT_ARGS)
    logging.getLogger("rdflib").setLevel(logging.ERROR)  # ill-typed literals of the W3C data are on purpose


def configure(spark) -> None:
    """Settings for a session that evaluates hundreds of tiny queries: compiling generated code costs far
    more than it saves on a few rows, so expressions are interpreted (Spark guarantees the same results; set
    CSPARQL_CONFORMANCE_CODEGEN=1 to run the suite with code generation)."""
    import os

    if os.environ.get("CSPARQL_CONFORMANCE_CODEGEN") != "1":
        spark.conf.set("spark.sql.codegen.wholeStage", "false")
        spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")


def engine_result(spark, case: Case) -> Results:
    """The engine's result for a case: compile, read the case's data from memory, evaluate at ``case.at``."""
    from csparql.engine.evaluate import evaluate_plan
    from csparql.core.schedule import evaluation_at
    from csparql.spark.sources import MemorySourceReader

    plan = compile_query(case.text)
    reader = MemorySourceReader(spark, streams=case.streams, graphs=case.graphs, window_end=case.at)
    # NOW() is the end of the window that identifies the evaluation, as in the engine's runs
    now = evaluation_at(plan, case.at).end if case.at is not None else None
    return from_engine(evaluate_plan(spark, plan, reader, at=now))


def ordering(query: sx.Query) -> tuple[list[tuple[str, bool]] | None, bool]:
    """The ORDER BY keys as (projected variable, descending) when every key is a projected variable (else
    None: the order is not checked), and whether the projection order is free (``SELECT *``)."""
    form = query.form
    if not isinstance(form, sx.SelectForm):
        return None, False
    star = form.items is None
    projected = None if star else {str(i.var) for i in form.items}
    keys = []
    for condition in query.order_by:
        if not isinstance(condition.expression, Variable):
            return None, star
        if projected is not None and str(condition.expression) not in projected:
            return None, star
        keys.append((str(condition.expression), condition.direction == "DESC"))
    return (keys or None), star


def differential(engine: Results, case: Case) -> list[str]:
    """Compare the engine's result of a C-SPARQL case with the independent evaluator's."""
    expected = reference.evaluate(case)
    query = parse_query(case.text)
    keys, star = ordering(query)
    return compare(engine, expected, keys, any_var_order=star)


class Prefetcher:
    """Runs engine evaluations in a few threads ahead of the tests that check them (Spark runs the jobs of
    several threads at once, which hides most of its per-job latency); each case is still checked on its own."""

    def __init__(self, spark, cases: list[Case], workers: int = WORKERS):
        self.spark = spark
        self.pool = ThreadPoolExecutor(workers)
        self.futures = {case.name: self.pool.submit(self._run, case) for case in cases}

    def _run(self, case: Case):
        started = time.perf_counter()
        try:
            return engine_result(self.spark, case), None, time.perf_counter() - started
        except Exception as error:  # reported by the test that checks this case
            return None, error, time.perf_counter() - started

    def result(self, name: str) -> Results:
        result, error, _ = self.futures[name].result()
        if error is not None:
            raise error
        return result

    def close(self) -> None:
        self.pool.shutdown(wait=True, cancel_futures=True)


def _main(argv: list[str]) -> int:
    from csparql.runtime.session import spark_session

    what = argv[0] if argv else "w3c"
    prepare_environment()
    spark = spark_session("local[2]")
    configure(spark)
    if what == "w3c":
        from conformance import w3c

        tests = [t for t in w3c.included() if not argv[1:] or any(f in t.name for f in argv[1:])]
        check = w3c.check
        items = [(t.name, w3c.case_of(t), t) for t in tests]
    elif what == "generated":
        from conformance import generator

        start, stop = (int(x) for x in (argv[1:] or ["0-40"])[0].split("-"))
        items = [(c.name, c, c) for c in generator.generated_cases(range(start, stop))]
        check = lambda engine, item: differential(engine, item)  # noqa: E731
    else:
        from conformance import urban

        items = [(c.name, c, c) for c in urban.example_cases()]
        check = lambda engine, item: differential(engine, item)  # noqa: E731
    started = time.perf_counter()
    prefetch = Prefetcher(spark, [case for _, case, _ in items])
    failures = 0
    for name, case, item in items:
        try:
            problems = check(prefetch.result(name), item)
        except Exception:
            problems = [traceback.format_exc(limit=4)]
        if problems:
            failures += 1
            print(f"=== {name}\n" + "\n".join(problems) + "\n")
    prefetch.close()
    print(f"{len(items)} cases, {failures} failing, {time.perf_counter() - started:.0f}s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1:]))

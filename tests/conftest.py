"""Fixtures shared by the whole suite. One SparkSession serves every test that needs Spark (it takes 10–20 s
to start), created on first use.

The suite runs in two pytest-xdist workers (``-n 2`` in pyproject.toml; ``./test.sh -n 0`` runs it in one
process). A worker takes whole test files, and whole packages where they share a package- or session-scoped
fixture (``SHARED_PACKAGES``), so that no stack, server or loaded workload is started twice; the files that take
minutes start first (``LONG_FILES``) so that the two workers end together.

Markers (registered in pyproject.toml): a test that uses a Spark fixture is marked ``spark`` here, one that
uses the ``ui`` stack ``airflow``; modules that start Spark, import or run Airflow, or drive a browser
otherwise say so with ``pytestmark``. ``pytest -m "not spark and not airflow and not browser"`` runs the rest,
the pure tests, in seconds."""

from __future__ import annotations

import logging
import os

import pytest

SHARED_SESSION_MEMORY = "3g"
"""The shared session's driver heap: the conformance harness evaluates three queries at a time in it, some
of them cross products, and a broadcast built while the others hold 1–1.5 GB ran out of the default 2 GB."""


TEST_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM options of every Spark driver the tests start (through ``SPARK_SUBMIT_OPTS``, which Spark's launcher adds
to each JVM spark-submit starts: this process's sessions, the Spark Connect servers, spark-submitted jobs, the
sessions of Airflow tasks): the quick compiler only and a single-threaded collector. The tests run many small
queries in short-lived JVMs on two cores, where the optimising compiler's and the parallel collector's threads
cost more than they win (the W3C file: 134 s → 123 s in one process). They change no answer."""
os.environ.setdefault("SPARK_SUBMIT_OPTS", TEST_JVM_OPTIONS)

SPARK_FIXTURES = {"spark", "conformance_spark"}
AIRFLOW_FIXTURES = {"ui"}

SHARED_PACKAGES = ("tests/ui/", "tests/srbench/")
"""Packages whose files share a fixture wider than a module (the UI's Airflow stack; the SRBench workload):
one worker runs the whole package."""

LONG_FILES = (
    "tests/orchestration/test_airflow_end_to_end.py",
    "tests/conformance/test_generated.py",
    "tests/conformance/test_whole_way.py",
    "tests/bench/test_quick_run.py",
    "tests/conformance/test_w3c.py",
    "tests/engine/test_panes.py",
    "tests/provider/test_installed_wheel.py",
    "tests/stack/test_stack_command.py",
    "tests/srbench/",
    "tests/ui/",
    "tests/engine/test_compact_windows.py",
    "tests/orchestration/test_spark_cluster.py",
    "tests/storage/test_s3_cluster.py",
    "tests/spark/test_paths.py",
    "tests/spark/test_entailment.py",
    "tests/engine/test_engine.py",
    "tests/engine/test_revision_numbering.py",
    "tests/conformance/test_rspql_evaluation.py",
    "tests/orchestration/test_spark_connect.py",
    "tests/storage/test_s3_warehouse.py",
    "tests/orchestration/test_session_healing.py",
    "tests/ingest/test_kafka_source.py",
    "tests/ingest/test_sources.py",
    "tests/engine/test_revision_concurrency.py",
    "tests/storage/test_delta_spark.py",
)
"""The files (and packages) that take the longest, longest first, as a two-worker run on two cores measured
them (pytest's ``--durations``, summed per file: five to six minutes for the first ones, 40 s for the last)."""


def work_unit(nodeid: str) -> str:
    """What one worker runs together: the test's package if it is one of ``SHARED_PACKAGES``, else its file."""
    path = nodeid.split("::", 1)[0]
    return next((package for package in SHARED_PACKAGES if path.startswith(package)), path)


def _start_rank(item) -> int:
    unit = work_unit(item.nodeid)
    return next((rank for rank, long in enumerate(LONG_FILES) if unit.startswith(long)), len(LONG_FILES))


def pytest_collection_modifyitems(items):
    items.sort(key=_start_rank)  # stable: every file keeps the order of its tests
    for item in items:
        fixtures = set(item.fixturenames)  # with every fixture the test's fixtures depend on
        if fixtures & SPARK_FIXTURES:
            item.add_marker(pytest.mark.spark)
        if fixtures & AIRFLOW_FIXTURES:
            item.add_marker(pytest.mark.airflow)


@pytest.fixture(scope="session")
def spark():
    from csparql.runtime.session import spark_session

    previous = os.environ.get("CSPARQL_DRIVER_MEMORY")
    os.environ["CSPARQL_DRIVER_MEMORY"] = previous or SHARED_SESSION_MEMORY
    try:
        session = spark_session("local[2]")
    finally:  # the setting is for this session only, not for the Spark processes tests start
        if previous is None:
            del os.environ["CSPARQL_DRIVER_MEMORY"]
    yield session
    session.stop()
    # py4j closes its connections at interpreter exit and logs that at INFO, which Airflow's logging setup
    # lets through to a stream pytest has closed by then ("--- Logging error ---").
    logging.getLogger("py4j").setLevel(logging.WARNING)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """pytest-xdist's file scheduling, with ``SHARED_PACKAGES`` as one unit each, in the order collected."""
    from xdist.scheduler import LoadFileScheduling

    class WorkUnitScheduling(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return work_unit(nodeid)

    config.option.loadscopereorder = False  # xdist would put the files with the most tests first
    return WorkUnitScheduling(config, log)

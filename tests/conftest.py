"""Fixtures shared by the whole suite. One SparkSession serves every test that needs Spark (it takes 10–20 s
to start), created on first use.

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


SPARK_FIXTURES = {"spark", "conformance_spark"}
AIRFLOW_FIXTURES = {"ui"}


def pytest_collection_modifyitems(items):
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

"""Fixtures shared by the whole suite. One SparkSession serves every test that needs Spark (it takes 10–20 s
to start), created on first use."""

from __future__ import annotations

import logging

import pytest


@pytest.fixture(scope="session")
def spark():
    from csparql.spark.session import spark_session

    session = spark_session("local[2]")
    yield session
    session.stop()
    # py4j closes its connections at interpreter exit and logs that at INFO, which Airflow's logging setup
    # lets through to a stream pytest has closed by then ("--- Logging error ---").
    logging.getLogger("py4j").setLevel(logging.WARNING)

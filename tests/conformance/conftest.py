"""One SparkSession for the whole conformance suite, tuned for hundreds of tiny evaluations."""

from __future__ import annotations

import pytest

from conformance import harness


@pytest.fixture(scope="session")
def spark():
    harness.prepare_environment()
    from csparql.runtime.session import spark_session

    return spark_session("local[2]")


@pytest.fixture(scope="module")
def conformance_spark(spark):
    """The session with the conformance settings (``harness.configure``) for the duration of a module."""
    keys = ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")
    saved = {key: spark.conf.get(key, None) for key in keys}
    harness.configure(spark)
    yield spark
    for key, value in saved.items():
        if value is None:
            spark.conf.unset(key)
        else:
            spark.conf.set(key, value)

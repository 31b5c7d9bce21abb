"""What one spark-submit of the window-evaluation job is made of, built by a pure function as the Spark
provider's own tests check its command lines: the job's arguments are exactly what the job parses, the driver
and executors run this interpreter in UTC, and the ``s3a`` settings go only with a warehouse in S3."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

import pytest

from csparql.deploy.settings import Settings
from csparql.jobs import LOG4J_CONFIGURATION
from csparql.jobs.evaluate_window import _parser, job_arguments
from csparql.jobs.evaluation import EvaluationRequest
from csparql.orchestration.hooks import evaluation_submission
from csparql.storage.warehouse import Warehouse

S3_CONF = {"spark.hadoop.fs.s3a.endpoint": "http://127.0.0.1:8333", "spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.5.0"}


@pytest.mark.parametrize("complete", [True, False, None])
def test_the_job_arguments_are_what_the_job_parses(complete):
    arguments = job_arguments("/q/cars.rq", "cars", 1269252600000000, "s3://lake/w", "/q", 3_600_000_000, complete)
    parsed = _parser().parse_args(arguments)
    assert (parsed.query, parsed.name, parsed.at, parsed.warehouse, parsed.registry, parsed.revision_horizon) == (
        "/q/cars.rq", "cars", "1269252600000000", "s3://lake/w", "/q", 3_600_000_000)
    assert parsed.complete == {True: "true", False: "false", None: None}[complete]


def test_a_local_warehouse_is_submitted_without_the_s3_settings(tmp_path):
    settings = dataclasses.replace(Settings.from_environment({}, base=tmp_path), revision_horizon=60_000_000)
    request = EvaluationRequest(str(tmp_path / "q" / "cars.rq"), "cars", settings, at=5)
    submission = evaluation_submission(request, sys.executable, S3_CONF)
    assert submission.name == "csparql-cars"
    assert submission.application_args == [
        "--query", str(tmp_path / "q" / "cars.rq"), "--name", "cars", "--at", "5",
        "--warehouse", str(settings.warehouse.root), "--registry", str(settings.registry),
        "--revision-horizon", "60000000"]
    assert not set(S3_CONF) & set(submission.conf)
    assert submission.conf["spark.ui.enabled"] == "false"
    assert submission.conf["spark.driver.extraJavaOptions"] == (
        f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{LOG4J_CONFIGURATION}")
    assert submission.conf["spark.executorEnv.PYSPARK_PYTHON"] == sys.executable
    assert submission.env_vars == {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                                   "TZ": "UTC"}
    assert submission.spark_binary == str(Path(sys.executable).with_name("spark-submit"))  # pyspark's, in .venv


def test_a_warehouse_in_s3_is_submitted_with_the_s3_settings_and_a_python_without_spark_submit_uses_path(tmp_path):
    settings = dataclasses.replace(Settings.from_environment({}, base=tmp_path), warehouse=Warehouse("s3://lake/w"))
    python = str(tmp_path / "elsewhere" / "python")
    submission = evaluation_submission(EvaluationRequest("/q/cars.rq", "cars", settings, at=5, complete=True), python,
                                       S3_CONF)
    assert {key: submission.conf[key] for key in S3_CONF} == S3_CONF
    assert submission.application_args[-2:] == ["--complete", "true"]
    assert "s3://lake/w" in submission.application_args
    assert submission.spark_binary == "spark-submit"
    assert set(submission.hook_arguments()) == {"name", "application_args", "spark_binary", "env_vars", "conf"}


def test_an_evaluation_request_travels_to_the_triggerer_whole_and_a_submission_needs_its_instant(tmp_path):
    settings = dataclasses.replace(Settings.from_environment({}, base=tmp_path), revision_horizon=60_000_000,
                                   aws_conn_id="lakehouse")
    request = EvaluationRequest("/q/cars.rq", "per_tollgate", settings, "spark_connect", at=5, complete=False)
    carried = EvaluationRequest.from_dict(json.loads(json.dumps(request.to_dict())))  # as Airflow's database keeps it
    assert carried.settings.option_values() == settings.option_values()
    assert (carried.query, carried.name, carried.conn_id, carried.at, carried.complete) == (
        "/q/cars.rq", "per_tollgate", "spark_connect", 5, False)
    with pytest.raises(ValueError, match="needs the instant of its window"):
        evaluation_submission(EvaluationRequest("/q/cars.rq", "cars", settings), sys.executable)

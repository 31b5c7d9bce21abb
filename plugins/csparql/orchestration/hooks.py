"""The Spark hook of csparql's evaluations on a cluster: spark-submit of the window-evaluation job
(``csparql.jobs.evaluate_window``), what one submission is made of (``evaluation_submission``, a pure
function), and the hook that runs it, keeping what the job reports (``EvaluationSubmitHook``)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

from csparql.jobs.evaluation import EvaluationRequest
from csparql.jobs import LOG4J_CONFIGURATION
from csparql.jobs.evaluate_window import RESULT_PREFIX, job_arguments


@dataclass(frozen=True)
class Submission:
    """The parts of one spark-submit of the job, as ``SparkSubmitHook`` takes them."""

    name: str
    application_args: list[str]
    spark_binary: str
    env_vars: dict[str, str] = field(default_factory=dict)
    conf: dict[str, str] = field(default_factory=dict)

    def hook_arguments(self) -> dict:
        return {"name": self.name, "application_args": self.application_args, "spark_binary": self.spark_binary,
                "env_vars": self.env_vars, "conf": self.conf}


def evaluation_submission(request: EvaluationRequest, python: str,
                          s3_conf: dict[str, str] | None = None) -> Submission:
    """The spark-submit that evaluates the window ``request`` names.

    The driver JVM starts before the job runs, so its options are given here: UTC everywhere, no Spark UI.

    Args:
        request: The evaluation, its instant set: the job's arguments (``job_arguments``: the query, name,
            instant, completeness, and the warehouse, registry and revision horizon of its settings).
        python: The interpreter of the driver and the executors (its ``spark-submit`` when it has one beside it).
        s3_conf: The ``s3a`` settings and jars, given when the warehouse is in S3.

    Returns:
        The parts of the submission, as ``SparkSubmitHook`` takes them (``Submission.hook_arguments``).

    Raises:
        ValueError: The request has no instant.
    """
    if request.at is None:
        raise ValueError("a submitted evaluation needs the instant of its window")
    settings = request.settings
    binary = Path(python).with_name("spark-submit")
    return Submission(
        name=f"csparql-{request.name}",
        application_args=job_arguments(request.query, request.name, request.at, str(settings.warehouse.root),
                                       str(settings.registry), settings.revision_horizon, request.complete),
        spark_binary=str(binary) if binary.exists() else "spark-submit",
        env_vars={"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, "TZ": "UTC"},
        conf={
            "spark.ui.enabled": "false",
            "spark.driver.extraJavaOptions": f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{LOG4J_CONFIGURATION}",
            "spark.executorEnv.PYSPARK_PYTHON": python,
            "spark.executorEnv.TZ": "UTC",
            **(s3_conf if settings.warehouse.remote and s3_conf else {}),
        },
    )


class EvaluationSubmitHook(SparkSubmitHook):
    """``SparkSubmitHook`` that also keeps the job's ``CSPARQL_RESULT`` line (``record``: its evaluation, the
    stale windows it found included) from the driver's output it logs (client deploy mode). It overrides the
    provider's private ``_process_spark_submit_log``, the only method the hook hands that output to:
    ``tests/orchestration/test_provider_internals.py`` pins it to the provider series it was written for.

    Args:
        **kwargs: ``SparkSubmitHook``'s arguments, e.g. ``evaluation_submission(...).hook_arguments()`` and the
            connection (``conn_id``).
    """

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.record: dict | None = None

    def _process_spark_submit_log(self, itr) -> None:  # the hook reads the driver's output only here
        def kept(lines):
            for line in lines:
                text = line.decode() if isinstance(line, bytes) else str(line)
                if text.startswith(RESULT_PREFIX):
                    self.record = json.loads(text[len(RESULT_PREFIX):])
                yield line

        super()._process_spark_submit_log(kept(itr))

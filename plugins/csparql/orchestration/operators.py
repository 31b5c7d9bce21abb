"""The tasks of a query's DAG — wait for the window, evaluate it — and of a stream's ingestion DAG.

Operators hold the ``Deployment`` built when the DAG file is parsed (the task runner parses it again, so
nothing here is serialized but the trigger). Errors users can act on fail the task with one plain message.
"""

from __future__ import annotations

import sys
import time
from datetime import timedelta
from pathlib import Path

from airflow.exceptions import AirflowException
from airflow.sdk import BaseOperator

from csparql.deployment import Deployment, Settings
from csparql.storage.warehouse import project_root
from csparql.storage.watermarks import latest_run
from csparql.windows import format_instant, to_micros

EVALUATE_WINDOW_JOB = project_root() / "spark_jobs" / "evaluate_window.py"
LOG4J = project_root() / "plugins" / "csparql" / "spark" / "log4j2.properties"


def evaluation_instant(context) -> int:
    """The instant (µs) a run evaluates: its data interval's end — the window end t_f — when it has one
    (scheduled runs and backfills), else the moment it was triggered (manual or asset-triggered runs)."""
    end = context.get("data_interval_end")
    if end is not None:
        return to_micros(end)
    return to_micros(context["dag_run"].run_after)


class AwaitWindowOperator(BaseOperator):
    """Waits, deferred, until every input of the run's window has landed (``WindowRequirements``), or until
    the wait timeout; returns ``{"at", "window_end", "complete", "missing"}`` for the evaluation task."""

    ui_color = "#e8f1fb"

    def __init__(self, *, deployment: Deployment, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.deployment = deployment
        self.settings = settings

    def execute(self, context):
        from csparql.orchestration.triggers import WindowCompleteTrigger

        requirements = self.deployment.requirements(evaluation_instant(context))
        trigger = WindowCompleteTrigger(
            str(self.settings.warehouse.root), requirements.streams, requirements.producer_windows,
            deadline=time.time_ns() // 1000 + self.settings.wait_timeout,
            poll_seconds=self.settings.poll_interval / 1e6,
        )
        missing = trigger.missing()
        if not missing:
            return _waited(requirements.to_dict(), [])
        self.log.info("window ending %s waits for: %s", format_instant(requirements.window_end), "; ".join(missing))
        self.defer(trigger=trigger, method_name="resume", kwargs={"requirements": requirements.to_dict()},
                   timeout=timedelta(microseconds=self.settings.wait_timeout) + timedelta(minutes=5))

    def resume(self, context, event=None, requirements=None):
        missing = (event or {}).get("missing", [])
        if missing:
            self.log.warning("wait timed out; evaluating an incomplete window, still missing: %s", "; ".join(missing))
        return _waited(requirements, missing)


def _waited(requirements: dict, missing: list[str]) -> dict:
    """What the wait hands to the evaluation: the instant, the window end, and whether nothing was missing."""
    return {"at": requirements["at"], "window_end": requirements["window_end"], "complete": not missing,
            "missing": missing}


class EvaluateWindowOperator(BaseOperator):
    """Evaluates the run's window and writes its results, replacing any earlier copy (so retries and
    re-runs never duplicate). Spark runs where ``Settings.spark`` says: in this task's process (local), on a
    standalone cluster through spark-submit, or on a Spark Connect server."""

    ui_color = "#fdf0e0"

    def __init__(self, *, deployment: Deployment, settings: Settings, await_task_id: str, **kwargs) -> None:
        super().__init__(**kwargs)
        self.deployment = deployment
        self.settings = settings
        self.await_task_id = await_task_id

    def execute(self, context):
        waited = context["ti"].xcom_pull(task_ids=self.await_task_id) or {}
        at = waited.get("at", evaluation_instant(context))
        complete = waited.get("complete")
        if self.settings.spark == "standalone":
            outcome = self._submit(at, complete)
        else:
            outcome = self._evaluate_here(at, complete)
        if self.deployment.output_stream:
            for outlet in self.outlets:
                context["outlet_events"][outlet].extra = {
                    "stream": self.deployment.output_stream, "window_end": format_instant(outcome["window_end"])
                }
        return outcome

    def _evaluate_here(self, at: int, complete: bool | None) -> dict:
        from csparql.engine.runner import Engine, EvaluationFailed
        from csparql.spark.session import spark_session

        master = None
        if self.settings.spark == "connect":
            from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

            master = SparkConnectHook(conn_id=self.settings.connection_id).get_connection_url()
        engine = Engine(self.settings.warehouse, spark_session(master))
        try:
            evaluation = engine.evaluate(self.deployment.plan, at, self.deployment.name, complete=complete,
                                         version=self.deployment.version)
        except EvaluationFailed as error:
            raise AirflowException(str(error)) from None
        window = evaluation.window
        self.log.info("window (%s, %s]: %d row(s) written in %d ms",
                      format_instant(window.start) if window.start is not None else "-", format_instant(window.end),
                      evaluation.rows_written, evaluation.duration_ms)
        return {"window_end": window.end, "window_start": window.start, "rows_written": evaluation.rows_written,
                "run_id": evaluation.run_id, "complete": complete, "query_version": self.deployment.version}

    def _submit(self, at: int, complete: bool | None) -> dict:
        from airflow.providers.apache.spark.hooks.spark_submit import SparkSubmitHook

        arguments = ["--query", str(self.deployment.path), "--name", self.deployment.name, "--at", str(at),
                     "--warehouse", str(self.settings.warehouse.root)]
        if complete is not None:
            arguments += ["--complete", "true" if complete else "false"]
        python = sys.executable
        binary = Path(python).with_name("spark-submit")
        hook = SparkSubmitHook(
            conn_id=self.settings.connection_id,
            application_args=arguments,
            name=f"csparql-{self.deployment.name}",
            spark_binary=str(binary) if binary.exists() else "spark-submit",
            env_vars={"PYSPARK_PYTHON": python, "PYSPARK_DRIVER_PYTHON": python, "TZ": "UTC"},
            # spark-submit starts the driver JVM before the job runs: its options must come from here.
            conf={
                "spark.ui.enabled": "false",
                "spark.driver.extraJavaOptions": f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{LOG4J}",
                "spark.executorEnv.PYSPARK_PYTHON": python,
                "spark.executorEnv.TZ": "UTC",
            },
        )
        try:
            hook.submit(str(EVALUATE_WINDOW_JOB))
        except AirflowException as error:
            raise AirflowException(f"spark-submit of the window at {format_instant(at)} failed: {error}") from None
        window = self.deployment.schedule.evaluation_at(at) if self.deployment.schedule else None
        end = window.end if window else at
        run = latest_run(self.settings.warehouse, self.deployment.name, end)
        return {"window_end": end, "window_start": window.start if window else None,
                "rows_written": run.get("rows_written") if run else None,
                "run_id": run.get("run_id") if run else None, "complete": complete}


class IngestLandedFilesOperator(BaseOperator):
    """Lands every file waiting in a stream's landing folder, each in its own commit and exactly once, even
    after a run that stopped between a commit and moving its file (``csparql.engine.landing``): a file that
    lands moves to ``done/``, a file refused as a whole moves to ``rejected/`` with a ``.reason`` beside it;
    lines refused inside a landed file (malformed, or timestamped later than the clock plus
    ``CSPARQL_MAX_FUTURE_SKEW``) are written to ``rejected/<file>.rejects.tsv``. Ingest advances the stream's
    watermark. Starts Spark only when there is something to land: with ``CSPARQL_SPARK=connect`` a session of
    the Spark Connect server (which must see the landing folder and the warehouse at the same paths, as on one
    machine or on a volume every Spark container mounts), else a local Spark inside the task (a standalone
    cluster takes only spark-submitted jobs)."""

    ui_color = "#e9f7ec"

    def __init__(self, *, stream: str, landing: Path, settings: Settings, **kwargs) -> None:
        super().__init__(**kwargs)
        self.stream = stream
        self.landing = Path(landing)
        self.settings = settings

    def execute(self, context):
        from csparql.engine.landing import land_waiting_files
        from csparql.spark.session import spark_session

        def start_spark():
            return spark_session(connect_url(self.settings) if self.settings.spark == "connect" else None)

        summary = land_waiting_files(start_spark, self.settings.warehouse, self.stream, self.landing,
                                     max_future_skew=self.settings.max_future_skew)
        if not summary.files:
            self.log.info("nothing waiting in %s", self.landing)
        return summary.to_dict()


def connect_url(settings: Settings) -> str:
    """The client URL of the Spark Connect server the Airflow connection ``settings.connection_id`` names."""
    from airflow.providers.apache.spark.hooks.spark_connect import SparkConnectHook

    return SparkConnectHook(conn_id=settings.connection_id).get_connection_url()

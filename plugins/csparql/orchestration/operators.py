"""The public operators: evaluate a registered query's window, ingest a stream's landing folder.

``CsparqlEvaluateWindowOperator`` and ``CsparqlIngestOperator`` take plain arguments — a query file or
registered name, a stream IRI, an Airflow connection id for Spark, a warehouse folder — and build what they
need themselves, so a user's own DAG can use them; the DAGs built from the registry (``dags``) use the same
operators. Errors users can act on fail the task with one plain message; a query that cannot be deployed
fails the DAG file with one (the file, line, column and caret).

Every task has its tables as Assets (``assets``): outlets the tables it writes, inlets the streams it reads,
and reports the same tables, with their Delta versions, to OpenLineage (``lineage``).
"""

from __future__ import annotations

import dataclasses
import os
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

from airflow.exceptions import AirflowException
from airflow.sdk import Asset, BaseOperator
from airflow.sdk.exceptions import TaskDeferralTimeout
from airflow.triggers.base import StartTriggerArgs

from csparql.deploy.plan import Deployment, deployment_of_query
from csparql.deploy.revisions import detect_after_commits
from csparql.jobs import job_path
from csparql.jobs.evaluation import (
    EvaluationRequest, describe, evaluate_deployment_window, stale_windows_of, task_value,
)
from csparql.deploy.settings import Settings
from csparql.orchestration.config import deployment_settings
from csparql.orchestration.assets import result_asset, stream_asset
from csparql.orchestration.connections import connect_url, evaluation_engine, settings_for_connection
from csparql.orchestration.revisions import REVISIONS, announce
from csparql.orchestration.triggers import WindowCompleteTrigger
from csparql.storage.revisions import table_version
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import latest_run
from csparql.core.windows import format_instant, parse_instant

__all__ = ["CsparqlEvaluateWindowOperator", "CsparqlIngestOperator", "connect_url"]

EVALUATE_WINDOW_JOB = job_path()


EVALUATION_INSTANT = ("{{ ((dag_run.logical_date if dag_run.run_type == 'manual' else None)"
                      " or dag_run.data_interval_end or dag_run.run_after).isoformat() }}")
"""The instant a run evaluates (ISO 8601), as a template: a manual run's logical date when it was given one
(``airflow dags trigger --logical-date``, the UI's or the REST API's logical date: Airflow may infer such a
run's data interval from the moment it was triggered), else the run's data interval end — the window end t_f
of scheduled runs and backfills —, else the moment it was triggered (a manual run without a logical date, an
asset-triggered run). Rendered by the triggerer when the task starts there, and by the worker when it
evaluates."""


def operator_settings(settings: Settings | None, warehouse: str | os.PathLike | None,
                      registry: str | os.PathLike | None = None) -> Settings:
    """The deployment settings of an operator: ``settings`` (else the environment's) with the warehouse and
    registry folders given, if any (the landing folders follow the warehouse unless set on their own)."""
    settings = settings or deployment_settings()
    changes = {}
    if warehouse is not None:
        changes["warehouse"] = Warehouse(warehouse)
        if settings.landing == settings.warehouse.root / "landing":
            changes["landing"] = changes["warehouse"].root / "landing"
    if registry is not None:
        changes["registry"] = Path(registry).resolve()
    return dataclasses.replace(settings, **changes) if changes else settings


def with_revisions(outlets) -> list:
    """``outlets`` with the revisions alias (``revisions.REVISIONS``), through which a task that commits to a
    stream announces the windows it made stale."""
    outlets = list(outlets)
    return outlets if REVISIONS in outlets else [*outlets, REVISIONS]


def evaluation_assets(deployment: Deployment) -> tuple[list[Asset], list[Asset]]:
    """The inlets (the streams the query reads) and outlets (its output stream, else its result table, and the
    revisions alias) of a query's evaluation task."""
    inlets = [stream_asset(stream.iri) for stream in deployment.inputs]
    written = stream_asset(deployment.output_stream) if deployment.output_stream else result_asset(deployment.name)
    return inlets, [written, REVISIONS]


class CsparqlEvaluateWindowOperator(BaseOperator):
    """Evaluates one window of a C-SPARQL query per run.

    Args:
        query: A query file (``.rq``) or the name of a registered query (the registry's DAGs pass the
            ``Deployment`` they have built).
        conn_id: An Airflow connection of type ``spark_connect`` (a Spark Connect server) or ``spark``
            (spark-submit to a cluster); without it Spark runs where the settings say (``CSPARQL_SPARK``; a
            local Spark inside the task by default).
        warehouse: The warehouse (a folder, or ``s3://bucket/prefix``), else the settings'.
        name: What a query file's results are named (its file's stem by default).
        settings: The ``csparql.deploy.settings.Settings`` to evaluate with, else those of the environment.
        api_conn_id: The connection to Airflow's REST API through which a run evaluated on the triggerer
            records its output stream's Asset event, else ``[csparql] api_conn_id`` (below).
        **kwargs: Airflow's ``BaseOperator`` arguments (``task_id``, ``pool``, ``retries``, …).

    Example:
        ```python
        CsparqlEvaluateWindowOperator(task_id="evaluate", query="CarsEnteringCityCenterPerDistrict",
                                      conn_id="csparql_spark")
        ```

    The window a run evaluates is the one at its instant (``EVALUATION_INSTANT``): a manual run's logical
    date, else its data interval's end, else when it was triggered.

    One run of a query: waits until every input of the run's window has landed (``WindowRequirements``),
    then evaluates the window and writes its results, replacing any earlier copy (so retries and re-runs never
    duplicate).

    The task starts deferred on Airflow's triggerer (``start_from_trigger``): the scheduler hands the wait,
    ``WindowCompleteTrigger``, straight to the triggerer, so a waiting run has no task process and holds no
    worker or pool slot. When the window is complete:

    - with Spark Connect (``Settings.spark == "connect"``, or a ``spark_connect`` connection), the trigger
      evaluates the window itself, in a thread of the triggerer, and ends the task from there: success with
      the task's value as XCom, or failure (the message in the task's log, retried as any failure). A trigger
      cannot add Asset events: a ``REGISTER STREAM`` query's output stream gets its event through Airflow's
      REST API (``api_conn_id``; ``csparql.orchestration.asset_events``). The run has no task process, except
      when it has stale windows to announce, or an output stream's Asset event the API did not record (no
      ``api_conn_id``, or the call failed): then the task resumes in ``evaluate`` with the trigger's record
      and only finishes. A run ended on the triggerer sends its OpenLineage events from there, named as a
      task process's (``csparql.orchestration.lineage.report_run_ended_on_triggerer``);
    - with a local Spark or spark-submit, the task resumes in a worker, in ``evaluate``: one task process.

    After ``Settings.wait_timeout`` Airflow ends the wait (the trigger timeout) and the task resumes in a
    worker all the same: the window is evaluated anyway and recorded as incomplete when something is still
    missing, which the log names. Run without the triggerer (``airflow tasks test``), ``execute`` evaluates a
    complete window at once and defers from the worker otherwise.

    Every path evaluates through ``csparql.jobs.evaluation.evaluate_deployment_window``, which runs the
    staleness check after the evaluation; the task announces what it found to the revision DAGs."""

    template_fields = ("window_instant",)
    start_from_trigger = True
    ui_color = "#fdf0e0"

    def __init__(self, *, query: str | os.PathLike | Deployment, conn_id: str | None = None,
                 warehouse: str | os.PathLike | None = None, name: str | None = None,
                 settings: Settings | None = None, api_conn_id: str | None = None, **kwargs: Any) -> None:
        settings = operator_settings(settings, warehouse)
        if api_conn_id is not None:
            settings = dataclasses.replace(settings, api_conn_id=api_conn_id or None)
        deployment = query if isinstance(query, Deployment) else deployment_of_query(query, settings, name)
        inlets, outlets = evaluation_assets(deployment)
        kwargs["inlets"] = kwargs.get("inlets") or inlets
        kwargs["outlets"] = with_revisions(kwargs.get("outlets") or outlets)
        super().__init__(**kwargs)
        self.deployment = deployment
        self.settings = settings
        self.conn_id = conn_id
        self.lineage = None
        self.window_instant = EVALUATION_INSTANT
        self.start_trigger_args = StartTriggerArgs(
            trigger_cls="csparql.orchestration.triggers.WindowCompleteTrigger",
            trigger_kwargs=self._trigger_arguments(EVALUATION_INSTANT),
            next_method="evaluate",
            next_kwargs=None,
            timeout=self.wait_timeout,
        )

    @property
    def wait_timeout(self) -> timedelta:
        """How long a run waits for its window before it is evaluated anyway (``CSPARQL_WAIT_TIMEOUT``)."""
        return timedelta(microseconds=self.settings.wait_timeout)

    def _trigger_arguments(self, window_instant: str) -> dict:
        """The arguments of the run's ``WindowCompleteTrigger``; ``window_instant`` a template or an instant.
        When Spark may be a Spark Connect server (the settings say so, or a connection decides when the task
        runs) the trigger gets what it needs to evaluate the window itself."""
        arguments = {"warehouse": str(self.settings.warehouse.root), "wait": self.deployment.wait.to_dict(),
                     "window_instant": window_instant, "poll_seconds": self.settings.poll_interval / 1e6}
        if self.settings.spark == "connect" or self.conn_id is not None:
            arguments["evaluation"] = EvaluationRequest.of(self.deployment, self.settings, self.conn_id).to_dict()
        return arguments

    def execute(self, context):
        """Only when the task did not start on the triggerer: evaluate now if nothing is missing, else defer."""
        trigger = WindowCompleteTrigger(**self._trigger_arguments(self.window_instant))
        missing = trigger.missing()
        if not missing:
            return self.evaluate(context)
        self.log.info("window ending %s waits for: %s", format_instant(trigger.requirements().window_end),
                      "; ".join(missing))
        self.defer(trigger=trigger, method_name="evaluate", timeout=self.wait_timeout)

    def resume_execution(self, next_method: str, next_kwargs: dict | None, context):
        """Resume after the wait: ``evaluate`` when the window is complete; when the wait timed out (Airflow
        fails the resumption with ``TaskDeferralTimeout``), evaluate the window anyway."""
        try:
            return super().resume_execution(next_method, next_kwargs, context)
        except TaskDeferralTimeout:
            return self.evaluate_after_timeout(context)

    def evaluate(self, context, event: dict | None = None) -> dict:
        """Evaluate the run's window, complete: nothing was missing when the wait ended. When the trigger has
        evaluated it already (``{"status": "evaluated"}``: it found stale windows to announce, or wrote an
        output stream whose Asset event only a worker can record), only finish the task with its record."""
        if event and event.get("status") == "evaluated":
            record = event["record"]
            run = latest_run(self.settings.warehouse, self.deployment.name, record["window_end"])
            self.lineage = submitted_lineage(self.settings.warehouse, self.deployment,
                                             parse_instant(self.window_instant), run)
            self.log.info("the triggerer evaluated the window (run %s): announcing what it found",
                          record.get("run_id"))
            return self.finish(context, record, [])
        return self._evaluate(context, complete=True, missing=[])

    def evaluate_after_timeout(self, context) -> dict:
        """Evaluate the run's window after the wait timed out: incomplete if something is still missing."""
        missing = self.deployment.wait.missing(self.settings.warehouse, parse_instant(self.window_instant))
        if missing:
            self.log.warning("wait timed out; evaluating an incomplete window, still missing: %s", "; ".join(missing))
        return self._evaluate(context, complete=not missing, missing=missing)

    def _evaluate(self, context, complete: bool, missing: list[str]) -> dict:
        at = parse_instant(self.window_instant)
        settings = settings_for_connection(self.settings, self.conn_id)
        if settings.spark == "standalone":
            record = self._submit(settings, at, complete)
        else:
            record = self._evaluate_here(settings, at, complete)
        return self.finish(context, record, missing)

    def finish(self, context, record: dict, missing: list[str]) -> dict:
        """What a task does in Airflow after the shared evaluation step (``csparql.jobs.evaluation``), given
        its ``WindowEvaluation.record()``: logs the window, announces the stale windows it found to their
        revision DAGs (``csparql.orchestration.revisions``), gives the output stream's Asset event what it
        wrote; returns the task's value (XCom)."""
        self.log.info("%s", describe(record))
        announce(context, stale_windows_of(record), self.log)
        if self.deployment.output_stream and stream_asset(self.deployment.output_stream) in self.outlets:
            context["outlet_events"][stream_asset(self.deployment.output_stream)].extra = {
                "stream": self.deployment.output_stream, "window_end": format_instant(record["window_end"])
            }
        return task_value(record, missing)

    def _evaluate_here(self, settings: Settings, at: int, complete: bool | None) -> dict:
        from csparql.engine.runner import EvaluationFailed
        from csparql.orchestration.lineage import evaluation_lineage

        try:
            evaluated = evaluate_deployment_window(evaluation_engine(settings), self.deployment, self.settings,
                                                   at, complete)
        except EvaluationFailed as error:
            raise AirflowException(str(error)) from None
        self.lineage = evaluation_lineage(self.settings.warehouse, self.deployment.plan, evaluated.evaluation)
        return evaluated.record()

    def _submit(self, settings: Settings, at: int, complete: bool | None) -> dict:
        from csparql.orchestration.hooks import EvaluationSubmitHook, evaluation_submission
        from csparql.runtime.object_storage import spark_s3_settings

        request = EvaluationRequest.of(self.deployment, self.settings, self.conn_id, at, complete)
        submission = evaluation_submission(request, sys.executable,
                                           spark_s3_settings() if self.settings.warehouse.remote else None)
        hook = EvaluationSubmitHook(conn_id=settings.connection_id, **submission.hook_arguments())
        try:
            hook.submit(str(EVALUATE_WINDOW_JOB))
        except AirflowException as error:
            raise AirflowException(f"spark-submit of the window at {format_instant(at)} failed: {error}") from None
        window = self.deployment.schedule.evaluation_at(at) if self.deployment.schedule else None
        end = window.end if window else at
        run = latest_run(self.settings.warehouse, self.deployment.name, end)
        self.lineage = submitted_lineage(self.settings.warehouse, self.deployment, at, run)
        if hook.record is not None:
            return hook.record
        # The job's result line did not reach the task (a deploy mode whose driver output is elsewhere): the run
        # it recorded says what it wrote, and the stale windows it found are announced by the next commit's check.
        return {"window_end": end, "window_start": window.start if window else None,
                "rows_written": run.get("rows_written") if run else None,
                "run_id": run.get("run_id") if run else None, "complete": complete,
                "query_version": self.deployment.version, "stale": []}

    def get_openlineage_facets_on_complete(self, task_instance):
        """The stream windows and static graphs this run read and the table it wrote, with their Delta
        versions (``lineage``)."""
        return self.lineage or _no_lineage()


class CsparqlIngestOperator(BaseOperator):
    """Lands every file waiting in a stream's landing folder, each in its own commit and exactly once, even
    after a run that stopped between a commit and moving its file (``csparql.ingest.landing``): a file that
    lands moves to ``done/``, a file refused as a whole moves to ``rejected/`` with a ``.reason`` beside it;
    lines refused inside a landed file (malformed, or timestamped later than the clock plus
    ``CSPARQL_MAX_FUTURE_SKEW``) are written to ``rejected/<file>.rejects.tsv``. Ingest advances the stream's
    watermark. Starts Spark only when there is something to land: with ``CSPARQL_SPARK=connect`` a session of
    the Spark Connect server (which must see the landing folder and the warehouse at the same paths, as on one
    machine or on a volume every Spark container mounts), else a local Spark inside the task (a standalone
    cluster takes only spark-submitted jobs).

    The stream's Asset gets an event only from a run that landed triples (or moved files an interrupted run
    had landed), so that what is scheduled on it does not run every minute for nothing.

    Args:
        stream: The stream's IRI.
        landing: Its landing folder, else the settings' (``CSPARQL_LANDING``, one folder per stream).
        conn_id: As for ``CsparqlEvaluateWindowOperator``.
        warehouse: As for ``CsparqlEvaluateWindowOperator``.
        settings: As for ``CsparqlEvaluateWindowOperator``.
        **kwargs: Airflow's ``BaseOperator`` arguments.

    Example:
        ```python
        CsparqlIngestOperator(task_id="land", stream="http://streams.org/citytollgates.trdf")
        ```"""

    ui_color = "#e9f7ec"

    def __init__(self, *, stream: str, landing: str | os.PathLike | None = None, conn_id: str | None = None,
                 warehouse: str | os.PathLike | None = None, settings: Settings | None = None,
                 **kwargs: Any) -> None:
        settings = operator_settings(settings, warehouse)
        kwargs["outlets"] = with_revisions(kwargs.get("outlets") or [stream_asset(stream)])
        super().__init__(**kwargs)
        self.declared_outlets = list(self.outlets)
        self.stream = str(stream)
        self.landing = Path(landing) if landing is not None else settings.landing_folder(self.stream)
        self.settings = settings
        self.conn_id = conn_id
        self.lineage = None

    def execute(self, context):
        from csparql.ingest.landing import land_waiting_files
        from csparql.orchestration.lineage import ingest_lineage
        from csparql.runtime.session import retry_on_lost_session, spark_session

        settings = settings_for_connection(self.settings, self.conn_id)

        def start_spark():
            return spark_session(connect_url(settings) if settings.spark == "connect" else None)

        table = self.settings.warehouse.stream(self.stream)
        before = table_version(table)
        # landing again after a lost Spark Connect session first finishes what the failed attempt began
        summary = retry_on_lost_session(lambda: land_waiting_files(
            start_spark, self.settings.warehouse, self.stream, self.landing,
            max_future_skew=self.settings.max_future_skew,
            timestamp_predicates=self.settings.timestamp_predicates_of(self.stream)),
            what=f"the ingest of {self.stream}")
        self.lineage = ingest_lineage(self.settings.warehouse, self.stream,
                                      [self.landing / "done" / name for name in summary.landed_files],
                                      table_version(table))
        # files an interrupted run had landed were given no event by that run
        record_stream_event_if_landed(self, context, self.stream, bool(summary.landed or summary.recovered),
                                      summary.landed, table_version(table))
        if not summary.files:
            self.log.info("nothing waiting in %s", self.landing)
            return summary.to_dict()
        stale = detect_after_commits(self.settings, self.stream, before)
        return {**summary.to_dict(), "stale_windows": len(stale), "revised_by": announce(context, stale, self.log)}

    def get_openlineage_facets_on_complete(self, task_instance):
        """The files this run landed and the stream table it wrote, with its version (``lineage``)."""
        return self.lineage or _no_lineage()


class CsparqlConsumeOperator(BaseOperator):
    """Lands what arrived on a stream's message-bus source since its last batch, a batch per commit and exactly
    once (``csparql.ingest.sources``), in the task's process (no Spark): ``source`` is ``redis://CONN/KEY`` or
    ``kafka://CONN/TOPIC`` (``?format=``, ``?batch=``), ``CONN`` the Airflow connection of the Redis or Kafka
    provider. Lands at most ``max_batches`` per run; what is left waits for the next run. Rejected messages
    and lines go to the stream's landing folder, ``rejected/<source>-<batch>.rejects.tsv``. Ingest advances the
    stream's watermark. Messages gone before they were read (a trimmed Redis stream, Kafka retention) are logged
    as a warning and recorded in the task's value (``gaps``, ``lost``) and the batch's commit, and what remains
    lands; with ``on_gap="fail"`` (else ``[csparql] on_gap``) the task fails with one line instead, landing
    nothing. The stream's Asset gets an event only from a run that landed triples."""

    ui_color = "#e9f7ec"
    template_fields = ("source",)

    def __init__(self, *, stream: str, source: str, max_batches: int = 100, on_gap: str | None = None,
                 warehouse: str | os.PathLike | None = None, settings: Settings | None = None, **kwargs) -> None:
        settings = operator_settings(settings, warehouse)
        kwargs["outlets"] = with_revisions(kwargs.get("outlets") or [stream_asset(stream)])
        super().__init__(**kwargs)
        self.declared_outlets = list(self.outlets)
        self.stream = str(stream)
        self.source = source
        self.max_batches = max_batches
        self.on_gap = on_gap or settings.on_gap
        self.settings = settings
        self.lineage = None

    def execute(self, context):
        from csparql.ingest.sources import SourceError, consume, parse_source
        from csparql.orchestration.lineage import consume_lineage

        try:
            spec = parse_source(self.source)
        except SourceError as error:
            raise AirflowException(str(error)) from None
        table = self.settings.warehouse.stream(self.stream)
        before = table_version(table)
        reader = message_reader(spec)
        try:
            report = consume(self.settings.warehouse, self.stream, spec, reader,
                             self.settings.landing_folder(self.stream) / "rejected", max_batches=self.max_batches,
                             max_future_skew=self.settings.max_future_skew,
                             timestamp_predicates=self.settings.timestamp_predicates_of(self.stream),
                             on_gap=self.on_gap)
        except SourceError as error:
            raise AirflowException(str(error)) from None
        self.lineage = consume_lineage(self.settings.warehouse, self.stream, reader.namespace, spec.name,
                                       report.versions[-1] if report.versions else None)
        for warning in report.warnings:
            self.log.warning("%s", warning)
        record_stream_event_if_landed(self, context, self.stream, report.landed > 0, report.landed,
                                      report.versions[-1] if report.versions else None)
        if not report.batches:
            self.log.info("nothing new on %s", spec.id)
            return report.to_dict()
        lost = "" if not report.gaps else (f", {report.lost} lost before they were read" if report.lost is not None
                                           else ", some lost before they were read")
        self.log.info("%s: %d messages in %d batches, %d triples landed, %d rejected%s", spec.id, report.messages,
                      report.batches, report.landed, report.rejected, lost)
        stale = detect_after_commits(self.settings, self.stream, before)
        return {**report.to_dict(), "stale_windows": len(stale), "revised_by": announce(context, stale, self.log)}

    def get_openlineage_facets_on_complete(self, task_instance):
        """The Redis stream or Kafka topic this run read and the stream table it wrote, with its version
        (``lineage``)."""
        return self.lineage or _no_lineage()


def record_stream_event_if_landed(operator: BaseOperator, context, stream: str, landed: bool, triples: int,
                                  version: int | None) -> None:
    """Give the stream's Asset an event only when the run landed triples. Airflow records an event for every
    Asset among the outlets of a task that succeeds, reading them when the task ends (the Task SDK's task
    runner): a run that landed nothing drops the stream's Asset from its outlets, so that what is scheduled on
    the stream does not run for nothing; one that landed gives the event the triples and the stream's version."""
    asset = stream_asset(stream)
    declared = operator.declared_outlets
    if asset not in declared:
        return
    operator.outlets = list(declared) if landed else [outlet for outlet in declared if outlet != asset]
    if landed and context and "outlet_events" in context:
        context["outlet_events"][asset].extra = {"stream": stream, "triples": triples, "version": version}


def message_reader(spec):
    """The reader of a source through its Airflow connection: the Redis provider's ``RedisHook``, or the Kafka
    provider's consumer (``pip install 'csparql[kafka]'``); its ``namespace`` names the bus as OpenLineage does
    (``redis://host:port``, ``kafka://bootstrap-server``)."""
    from csparql.ingest.sources import KafkaTopicReader, RedisStreamReader

    if spec.kind == "redis":
        from airflow.providers.redis.hooks.redis import RedisHook

        return RedisStreamReader(RedisHook(redis_conn_id=spec.conn_id).get_conn(), spec.name)
    try:
        from airflow.providers.apache.kafka.hooks.consume import KafkaConsumerHook
    except ImportError:
        raise AirflowException(f"{spec.id}: the Kafka provider is not installed: pip install 'csparql[kafka]' "
                               "(apache-airflow-providers-apache-kafka)") from None
    hook = KafkaConsumerHook([spec.name], kafka_config_id=spec.conn_id)
    servers = str(hook.get_connection(spec.conn_id).extra_dejson.get("bootstrap.servers", "")).split(",")[0]
    return KafkaTopicReader(hook.get_conn, spec.name, namespace=f"kafka://{servers.strip() or spec.conn_id}")


def submitted_lineage(warehouse: Warehouse, deployment: Deployment, at: int, run: dict | None):
    """The lineage of a window evaluated by spark-submit, from the run it recorded: the streams at their
    versions now (the application's reads are not reported back), the result table at the run's commit."""
    from csparql.engine.runner import Evaluation, result_table
    from csparql.orchestration.lineage import evaluation_lineage
    from csparql.core.schedule import evaluation_at

    window = evaluation_at(deployment.plan, at)
    version = run.get("result_version") if run else None
    evaluation = Evaluation(deployment.name, window, None, 0, 0, run.get("run_id") if run else "",
                            output_table=result_table(warehouse, deployment.plan, deployment.name),
                            output_version=version)
    return evaluation_lineage(warehouse, deployment.plan, evaluation)


def _no_lineage():
    from airflow.providers.openlineage.extractors import OperatorLineage

    return OperatorLineage()

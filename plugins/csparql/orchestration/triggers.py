"""The deferrable wait for a complete window, run by Airflow's triggerer (no worker slot, no task process);
with Spark Connect, the window's evaluation too.

``WindowCompleteTrigger`` waits until nothing is missing for the run's window: it looks again as soon as a table its
completeness is read from has a new commit (``CommitWatch``), and every ``poll_seconds`` anyway. Without
``evaluation`` it then fires an event and the task resumes in a worker, which evaluates the window (a local Spark,
spark-submit). With ``evaluation`` (the operator gives it when Spark may be a Spark Connect server) the trigger
evaluates the window itself, in a thread of the triggerer (never on its event loop), through the evaluation step
every path shares (``csparql.jobs.evaluation``), and ends the task instance from the triggerer: ``TaskSuccessEvent``
with the task's value as XCom, or ``TaskFailedEvent`` after logging the failure (Airflow retries the task as for a
failure in a worker); a task ended there sends its OpenLineage events from the triggerer, named as a task process's
(``csparql.orchestration.lineage.report_run_ended_on_triggerer``). A trigger cannot add Asset events: the Asset
event of a ``REGISTER STREAM`` query's output stream is recorded through Airflow's REST API when ``[csparql]
api_conn_id`` names a connection to it (``csparql.orchestration.asset_events``). Otherwise, and to announce stale
windows to their revision DAGs, the task resumes in a worker after the evaluation, with the evaluation's record
(``{"status": "evaluated"}``), to finish without evaluating again. Windows that become complete together are
evaluated together, as one batch (``DueTogether``); the ``[csparql] triggerer_evaluations`` option bounds the
evaluations one triggerer process runs at a time.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from airflow.triggers.base import BaseTrigger, TaskFailedEvent, TaskSuccessEvent, TriggerEvent

from csparql.deploy.plan import WindowRequirements, WindowWait
from csparql.deploy.settings import Settings
from csparql.jobs.evaluation import EvaluationRequest, describe, task_value
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import missing_for_window
from csparql.core.windows import format_instant, parse_instant

def evaluations_per_triggerer() -> tuple[int, int]:
    """How one triggerer process evaluates the windows due together: how many parts of a batch at a time, the
    ``[csparql] triggerer_evaluations`` option of its Airflow configuration (``AIRFLOW__CSPARQL__TRIGGERER_EVALUATIONS``,
    else ``CSPARQL_TRIGGERER_EVALUATIONS``; default 2, the evaluation pool's default slots; windows beyond them
    wait, complete, for a free place), and how many windows a part holds, ``triggerer_windows_per_job`` (default
    1). A value that cannot be used is logged and the defaults taken."""
    from airflow.configuration import conf

    try:  # the options alone: reading connections on the event loop would block it
        settings = Settings.from_airflow(conf)
        return settings.triggerer_evaluations, settings.triggerer_windows_per_job
    except ValueError as error:
        logging.getLogger(__name__).error("%s; evaluating %d windows at a time, each its own Spark job", error,
                                          Settings.triggerer_evaluations)
        return Settings.triggerer_evaluations, Settings.triggerer_windows_per_job


BATCH_GATHER_SECONDS = 0.1
"""How long a window that has just become complete on a triggerer waits for the windows completing with it (the
other queries' windows over the same commit) before they are evaluated together as one batch."""


class EvaluationBatch:
    """Windows evaluated together on one triggerer (``DueTogether``): their number, an id for the logs and the
    task values, and the engines they share, one per warehouse and Spark Connect server, each made once for the
    batch (the server's URL read once from its Airflow connection)."""

    def __init__(self, windows: int) -> None:
        self.id = uuid.uuid4().hex[:12]
        self.windows = windows
        self._engines: dict[tuple[str, str, str | None], Any] = {}
        self._lock = threading.Lock()

    def engine(self, settings: Settings):
        """The batch's engine for ``settings`` (``csparql.orchestration.connections.evaluation_engine``)."""
        from csparql.orchestration.connections import evaluation_engine

        key = (str(settings.warehouse.root), settings.spark, settings.connection_id)
        with self._lock:
            if key not in self._engines:
                self._engines[key] = evaluation_engine(settings)
            return self._engines[key]


class DueTogether:
    """The windows the triggers of one event loop evaluate (Spark Connect), batched. A window that becomes
    complete waits ``BATCH_GATHER_SECONDS`` for the others completing with it (a commit that completes many
    queries' windows wakes all their triggers at once: ``CommitWatch``); those gathered form one
    ``EvaluationBatch``, logged as one, whose windows share its engines and run as concurrent jobs of one Spark
    session, at most ``[csparql] triggerer_evaluations`` parts of the batch at a time
    (``evaluations_per_triggerer``): each part is one window, or up to ``triggerer_windows_per_job`` windows
    whose compiled plans run as one Spark job (``csparql.engine.together``), and the Spark Connect server
    overlaps the parts. Each
    window is still its own evaluation — its own result commit, runs row, revision, staleness check, lineage
    and task end — and its trigger is answered as soon as that window is done, not when its whole batch is."""

    _loops: dict[int, DueTogether] = {}

    def __init__(self, loop: asyncio.AbstractEventLoop, places: int, windows_per_job: int = 1) -> None:
        self.loop, self.places, self.windows_per_job = loop, places, windows_per_job
        self.pool = concurrent.futures.ThreadPoolExecutor(places, thread_name_prefix="csparql-evaluation")
        self.gathering: list[tuple[WindowCompleteTrigger, TriggerEvent, contextvars.Context,
                                   asyncio.Future]] | None = None

    @classmethod
    def of_running_loop(cls) -> DueTogether:
        """The batches of the running event loop (made on first use, sized by ``evaluations_per_triggerer``)."""
        loop = asyncio.get_running_loop()
        due = cls._loops.get(id(loop))
        if due is None or due.loop is not loop:
            for key in [k for k, d in cls._loops.items() if d.loop.is_closed()]:
                cls._loops.pop(key).pool.shutdown(wait=False)
            due = cls._loops[id(loop)] = cls(loop, *evaluations_per_triggerer())
        return due

    async def evaluate(self, trigger: WindowCompleteTrigger, complete: TriggerEvent) -> TriggerEvent:
        """``trigger.evaluate(complete, batch)`` in a thread of the pool, in the batch of the windows completing
        with it; the event it returns. The thread keeps the trigger's context (its task's log)."""
        answer = self.loop.create_future()
        if self.gathering is None:
            self.gathering = []
            self.loop.call_later(BATCH_GATHER_SECONDS, self._start_batch)
        self.gathering.append((trigger, complete, contextvars.copy_context(), answer))
        return await answer

    def _start_batch(self) -> None:
        gathered, self.gathering = self.gathering or [], None
        gathered = [item for item in gathered if not item[3].done()]  # not the triggers cancelled meanwhile
        batch = EvaluationBatch(len(gathered))
        if len(gathered) > 1:
            together = f", up to {self.windows_per_job} in one Spark job" if self.windows_per_job > 1 else ""
            logging.getLogger(__name__).info("%d windows due together: evaluated as batch %s, %d at a time%s",
                                             len(gathered), batch.id, min(self.places, len(gathered)), together)
        for first in range(0, len(gathered), self.windows_per_job):
            self.pool.submit(self._evaluate_together, gathered[first:first + self.windows_per_job], batch)

    def _evaluate_together(self, part: list, batch: EvaluationBatch) -> None:
        """In a thread of the pool: the windows of ``part`` evaluated together (``csparql.engine.together``),
        each trigger answered as soon as its window is done."""
        from csparql.engine.together import Stepped, evaluate_together

        answers: dict[int, asyncio.Future] = {}
        evaluations = []
        for trigger, complete, context, answer in part:
            if answer.done():  # cancelled while waiting for a place
                continue
            evaluation = Stepped(trigger.evaluation_steps(complete, batch), context.run)
            answers[id(evaluation)] = answer
            evaluations.append(evaluation)

        def finished(evaluation: Stepped) -> None:
            self.loop.call_soon_threadsafe(_answer, answers[id(evaluation)], evaluation.value, evaluation.error)

        try:
            evaluate_together(evaluations, finished)
        except BaseException as error:  # the windows not answered yet end with it
            for answer in answers.values():
                self.loop.call_soon_threadsafe(_answer, answer, None, error)
            raise


def _answer(answer: asyncio.Future, value, error: BaseException | None) -> None:
    if answer.done():  # the trigger was cancelled meanwhile
        return
    if error is not None:
        answer.set_exception(error)
    else:
        answer.set_result(value)


COMMIT_WATCH_SECONDS = 0.2
"""How often a triggerer looks for a new commit of a local table its waiting windows are read from (one
``stat`` of the table's next log entry, for all the triggers waiting on it)."""


class CommitWatch:
    """The commits of one Delta table as the triggers of one event loop wait for them: while any waits
    (``next_commit``), one task looks for the table's next log entry every ``COMMIT_WATCH_SECONDS``, off the
    loop, and wakes them all when a commit lands. So a window whose data has just been committed is looked at
    again at once, not at its trigger's next poll; the poll remains, for what the watch cannot see."""

    _watches: dict[tuple[int, str], CommitWatch] = {}

    def __init__(self, table: str, loop: asyncio.AbstractEventLoop) -> None:
        self.table, self.loop = table, loop
        self.version: int | None = None  # the latest version seen; None before the first look
        self.waiting = 0
        self.committed = asyncio.Event()
        self.task: asyncio.Task | None = None
        self.failed = False  # the table could not be watched: its triggers only poll

    @classmethod
    def of(cls, table) -> CommitWatch:
        """The watch of ``table`` for the running event loop."""
        loop = asyncio.get_running_loop()
        key = (id(loop), str(table))
        watch = cls._watches.get(key)
        if watch is None or watch.loop is not loop:
            for stale in [k for k, w in cls._watches.items() if w.loop.is_closed()]:
                del cls._watches[stale]
            watch = cls._watches[key] = cls(str(table), loop)
        return watch

    async def next_commit(self) -> None:
        """Return once the table has a commit the watch had not seen when this was called."""
        committed = self.committed
        self.waiting += 1
        try:
            if not self.failed and (self.task is None or self.task.done()):
                self.task = asyncio.ensure_future(self._watch())
            await committed.wait()
        finally:
            self.waiting -= 1

    async def _watch(self) -> None:
        from csparql.storage.revisions import committed_after, table_version

        try:
            if self.version is None:
                self.version = await asyncio.to_thread(table_version, self.table)
            while self.waiting:
                await asyncio.sleep(COMMIT_WATCH_SECONDS)
                latest = await asyncio.to_thread(committed_after, self.table, self.version)
                if latest != self.version:
                    self.version = latest
                    committed, self.committed = self.committed, asyncio.Event()
                    committed.set()
        except Exception as error:  # noqa: BLE001 - the waiting triggers still poll
            self.failed = True
            logging.getLogger(__name__).warning("watching the commits of %s stopped (%s); the waiting "
                                                "windows are polled", self.table, " ".join(str(error).split()))


class WindowCompleteTrigger(BaseTrigger):
    """Fires ``{"status": "complete", "window_end": µs}`` once nothing is missing for the window a run
    evaluates (see ``csparql.storage.watermarks.missing_for_window``), looking again after each commit that
    may complete it and every ``poll_seconds`` at the latest (``next_commit_or_poll``); given
    ``evaluation`` (``EvaluationRequest.to_dict``) and Spark Connect, evaluates the window instead and ends the
    task (see the module's docstring).

    When the task starts on the triggerer (``start_from_trigger``) the triggerer renders ``window_instant`` from
    the run — it is a template field of the task too (``CsparqlEvaluateWindowOperator``) — before ``run``. The
    wait's timeout is Airflow's (the task instance's trigger timeout), not the trigger's.

    Args:
        warehouse: The warehouse the window's inputs and results are in (a folder or ``s3://…``).
        wait: The query's ``WindowWait.to_dict()``: what its windows wait for.
        window_instant: The run's instant (ISO 8601).
        poll_seconds: How long it waits between two looks at the latest.
        evaluation: The task's ``EvaluationRequest.to_dict()``, when the trigger may evaluate the window itself
            (Spark Connect); None: it only waits.
    """

    def __init__(self, warehouse: str, wait: dict, window_instant: str, poll_seconds: float,
                 evaluation: dict | None = None) -> None:
        super().__init__()
        self.warehouse = warehouse
        self.wait = wait
        self.window_instant = window_instant
        self.poll_seconds = poll_seconds
        self.evaluation = evaluation

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "csparql.orchestration.triggers.WindowCompleteTrigger",
            {"warehouse": self.warehouse, "wait": self.wait, "window_instant": self.window_instant,
             "poll_seconds": self.poll_seconds, "evaluation": self.evaluation},
        )

    def requirements(self) -> WindowRequirements:
        """What the run's window waits for."""
        return WindowWait.from_dict(self.wait).requirements(parse_instant(str(self.window_instant)))

    def missing(self) -> list[str]:
        """What the run's window still waits for, in plain words (empty once it is complete)."""
        return WindowWait.from_dict(self.wait).missing(Warehouse(self.warehouse),
                                                       parse_instant(str(self.window_instant)))

    async def run(self):
        requirements = self.requirements()
        warehouse = Warehouse(self.warehouse)
        if warehouse.remote:  # the endpoint and credentials of [csparql] aws_conn_id, read off the loop
            from csparql.orchestration.config import deployment_settings

            await asyncio.to_thread(deployment_settings)
        reported: list[str] | None = None
        while True:
            # Delta reads must not block the triggerer's loop
            missing = await asyncio.to_thread(missing_for_window, warehouse, requirements.streams,
                                              requirements.producer_windows)
            if not missing:
                break
            if missing != reported:
                self.log.info("window ending %s waits for: %s", format_instant(requirements.window_end),
                              "; ".join(missing))
                reported = missing
            await self.next_commit_or_poll(warehouse, requirements)
        complete = TriggerEvent({"status": "complete", "window_end": requirements.window_end})
        if self.evaluation is None:
            yield complete
            return
        yield await self.evaluate_complete_window(complete)

    async def evaluate_complete_window(self, complete: TriggerEvent) -> TriggerEvent:
        """The event ``evaluate`` returns for the complete window, evaluated with the windows due with it
        (``DueTogether``): in a thread, so that Spark never blocks the loop."""
        return await DueTogether.of_running_loop().evaluate(self, complete)

    async def next_commit_or_poll(self, warehouse: Warehouse, requirements: WindowRequirements) -> None:
        """Return after the next commit to a table the window's completeness is read from (the watermarks for
        its streams, the runs table for its producers' windows: ``CommitWatch``), or after ``poll_seconds``
        at the latest. A warehouse in object storage is only polled."""
        tables = ([warehouse.watermarks] if requirements.streams else []) + (
            [warehouse.runs] if requirements.producer_windows else [])
        if warehouse.remote or not tables:
            await asyncio.sleep(self.poll_seconds)
            return
        waits = [asyncio.ensure_future(CommitWatch.of(table).next_commit()) for table in tables]
        try:
            await asyncio.wait(waits, timeout=self.poll_seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()

    def request(self) -> EvaluationRequest:
        """The evaluation the task handed over, with the task's settings. A trigger deferred by an earlier
        version of csparql carries only the options an evaluation reads, each under its own key."""
        given = self.evaluation
        if "settings" in given:
            return EvaluationRequest.from_dict(given, origin="the deferred task")
        settings = Settings(registry=Path(given["registry"]), warehouse=Warehouse(self.warehouse),
                            landing=Path(given["landing"]), spark=given["spark"], spark_conn_id=given["spark_conn_id"],
                            revision_horizon=given["revision_horizon"], api_conn_id=given.get("api_conn_id"))
        return EvaluationRequest(given["query"], given["name"], settings, given.get("conn_id"))

    def evaluate(self, complete: TriggerEvent, batch: EvaluationBatch | None = None) -> TriggerEvent:
        """Evaluate the run's complete window here when Spark is a Spark Connect server, and say how the task
        ends: ``TaskSuccessEvent`` (its value as XCom), ``TaskFailedEvent`` (the failure logged), or, when a
        worker must finish it (stale windows to announce, an output stream's Asset event the API did not
        record), an event with the evaluation's record; ``complete`` (resume in a worker, which evaluates) when
        Spark is not a Spark Connect server. ``batch``: the windows evaluated with it (their shared engine;
        the task's value names the batch)."""
        from csparql.engine.runner import evaluated_alone

        return evaluated_alone(self.evaluation_steps(complete, batch))

    def evaluation_steps(self, complete: TriggerEvent, batch: EvaluationBatch | None = None):
        """``evaluate`` as steps (``csparql.engine.runner.Engine.evaluation_steps``), whose Spark part can run
        in one Spark job with the other windows of its batch (``csparql.engine.together``)."""
        from csparql.jobs.evaluation import deployment_window_steps
        from csparql.orchestration.connections import evaluation_engine, settings_for_connection

        at = parse_instant(str(self.window_instant))
        started = datetime.now(timezone.utc)
        try:
            request = self.request()
            settings = settings_for_connection(request.settings, request.conn_id)
            if settings.spark != "connect":
                return complete
            deployment = request.deployment(settings)
            together = f", one of {batch.windows} windows due together (batch {batch.id})" if batch and \
                batch.windows > 1 else ""
            self.log.info("window ending %s is complete: evaluating it on the triggerer (Spark Connect)%s",
                          format_instant(self.requirements().window_end), together)
            engine = batch.engine(settings) if batch is not None else evaluation_engine(settings)
            evaluated = yield from deployment_window_steps(engine, deployment, settings, at, True)
        except Exception as error:  # noqa: BLE001 - every failure ends the task failed, with its message logged
            message = " ".join(str(error).split()) or type(error).__name__
            self.log.error("the evaluation of the window at %s failed: %s", format_instant(at), message)
            self.report_lineage(started, None, message)
            return TaskFailedEvent()
        record = evaluated.record()
        self.log.info("%s", describe(record))
        if record["stale"] or (deployment.output_stream and not self.record_stream_event(
                settings.api_conn_id, deployment.output_stream, record)):
            return TriggerEvent({"status": "evaluated", "record": record})  # the worker's run sends the lineage
        self.report_lineage(started, (deployment, settings, evaluated))
        value = task_value(record, [])
        if batch is not None and batch.windows > 1:
            value["batch"] = {"id": batch.id, "windows": batch.windows}
        return TaskSuccessEvent(xcoms={"return_value": value})

    def report_lineage(self, started: datetime, evaluated: tuple | None, error: str | None = None) -> None:
        """Send the OpenLineage events of a task ended here (``csparql.orchestration.lineage``): what the
        evaluation read and wrote (``evaluated``: the deployment, its settings and the ``WindowEvaluation``),
        or the failure (``error``)."""
        from csparql.orchestration.lineage import evaluation_lineage, report_run_ended_on_triggerer

        lineage = None
        if evaluated is not None:
            deployment, settings, evaluation = evaluated
            try:
                lineage = evaluation_lineage(settings.warehouse, deployment.plan, evaluation.evaluation)
            except Exception as failure:  # noqa: BLE001 - lineage never changes how the task ends
                self.log.warning("the lineage of this run could not be read: %s: %s", type(failure).__name__,
                                 failure)
                return
        report_run_ended_on_triggerer(self.task_instance, started, lineage, error, self.log)

    def record_stream_event(self, api_conn_id: str | None, stream: str, record: dict) -> bool:
        """Record the output stream's Asset event for the run's window through Airflow's REST API (the
        connection ``api_conn_id``); whether it was recorded (else the task must finish in a worker, which
        records it: why is logged)."""
        from csparql.orchestration.asset_events import AssetEventNotRecorded, AssetEventsApi
        from csparql.orchestration.assets import stream_asset

        if not api_conn_id:
            return False
        extra = {"stream": stream, "window_end": format_instant(record["window_end"])}
        ti = self.task_instance
        if ti is not None:
            extra.update({"dag_id": ti.dag_id, "run_id": ti.run_id, "task_id": ti.task_id,
                          "map_index": ti.map_index})
        try:
            event = AssetEventsApi(api_conn_id).record(stream_asset(stream).uri, extra)
        except Exception as error:  # noqa: BLE001 - whatever the failure, the worker records the event instead
            if not isinstance(error, AssetEventNotRecorded):
                error = f"{type(error).__name__}: {error}"
            self.log.warning("the Asset event of %s was not recorded through the API (%s): the task finishes in "
                             "a worker, which records it", stream, error)
            return False
        self.log.info("recorded the Asset event of %s through the API (event %s)", stream, event.get("id"))
        return True

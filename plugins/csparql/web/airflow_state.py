"""What the pages need from Airflow's metadata database, read and changed in the api-server's process through
Airflow's own models: whether each query's DAG exists and is paused, its import error, its runs and their
tasks' states; pausing, unpausing, triggering and deleting a DAG.

Every function opens its own session (``create_session`` commits on success and rolls back on error).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update

from csparql.deploy.monitoring import AirflowRun
from csparql.core.schedule import Schedule
from csparql.core.windows import format_instant, from_micros, to_micros


@dataclass(frozen=True)
class DagState:
    """A query's DAG as Airflow knows it: absent until the DAG processor has parsed its loader."""

    dag_id: str
    exists: bool
    is_paused: bool | None = None
    is_stale: bool | None = None
    has_import_errors: bool | None = None

    @property
    def label(self) -> str:
        if not self.exists:
            return "waiting for the DAG processor"
        if self.is_stale:
            return "stale"
        return "paused" if self.is_paused else "active"


def _session():
    from airflow.utils.session import create_session

    return create_session()


def dag_states(dag_ids: list[str]) -> dict[str, DagState]:
    """The state of each DAG (``exists=False`` for those Airflow has not parsed yet)."""
    from airflow.models.dag import DagModel

    states = {dag_id: DagState(dag_id, False) for dag_id in dag_ids}
    if not dag_ids:
        return states
    with _session() as session:
        rows = session.execute(
            select(DagModel.dag_id, DagModel.is_paused, DagModel.is_stale, DagModel.has_import_errors)
            .where(DagModel.dag_id.in_(dag_ids))
        ).all()
    for dag_id, paused, stale, errors in rows:
        states[dag_id] = DagState(dag_id, True, bool(paused), bool(stale), bool(errors))
    return states


def import_errors(names: list[str]) -> dict[str, str]:
    """The import error Airflow recorded for each query's loader (``<name>.py``), by query name."""
    from airflow.models.errors import ParseImportError

    wanted = {f"{name}.py": name for name in names}
    errors: dict[str, str] = {}
    with _session() as session:
        rows = session.execute(select(ParseImportError.filename, ParseImportError.stacktrace)).all()
    for filename, stacktrace in rows:
        base = (filename or "").rsplit("/", 1)[-1]
        if base in wanted:
            errors[wanted[base]] = stacktrace or ""
    return errors


def _window_end(data_interval_end: datetime | None, run_after: datetime, schedule: Schedule | None) -> int:
    """The end of the window a run evaluates: its data interval's end (scheduled runs and backfills), else
    the window closing at or before the moment it runs after (manual runs)."""
    if data_interval_end is not None:
        return to_micros(data_interval_end)
    at = to_micros(run_after)
    return schedule.evaluation_at(at).end if schedule is not None else at


def dag_runs(dag_id: str, schedule: Schedule | None, limit: int = 100) -> list[AirflowRun]:
    """The latest ``limit`` runs of a DAG, with their window end and their tasks' states."""
    from airflow.models.dagrun import DagRun
    from airflow.models.taskinstance import TaskInstance

    with _session() as session:
        runs = session.execute(
            select(DagRun.run_id, DagRun.state, DagRun.run_type, DagRun.data_interval_end, DagRun.run_after,
                   DagRun.start_date, DagRun.queued_at)
            .where(DagRun.dag_id == dag_id).order_by(DagRun.run_after.desc(), DagRun.id.desc()).limit(limit)
        ).all()
        ids = [r.run_id for r in runs]
        tasks = session.execute(
            select(TaskInstance.run_id, TaskInstance.task_id, TaskInstance.state)
            .where(TaskInstance.dag_id == dag_id, TaskInstance.run_id.in_(ids))
        ).all() if ids else []
    states: dict[str, dict[str, str | None]] = {}
    for run_id, task_id, state in tasks:
        states.setdefault(run_id, {})[task_id] = str(state) if state is not None else None
    result = []
    for row in runs:
        started = row.start_date or row.queued_at
        result.append(AirflowRun(
            run_id=row.run_id,
            state=str(row.state),
            window_end=_window_end(row.data_interval_end, row.run_after, schedule),
            run_type=str(row.run_type),
            started_at=to_micros(started) if started is not None else None,
            task_states=states.get(row.run_id, {}),
        ))
    return result


def set_paused(dag_id: str, paused: bool) -> bool:
    """Pause or unpause a DAG; False when Airflow does not know it (yet)."""
    from airflow.models.dag import DagModel

    with _session() as session:
        changed = session.execute(update(DagModel).where(DagModel.dag_id == dag_id).values(is_paused=paused))
        return bool(changed.rowcount)


def announce_revisions(windows_by_query: dict[str, list[str]]) -> list[str]:
    """An event of each query's revision Asset (``csparql.deploy.revisions.revision_asset_uri``), as a task that
    commits to a stream adds one, so that the query's revision DAG re-evaluates those windows; returns the
    queries announced (those whose Asset Airflow knows: a revision DAG it has parsed)."""
    from airflow.assets.manager import asset_manager
    from airflow.models.asset import AssetModel

    from csparql.deploy.revisions import revision_asset_uri

    announced = []
    with _session() as session:
        for query, ends in sorted(windows_by_query.items()):
            model = session.scalar(select(AssetModel).where(AssetModel.uri == revision_asset_uri(query)).limit(1))
            if model is None:
                continue
            asset_manager.register_asset_change(asset=model, extra={"windows": ends}, source_is_api=True,
                                                session=session)
            announced.append(query)
    return announced


class TriggerRefused(Exception):
    """A run could not be created; the message says why."""


def trigger(dag_id: str, at: int, user_name: str | None) -> str:
    """Create a manual run evaluating the window that closes at or before ``at`` (µs) — a run with no
    logical date, its ``run_after`` at ``at`` — and return its id."""
    from airflow.models.dag import DagModel
    from airflow.models.dagbag import DBDagBag
    from airflow.utils.state import DagRunState
    from airflow.utils.types import DagRunTriggeredByType, DagRunType

    with _session() as session:
        model = session.get(DagModel, dag_id)
        if model is None or model.is_stale:
            raise TriggerRefused(f"Airflow has no DAG {dag_id} yet: wait until the DAG processor has parsed it")
        if model.has_import_errors:
            raise TriggerRefused(f"the DAG {dag_id} has an import error: fix the query first")
        dag = DBDagBag().get_latest_version_of_dag(dag_id, session=session)
        if dag is None:
            raise TriggerRefused(f"Airflow has no DAG {dag_id} yet: wait until the DAG processor has parsed it")
        import pendulum

        run_id = f"manual__csparql__{format_instant(at)}__{uuid.uuid4().hex[:6]}"
        dag.create_dagrun(
            run_id=run_id, logical_date=None, data_interval=None,
            run_after=pendulum.instance(from_micros(at), tz="UTC"), conf={}, run_type=DagRunType.MANUAL,
            triggered_by=DagRunTriggeredByType.UI, triggering_user_name=user_name, state=DagRunState.QUEUED,
            session=session,
        )
    return run_id


def runs_at_limit(dag_id: str) -> bool:
    """Whether the DAG's running runs other than backfills (scheduled ones waiting for their data among them)
    reach its ``max_active_runs``: a manual run created now would stay queued."""
    from airflow.models.dag import DagModel
    from airflow.models.dagrun import DagRun
    from airflow.utils.state import DagRunState
    from sqlalchemy import func

    with _session() as session:
        model = session.get(DagModel, dag_id)
        if model is None or not model.max_active_runs:
            return False
        running = session.scalar(select(func.count(DagRun.id)).where(
            DagRun.dag_id == dag_id, DagRun.state == DagRunState.RUNNING, DagRun.backfill_id.is_(None)))
        return running >= model.max_active_runs


def backfill_window(dag_id: str, instant: int, user_name: str | None) -> str:
    """Create a backfill of the one scheduled window whose evaluation instant is ``instant`` (µs) and return
    the id of its run. A backfill's runs count against the backfill's own ``max_active_runs``, not the DAG's,
    so a past window evaluated this way never waits behind scheduled runs that wait for their windows' data.
    ``TriggerRefused`` when Airflow refuses the backfill (another backfill of the DAG is running, …)."""
    import pendulum
    from airflow.models.backfill import ReprocessBehavior, _create_backfill
    from airflow.models.dagrun import DagRun

    moment = pendulum.instance(from_micros(instant), tz="UTC")
    try:
        backfill = _create_backfill(dag_id=dag_id, from_date=moment, to_date=moment, max_active_runs=1,
                                    reverse=False, dag_run_conf={}, triggering_user_name=user_name,
                                    reprocess_behavior=ReprocessBehavior.COMPLETED)
    except Exception as error:  # Airflow's refusals (AlreadyRunningBackfill, …) each have a class of their own
        raise TriggerRefused(f"Airflow did not backfill the window: {error}") from None
    with _session() as session:
        run_id = session.scalar(select(DagRun.run_id).where(DagRun.backfill_id == backfill.id))
    if run_id is None:
        raise TriggerRefused("Airflow created no run for that window (it may already have a run)")
    return run_id


def running_tasks(dag_id: str) -> int:
    """How many of the DAG's task instances are running now."""
    from sqlalchemy import func

    from airflow.models.taskinstance import TaskInstance
    from airflow.utils.state import TaskInstanceState

    with _session() as session:
        return session.scalar(select(func.count()).select_from(TaskInstance).where(
            TaskInstance.dag_id == dag_id, TaskInstance.state == TaskInstanceState.RUNNING)) or 0


def delete_dag(dag_id: str) -> bool:
    """Delete a DAG and its runs from Airflow's database (its audit log stays); False when Airflow does not
    know it. ``TriggerRefused`` while one of its tasks is running."""
    from airflow.api.common.delete_dag import delete_dag as airflow_delete_dag
    from airflow.exceptions import AirflowException, DagNotFound

    try:
        with _session() as session:
            airflow_delete_dag(dag_id, keep_records_in_log=True, session=session)
    except DagNotFound:
        return False
    except AirflowException as error:
        raise TriggerRefused(f"the DAG {dag_id} cannot be deleted now ({error}): wait for its running tasks") from None
    return True

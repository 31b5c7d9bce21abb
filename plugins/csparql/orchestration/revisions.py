"""Revisions of stale windows as Airflow runs: one revision DAG per scheduled query, started by an Asset event.

Every task that commits to a stream — an ingestion DAG's ``ingest_landed_files``, a query's ``evaluate_window``,
a revision DAG's ``revise_stale_windows`` — has the Asset alias ``REVISIONS`` as outlet. When its commit (or,
for an evaluation, a commit made while it ran) makes windows of a query stale inside its revision horizon
(``csparql.deploy.revisions``), the task adds an event of that query's Asset ``csparql://revisions/<query>``
to the alias; without stale windows it adds none. The query's revision DAG, ``revise_<query>``, is scheduled on
that Asset: its run re-evaluates each pending window of the query (one commit each, numbered ``revision`` + 1),
logs what it revised and why, and, for a ``REGISTER STREAM`` query, finds the consumers' windows its rewritten
output makes stale in turn, which starts their revision DAGs: revisions go in dependency order. Revision DAGs
are created unpaused, so that revisions need no manual step.
"""

from __future__ import annotations

from pathlib import Path

from airflow.exceptions import AirflowException
from airflow.sdk import DAG, Asset, AssetAlias, BaseOperator

from csparql.deploy.plan import deployment_of
from csparql.deploy.registry import DAG_ID, registry_facts, registry_name
from csparql.deploy.revisions import mark_revised, pending_windows, revision_asset_uri, windows_to_revise
from csparql.deploy.settings import Settings
from csparql.jobs.evaluation import evaluate_deployment_window
from csparql.orchestration.config import deployment_settings
from csparql.orchestration.connections import evaluation_engine, settings_for_connection
from csparql.orchestration.defaults import START_DATE, task_defaults
from csparql.storage.stale_windows import PENDING, StaleWindow
from csparql.core.windows import format_instant

REVISIONS = AssetAlias(name="csparql_revisions")
"""The outlet through which tasks announce the queries that have windows to revise."""


def revision_asset(query: str) -> Asset:
    """The Asset whose events start the revision DAG of ``query``."""
    return Asset(name=f"csparql_revisions_{query}", uri=revision_asset_uri(query))


def revision_dag_id(query: str) -> str:
    return f"revise_{query}"


def announce(context, stale: list[StaleWindow], log) -> list[str]:
    """Add an event of the revision Asset of every query with ``pending`` windows among ``stale`` to the task's
    ``REVISIONS`` outlet; returns those queries."""
    for window in stale:
        if window.status != PENDING:
            log.warning("%s: the window ending %s is stale (%d late triple(s) on <%s>) but beyond its revision "
                        "horizon: it is not revised", window.query, format_instant(window.window_end),
                        window.late_triples, window.stream)
    queries = windows_to_revise(stale)
    for query, windows in queries.items():
        ends = [format_instant(end) for end in windows]
        log.info("%s: %d window(s) to revise (%s)", query, len(ends), ", ".join(ends))
        context["outlet_events"][REVISIONS].add(revision_asset(query), extra={"windows": ends})
    return list(queries)


class ReviseStaleWindowsOperator(BaseOperator):
    """Re-evaluates the pending stale windows of one query, oldest first, each replacing its window's results in
    one commit; marks them revised; finds the windows its own commits make stale downstream (a ``REGISTER
    STREAM`` query's output stream) and announces them. Spark runs as for evaluations (a Spark Connect client
    with ``CSPARQL_SPARK=connect``, else a local Spark inside the task)."""

    ui_color = "#fff4d6"

    def __init__(self, *, registry_file: Path, settings: Settings, conn_id: str | None = None, **kwargs) -> None:
        super().__init__(**kwargs)
        self.registry_file = Path(registry_file)
        self.settings = settings
        self.conn_id = conn_id

    def execute(self, context):
        deployment = deployment_of(self.registry_file, self.settings)
        pending = pending_windows(self.settings, deployment.name)
        if not pending:
            self.log.info("%s: no window to revise", deployment.name)
            return {"revised": []}
        from csparql.engine.runner import EvaluationFailed

        engine = evaluation_engine(settings_for_connection(self.settings, self.conn_id))
        revised, downstream = [], []
        for window in pending:
            end = window.window_end
            for stale in window.stale:
                self.log.info("window ending %s is stale: %s on <%s> (commit %d at %s), %d late triple(s), "
                              "lateness p50 %.1f s, max %.1f s", format_instant(end), stale.reason, stale.stream,
                              stale.stream_version, format_instant(stale.committed_at), stale.late_triples,
                              (stale.lateness_p50_ms or 0) / 1000, (stale.lateness_max_ms or 0) / 1000)
            missing = deployment.wait.missing(self.settings.warehouse, end)
            try:
                evaluated = evaluate_deployment_window(engine, deployment, self.settings, end, not missing)
            except EvaluationFailed as error:
                raise AirflowException(str(error)) from None
            evaluation = evaluated.evaluation
            revision = evaluation.revision
            mark_revised(self.settings, window.stale, revision)
            self.log.info("window (%s, %s] revised: revision %d, %d row(s) written in %d ms",
                          format_instant(evaluation.window.start) if evaluation.window.start is not None else "-",
                          format_instant(end), revision, evaluation.rows_written, evaluation.duration_ms)
            revised.append({"window_end": format_instant(end), "revision": revision})
            downstream += evaluated.stale
        announce(context, downstream, self.log)
        return {"revised": revised}


def revision_dags(settings: Settings | None = None, conn_id: str | None = None) -> dict[str, DAG]:
    """One revision DAG per registered query with a schedule, keyed by DAG id (built from the registry's facts,
    without compiling the queries; Spark through the Airflow connection ``conn_id`` when given)."""
    settings = settings or deployment_settings()
    dags: dict[str, DAG] = {}
    for path, facts in registry_facts(settings):
        if facts is None or facts.schedule is None or not DAG_ID.fullmatch(path.stem):
            continue
        name = registry_name(path)
        dag_id = revision_dag_id(name)
        with DAG(
            dag_id=dag_id,
            description=f"re-evaluates the windows of {name} that late triples made stale",
            schedule=[revision_asset(name)],
            start_date=START_DATE,
            catchup=False,
            max_active_runs=1,
            is_paused_upon_creation=False,
            default_args=task_defaults(settings),
            tags=["csparql", "revision"],
            doc_md=f"Started when late triples make windows of `{name}` stale within its revision horizon; each "
                   "run re-evaluates them, replacing their results (one copy, the next revision number).",
        ) as dag:
            ReviseStaleWindowsOperator(task_id="revise_stale_windows", registry_file=path, settings=settings,
                                       conn_id=conn_id, pool=settings.pool, outlets=[REVISIONS])
        dags[dag_id] = dag
    return dags

"""DAGs built from the registry: one per registered query, one ingestion DAG per stream the queries read or a
message-bus source feeds (``Settings.sources``: its DAG also consumes the source).

A query's DAG is one task, ``evaluate_window``, which waits for its window on the triggerer and then evaluates
it (``CsparqlEvaluateWindowOperator``); its timetable is the query's schedule (``timetable``).
Each registry file ``<name>.rq`` has a loader ``<name>.py`` beside it (written by ``csparql register``) that
calls ``registered_query_dag(__file__)``: Airflow records an import error per DAG file and marks every DAG of
a failing file stale, so one file per query is what keeps one broken query from stopping the others. The
error names the ``.rq`` file and carries the parser's message with line, column and caret.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

from airflow.sdk import DAG

from csparql.deploy.plan import Deployment, deployment_of, ingest_dag_id, ingested_streams
from csparql.deploy.registry import RegistrationError, RegistrySnapshot
from csparql.orchestration.config import deployment_settings
from csparql.deploy.settings import Settings
from csparql.orchestration.defaults import START_DATE, task_defaults
from csparql.orchestration.operators import (
    CsparqlConsumeOperator, CsparqlEvaluateWindowOperator, CsparqlIngestOperator,
)
from csparql.orchestration.timetable import WindowTimetable

MAX_ACTIVE_RUNS = 4
"""Runs of one query DAG at a time (scheduled ones mostly wait, deferred, for their window to be complete)."""

INGEST_PRIORITY = 1000
"""The priority of an ingestion task, above any evaluation's (at most a few, counted upstream): when the
executor has fewer free slots than tasks are ready, fresh data lands first. Ingests also have a pool of their
own (``Settings.ingest_pool``), so no backlog of evaluations in ``Settings.pool`` holds them back."""


def registered_query_dag(loader: str | Path, settings: Settings | None = None) -> DAG:
    """The DAG of the registry file beside ``loader`` (same stem, ``.rq``); raises ``RegistrationError``
    (shown by Airflow as the loader's import error) when the query cannot be deployed."""
    loader = Path(loader).resolve()
    query = loader.with_suffix(".rq")
    settings = dataclasses.replace(settings or deployment_settings(), registry=loader.parent)
    if not query.exists():
        raise RegistrationError(query, "the query file is gone: run `csparql register --sync` to remove its loader")
    return query_dag(deployment_of(query, settings), settings)


def query_dag(deployment: Deployment, settings: Settings, conn_id: str | None = None) -> DAG:
    """The DAG that evaluates one registered query window by window (Spark through the Airflow connection
    ``conn_id`` when given, else where ``settings`` say)."""
    kind = deployment.registration_kind.lower() if deployment.registration_kind else "one-shot"
    with DAG(
        dag_id=deployment.dag_id,
        description=deployment.description,
        schedule=WindowTimetable(deployment.schedule) if deployment.schedule else None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=MAX_ACTIVE_RUNS,
        tags=["csparql", f"register-{kind}" if deployment.registration_kind else kind],
        doc_md=f"**{deployment.description}**\n\nRegistry file `{deployment.path}`\n\n```sparql\n{deployment.text}\n```",
        default_args=task_defaults(settings),
    ) as dag:
        CsparqlEvaluateWindowOperator(
            task_id="evaluate_window", query=deployment, settings=settings, conn_id=conn_id, pool=settings.pool,
            doc_md="Waits, deferred on the triggerer (no task process), until the window's streams have landed: "
                   "watermarks past the window's end plus the allowed lateness, producers' windows written; "
                   "then evaluates the window on Spark and replaces its results (with Spark Connect on the "
                   "triggerer, else in a worker).",
        )
    return dag


def stream_ingestion_dags(settings: Settings | None = None, conn_id: str | None = None,
                          registry: RegistrySnapshot | None = None) -> dict[str, DAG]:
    """One ingestion DAG per stream the registered queries read, keyed by DAG id (Spark through the Airflow
    connection ``conn_id`` when given; ``registry``: the registry already looked at, ``registry_snapshot``)."""
    settings = settings or deployment_settings()
    dags: dict[str, DAG] = {}
    sources = dict(settings.sources)
    for stream in sorted(set(ingested_streams(settings, registry)) | set(sources)):
        folder = settings.landing_folder(stream)
        dag_id = ingest_dag_id(stream)
        with DAG(
            dag_id=dag_id,
            description=f"lands the files dropped in {folder} into <{stream}>",
            schedule=timedelta(minutes=1),
            start_date=START_DATE,
            catchup=False,
            max_active_runs=1,
            default_args=task_defaults(settings),
            tags=["csparql", "ingest"],
            doc_md=f"Drop N-Triples, Turtle, TriG or N-Quads files into `{folder}`; each run lands them into "
                   f"`<{stream}>`, moves them to `done/` (or `rejected/` with the reason) and advances the "
                   "stream's watermark.",
        ) as dag:
            CsparqlIngestOperator(task_id="ingest_landed_files", stream=stream, landing=folder, settings=settings,
                                  conn_id=conn_id, pool=settings.ingest_pool, priority_weight=INGEST_PRIORITY,
                                  weight_rule="absolute")
            if stream in sources:
                CsparqlConsumeOperator(task_id="consume_source", stream=stream, source=sources[stream],
                                       settings=settings, pool=settings.ingest_pool, priority_weight=INGEST_PRIORITY,
                                       weight_rule="absolute",
                                       doc_md=f"Lands what arrived on `{sources[stream]}` since the last batch.")
        dags[dag_id] = dag
    return dags

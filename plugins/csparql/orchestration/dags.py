"""DAGs built from the registry: one per registered query, one ingestion DAG per stream the queries read.

A query's DAG is one task, ``evaluate_window``, which waits for its window on the triggerer and then evaluates
it (``EvaluateWindowOperator``); its timetable is the query's schedule (``timetable``).
Each registry file ``<name>.rq`` has a loader ``<name>.py`` beside it (written by ``csparql register``) that
calls ``registered_query_dag(__file__)``: Airflow records an import error per DAG file and marks every DAG of
a failing file stale, so one file per query is what keeps one broken query from stopping the others. The
error names the ``.rq`` file and carries the parser's message with line, column and caret.
"""

from __future__ import annotations

import dataclasses
from datetime import timedelta
from pathlib import Path

import pendulum
from airflow.sdk import DAG, Asset

from csparql.deploy.plan import Deployment, deployment_of, ingest_dag_id, ingested_streams
from csparql.deploy.registry import RegistrationError
from csparql.deploy.settings import Settings
from csparql.orchestration.operators import EvaluateWindowOperator, IngestLandedFilesOperator
from csparql.orchestration.revisions import REVISIONS
from csparql.orchestration.timetable import WindowTimetable
from csparql.storage.warehouse import OUTPUT_STREAM_PREFIX

START_DATE = pendulum.datetime(2000, 1, 1, tz="UTC")
"""The earliest instant any schedule or backfill may reach. Scheduled runs start at the latest window when a
DAG is unpaused (no catch-up); history is replayed with backfills."""


MAX_ACTIVE_RUNS = 4
"""Runs of one query DAG at a time (scheduled ones mostly wait, deferred, for their window to be complete)."""

RETRY_DELAY = timedelta(seconds=30)

INGEST_PRIORITY = 1000
"""The priority of an ingestion task, above any evaluation's (at most a few, counted upstream): when the
executor has fewer free slots than tasks are ready, fresh data lands first. Ingests also have a pool of their
own (``Settings.ingest_pool``), so no backlog of evaluations in ``Settings.pool`` holds them back."""


def task_defaults(settings: Settings) -> dict:
    """The default arguments of every csparql task: ``settings.retries`` retries, ``RETRY_DELAY`` apart. Both
    kinds of task may run again safely: an evaluation replaces its window's results, and an ingest lands each
    waiting file exactly once (``csparql.ingest.landing``)."""
    return {"retries": settings.retries, "retry_delay": RETRY_DELAY}


def stream_asset(registered_as: str) -> Asset:
    """The Airflow Asset of the stream ``REGISTER STREAM registered_as`` produces."""
    return Asset(name=f"csparql_stream_{registered_as}", uri=f"csparql://streams/{registered_as}")


def registered_query_dag(loader: str | Path, settings: Settings | None = None) -> DAG:
    """The DAG of the registry file beside ``loader`` (same stem, ``.rq``); raises ``RegistrationError``
    (shown by Airflow as the loader's import error) when the query cannot be deployed."""
    loader = Path(loader).resolve()
    query = loader.with_suffix(".rq")
    settings = dataclasses.replace(settings or Settings.from_environment(), registry=loader.parent)
    if not query.exists():
        raise RegistrationError(query, "the query file is gone: run `csparql register --sync` to remove its loader")
    return query_dag(deployment_of(query, settings), settings)


def query_dag(deployment: Deployment, settings: Settings) -> DAG:
    """The DAG that evaluates one registered query window by window."""
    kind = (deployment.plan.registration.kind.lower() if deployment.plan.registration else "one-shot")
    producer_assets = [stream_asset(s.iri.removeprefix(OUTPUT_STREAM_PREFIX)) for s in deployment.inputs if s.producer]
    with DAG(
        dag_id=deployment.dag_id,
        description=deployment.description,
        schedule=WindowTimetable(deployment.schedule) if deployment.schedule else None,
        start_date=START_DATE,
        catchup=False,
        max_active_runs=MAX_ACTIVE_RUNS,
        tags=["csparql", f"register-{kind}" if deployment.plan.registration else kind],
        doc_md=f"**{deployment.description}**\n\nRegistry file `{deployment.path}`\n\n```sparql\n{deployment.text}\n```",
        default_args=task_defaults(settings),
    ) as dag:
        EvaluateWindowOperator(
            task_id="evaluate_window", deployment=deployment, settings=settings, inlets=producer_assets,
            pool=settings.pool,
            outlets=[*([stream_asset(deployment.registered_as)] if deployment.output_stream else []), REVISIONS],
            doc_md="Waits, deferred on the triggerer (no task process), until the window's streams have landed: "
                   "watermarks past the window's end plus the allowed lateness, producers' windows written; "
                   "then evaluates the window on Spark and replaces its results.",
        )
    return dag


def stream_ingestion_dags(settings: Settings | None = None) -> dict[str, DAG]:
    """One ingestion DAG per stream the registered queries read, keyed by DAG id."""
    settings = settings or Settings.from_environment()
    dags: dict[str, DAG] = {}
    for stream in ingested_streams(settings):
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
            IngestLandedFilesOperator(task_id="ingest_landed_files", stream=stream, landing=folder,
                                      settings=settings, pool=settings.ingest_pool,
                                      priority_weight=INGEST_PRIORITY, weight_rule="absolute",
                                      outlets=[REVISIONS])
        dags[dag_id] = dag
    return dags

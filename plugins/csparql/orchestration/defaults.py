"""What every csparql DAG shares: its start date and its tasks' retries (used by the query, ingestion and
revision DAGs alike, so that none of their modules needs another's)."""

from __future__ import annotations

from datetime import timedelta

import pendulum

from csparql.deploy.settings import Settings

START_DATE = pendulum.datetime(2000, 1, 1, tz="UTC")
"""The earliest instant any schedule or backfill may reach. Scheduled runs start at the latest window when a
DAG is unpaused (no catch-up); history is replayed with backfills."""

RETRY_DELAY = timedelta(seconds=30)


def task_defaults(settings: Settings) -> dict:
    """The default arguments of every csparql task: ``settings.retries`` retries, ``RETRY_DELAY`` apart. Both
    kinds of task may run again safely: an evaluation replaces its window's results, and an ingest lands each
    waiting file exactly once (``csparql.ingest.landing``)."""
    return {"retries": settings.retries, "retry_delay": RETRY_DELAY}

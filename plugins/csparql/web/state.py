"""What the app keeps between requests: its settings, and the warehouse's statistics for the editor."""

from __future__ import annotations

import time

from fastapi import Request

from csparql.deploy.settings import Settings


def current_settings(request: Request) -> Settings:
    """The settings the app was created with, else the api-server's as every Airflow component reads them
    (``csparql.orchestration.config.deployment_settings``, read on first use: the ``[csparql]`` section, and
    the endpoint and credentials of its ``aws_conn_id`` for a warehouse in S3)."""
    state = request.app.state
    if state.csparql_settings is None:
        if state.csparql_given_settings is None:
            from csparql.orchestration.config import deployment_settings

            state.csparql_settings = deployment_settings()
        else:
            state.csparql_settings = state.csparql_given_settings
    return state.csparql_settings


_statistics_cache: dict = {}


def warehouse_statistics(settings: Settings):
    """The optimizer's statistics of the warehouse, read at most every 30 s (the editor asks on each pause
    in typing)."""
    from csparql.storage.statistics import read_statistics

    key = str(settings.warehouse.root)
    cached = _statistics_cache.get(key)
    if cached is None or time.monotonic() - cached[0] > 30:
        try:
            cached = (time.monotonic(), read_statistics(settings.warehouse))
        except Exception:  # an unreadable statistics table must not stop validation: plan without it
            from csparql.core.optimizer import SourceStatistics

            cached = (time.monotonic(), SourceStatistics({}))
        _statistics_cache[key] = cached
    return cached[1]

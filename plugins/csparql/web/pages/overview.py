"""``/``: the registered queries, each with its description, version, DAG state and latest window
(``GET /api/queries`` in JSON)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse

from csparql.deploy import monitoring
from csparql.deploy.history import text_version, versions
from csparql.deploy.plan import Deployment, deployment_of
from csparql.deploy.registry import DAG_ID, RegistrationError, read_registry_file, registry_snapshot
from csparql.deploy.settings import Settings
from csparql.web.security import allowed
from csparql.web.state import current_settings
from csparql.web.views import page, window_json

router = APIRouter()


@router.get("/", response_class=HTMLResponse)
def overview(request: Request):
    return page(request, "overview.html", queries=query_summaries(request, current_settings(request)),
                can_register=allowed(request, "POST"))


@router.get("/api/queries")
def api_queries(request: Request):
    return [summary_json(s) for s in query_summaries(request, current_settings(request))]


@dataclasses.dataclass
class QuerySummary:
    name: str
    deployment: Deployment | None
    error: str | None
    version: int | None
    dag: object
    latest: monitoring.WindowRun | None


def query_summaries(request: Request, settings: Settings) -> list[QuerySummary]:
    from csparql.storage import delta
    from csparql.web import airflow_state

    registry = registry_snapshot(settings)
    files = [p for p in registry.files if DAG_ID.fullmatch(p.stem) and allowed(request, "GET", p.stem)]
    names = [p.stem for p in files]
    dags = airflow_state.dag_states(names)
    actions = monitoring.runs_actions(settings.warehouse) if delta.exists(settings.warehouse.runs) else None
    summaries = []
    for path in files:
        name = path.stem
        try:
            deployment, error = deployment_of(path, settings, registry), None
        except RegistrationError as problem:
            deployment, error = None, problem.message.strip()
        latest = monitoring.recent_windows(settings.warehouse, name, 1, actions) if actions is not None else []
        summaries.append(QuerySummary(name, deployment, error, current_version(name, path, settings), dags[name],
                                      latest[0] if latest else None))
    return summaries


def summary_json(summary: QuerySummary) -> dict:
    return {
        "name": summary.name,
        "description": summary.deployment.description if summary.deployment else None,
        "error": summary.error,
        "version": summary.version,
        "dag": summary.dag.label,
        "latest_window": window_json(summary.latest) if summary.latest else None,
    }


def current_version(name: str, path: Path, settings: Settings) -> int | None:
    try:
        digest = text_version(read_registry_file(path)[0])
    except RegistrationError:
        return None  # its summary shows why
    numbers = [v.number for v in versions(name, settings) if v.digest == digest]
    return numbers[-1] if numbers else None

"""``/queries/NAME``: the monitor page of a query — windows, charts, lag, latest results, versions
(``GET /api/queries/NAME`` in JSON); ``/queries/NAME/versions/N``, one saved version of its text; and
``/dags/DAG_ID``, the "Query" tab of every DAG page (a DAG that is not a query says so)."""

from __future__ import annotations

import dataclasses
import re
import time

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markupsafe import Markup

from csparql.deploy import monitoring
from csparql.deploy.history import text_version, versions
from csparql.deploy.plan import deployment_of
from csparql.deploy.registry import DAG_ID, RegistrationError
from csparql.deploy.settings import Settings
from csparql.web import charts
from csparql.web.security import allowed, readable
from csparql.web.state import current_settings
from csparql.web.views import Refused, instant, page, window_json
from csparql.web.waiting import waiting_note
from csparql.core.windows import format_instant

AIRFLOW_DAG_ID = r"[A-Za-z0-9_.\-]{1,250}"
WINDOWS_SHOWN = 50
RESULT_ROWS_SHOWN = 100

router = APIRouter()


@router.get("/queries/{name}", response_class=HTMLResponse)
def query_page(request: Request, name: str):
    return page(request, "query.html", **monitor(request, current_settings(request), name))


@router.get("/api/queries/{name}")
def api_query(request: Request, name: str):
    return monitor_json(monitor(request, current_settings(request), name))


@router.get("/queries/{name}/versions/{number}", response_class=HTMLResponse)
def version_page(request: Request, name: str, number: int):
    settings = current_settings(request)
    readable(request, settings, name, must_exist=False)
    saved = {v.number: v for v in versions(name, settings)}
    if number not in saved:
        raise Refused(404, f"{name} has no version {number}")
    return page(request, "version.html", name=name, version=saved[number], text=saved[number].text,
                versions=list(saved.values()))


@router.get("/dags/{dag_id}", response_class=HTMLResponse)
def dag_tab(request: Request, dag_id: str):
    settings = current_settings(request)
    if DAG_ID.fullmatch(dag_id) and (settings.registry / f"{dag_id}.rq").is_file():
        return page(request, "query.html", tab=True, **monitor(request, settings, dag_id))
    if not re.fullmatch(AIRFLOW_DAG_ID, dag_id):
        raise Refused(400, "this is not a DAG id")
    return page(request, "not_a_query.html", tab=True, dag_id=dag_id,
                ingest=dag_id.startswith("ingest_"))


def monitor(request: Request, settings: Settings, name: str) -> dict:
    """Everything the monitor page of a query shows."""
    from csparql.web import airflow_state
    from csparql.storage.watermarks import read_watermarks

    path = readable(request, settings, name)
    text = path.read_text(encoding="utf-8")
    try:
        deployment, error = deployment_of(path, settings), None
    except RegistrationError as problem:
        deployment, error = None, problem.message.strip()
    saved = versions(name, settings)
    numbers = {v.digest: v.number for v in saved}
    dag = airflow_state.dag_states([name])[name]
    import_error = airflow_state.import_errors([name]).get(name) if dag.exists else None
    windows = monitoring.recent_windows(settings.warehouse, name, WINDOWS_SHOWN)
    runs = airflow_state.dag_runs(name, deployment.schedule if deployment else None) if dag.exists else []
    views = monitoring.window_views(windows, runs, WINDOWS_SHOWN, deployment.schedule if deployment else None)
    lags = monitoring.stream_lags(deployment, read_watermarks(settings.warehouse), windows) if deployment else []
    waiting = waiting_note(deployment, lags, time.time_ns() // 1000) if dag.exists else None
    evaluated = [w for w in windows if w.state in ("complete", "late", "evaluated")]
    time_chart = charts.time_chart([(w.window_end, w.duration_ms or 0) for w in evaluated],
                                   title="Evaluation time", unit="ms", chart_id="chart-duration")
    rows_chart = charts.time_chart([(w.window_end, w.rows_written or 0) for w in evaluated],
                                   title="Rows written", unit="rows", chart_id="chart-rows", bars=True)
    counts = {state: sum(1 for v in views if v.state == state) for state in monitoring.STATES}
    # an Airflow run still in progress after its window's results were committed (the scheduler marks it done
    # a moment later) keeps the page refreshing, so that its run and log links appear
    in_progress = not dag.exists or any(v.state == "running" for v in views) or any(r.in_progress for r in runs)
    signature = monitoring.page_signature(dag.label, dag.is_paused, views)
    return {
        "name": name, "text": text, "deployment": deployment, "error": error, "versions": saved,
        "version_numbers": numbers, "current_version": numbers.get(text_version(text)), "digest": text_version(text),
        "dag": dag, "import_error": import_error, "views": views, "lags": lags, "waiting": waiting, "counts": counts,
        "time_chart": Markup(time_chart), "rows_chart": Markup(rows_chart),
        "latest": monitoring.latest_results(settings.warehouse, name, RESULT_ROWS_SHOWN),
        "staleness": monitoring.window_staleness(settings.warehouse, name),
        "refresh": 5 if in_progress else None, "signature": signature,
        "can_edit": allowed(request, "PUT", name), "can_trigger": allowed(request, "POST", name, run=True),
        "can_delete": allowed(request, "DELETE", name),
    }


def monitor_json(data: dict) -> dict:
    latest = data["latest"]
    return {
        "name": data["name"],
        "signature": data["signature"],
        "version": data["current_version"],
        "digest": data["digest"],
        "error": data["error"],
        "dag": {"exists": data["dag"].exists, "paused": data["dag"].is_paused, "state": data["dag"].label,
                "import_error": data["import_error"]},
        "windows": [
            {"window_start": instant(v.window_start), "window_end": format_instant(v.window_end), "state": v.state,
             "detail": v.detail, "dag_run_id": v.dag_run.run_id if v.dag_run else None,
             **({k: val for k, val in window_json(v.evaluation).items() if k not in ("window_start", "window_end", "state")}
                if v.evaluation else {}),
             "stale": _staleness_json(data["staleness"].get(v.window_end))}
            for v in data["views"]
        ],
        "lags": [dataclasses.asdict(lag) for lag in data["lags"]],
        "waiting": None if data["waiting"] is None else {
            "text": data["waiting"].text, "window_end": instant(data["waiting"].window_end)
            if data["waiting"].window_end is not None else None},
        "latest_results": None if latest is None else {
            "window_end": format_instant(latest.window_end), "columns": list(latest.columns),
            "rows": [list(r) for r in latest.rows], "total": latest.total, "version": latest.version},
    }


def _staleness_json(staleness: monitoring.Staleness | None) -> dict | None:
    if staleness is None:
        return None
    return {"status": staleness.status, "reasons": list(staleness.reasons), "detected_at": format_instant(staleness.detected_at),
            "late_triples": staleness.late_triples, "lateness_max_ms": staleness.lateness_max_ms}

"""Acting on a query's DAG: ``POST /queries/NAME/pause``, ``/unpause`` and ``/trigger`` (a run for a window
end, or now); ``/queries/NAME/delete`` asks before deleting, ``POST`` to it unregisters the query, deletes its
DAG and, when asked, drops its results."""

from __future__ import annotations

import shutil
import time

from fastapi import APIRouter, Form, Request
from fastapi.responses import HTMLResponse

from csparql.deploy import monitoring
from csparql.deploy.registration import unregister
from csparql.web.security import allowed, readable, require
from csparql.web.state import current_settings
from csparql.web.views import Refused, done, page, user_name
from csparql.core.windows import parse_evaluation_instant

router = APIRouter()


@router.post("/queries/{name}/pause")
def pause(request: Request, name: str):
    return set_paused(request, name, True)


@router.post("/queries/{name}/unpause")
def unpause(request: Request, name: str):
    return set_paused(request, name, False)


def set_paused(request: Request, name: str, paused: bool):
    from csparql.web import airflow_state

    readable(request, current_settings(request), name)
    require(request, "PUT", name, f"{'pause' if paused else 'unpause'} {name}")
    if not airflow_state.set_paused(name, paused):
        raise Refused(409, f"Airflow has not parsed the DAG {name} yet: try again in a few seconds")
    return done(request, f"/queries/{name}", "paused" if paused else "unpaused", {"name": name})


def past_window_instant(settings, name: str, at: int) -> int | None:
    """The evaluation instant of the window closing at or before ``at`` when it is a past window of the
    query's schedule (before the one it evaluates now); None for the current window or a one-shot query."""
    from csparql.deploy.plan import deployment_of
    from csparql.deploy.registry import RegistrationError

    try:
        schedule = deployment_of(settings.registry / f"{name}.rq", settings).schedule
    except RegistrationError:
        return None
    if schedule is None:
        return None
    window = schedule.latest_evaluation(at)
    return window.at if window.at < schedule.latest_evaluation(time.time_ns() // 1000).at else None


@router.post("/queries/{name}/trigger")
def trigger(request: Request, name: str, window_end: str = Form(""), backfill: str = Form("")):
    """A run of the window closing at or before ``window_end`` (now when empty). A past window of the
    schedule asked with ``backfill`` (the waiting note's button), or while the DAG's active runs are all taken
    (by scheduled runs waiting for their data, say), is evaluated as a one-window backfill, which none of those
    holds up (``airflow_state.backfill_window``); a manual run otherwise."""
    from csparql.web import airflow_state

    readable(request, current_settings(request), name)
    require(request, "POST", name, f"trigger runs of {name}", run=True)
    if window_end.strip():
        try:
            at = parse_evaluation_instant(window_end.strip())
        except ValueError as error:
            raise Refused(400, f"window end: {error} (write e.g. 2010-03-22T08:35:00Z)") from None
    else:
        at = time.time_ns() // 1000
    past = past_window_instant(current_settings(request), name, at)
    if past is not None and not backfill and not airflow_state.runs_at_limit(name):
        past = None  # a manual run starts at once
    try:
        if past is not None:  # never behind scheduled runs that wait for data: a backfill of that window
            try:
                run_id = airflow_state.backfill_window(name, past, user_name(request))
            except airflow_state.TriggerRefused:
                run_id = airflow_state.trigger(name, at, user_name(request))
        else:
            run_id = airflow_state.trigger(name, at, user_name(request))
    except airflow_state.TriggerRefused as error:
        raise Refused(409, str(error)) from None
    return done(request, f"/queries/{name}", "triggered", {"name": name, "run_id": run_id})


@router.get("/queries/{name}/delete", response_class=HTMLResponse)
def delete_page(request: Request, name: str):
    settings = current_settings(request)
    readable(request, settings, name)
    return page(request, "delete.html", name=name, kind=monitoring.result_kind(settings.warehouse, name),
                can_delete=allowed(request, "DELETE", name))


@router.post("/queries/{name}/delete")
def delete(request: Request, name: str, confirm: str = Form(""), drop_results: str = Form("")):
    from csparql.web import airflow_state

    settings = current_settings(request)
    readable(request, settings, name)
    require(request, "DELETE", name, f"delete {name}")
    if confirm != name:
        raise Refused(400, f"nothing was deleted: confirm by sending confirm={name} (the delete page asks first)")
    if airflow_state.running_tasks(name):
        raise Refused(409, f"nothing was deleted: a task of {name} is running; wait for it, or pause the DAG first")
    unregister(name, settings, by=user_name(request))
    airflow_state.delete_dag(name)
    dropped = []
    if drop_results == "yes":
        folder = settings.warehouse.root / "results" / name
        if folder.is_dir():
            shutil.rmtree(folder)
            dropped.append(str(folder))
    return done(request, "/", "deleted", {"name": name, "results_dropped": dropped})

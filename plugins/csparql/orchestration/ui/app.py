"""The C-SPARQL pages inside Airflow: a FastAPI app the plugin mounts at ``/csparql`` in the api-server.

Pages (server-rendered HTML, a little JavaScript, nothing from the network):

    /                          the registered queries
    /register                  register a query: an editor validated as you type, with plan and windows
    /queries/NAME              monitor a query: windows, charts, lag, latest results, versions
    /queries/NAME/edit         edit it (a new version); /queries/NAME/delete asks before deleting
    /queries/NAME/versions/N   one saved version of its text
    /streams                   stream tables (watermark, triples per hour, files, size) and static graphs
    /dags/DAG_ID               the "Query" tab of every DAG page (a DAG that is not a query says so)

JSON: ``POST /api/check`` (the editor's validation), ``GET /api/queries`` and ``GET /api/queries/NAME``.
Changes: ``POST /queries`` (register), ``POST /queries/NAME`` (save an edit), ``POST /queries/NAME/pause``,
``/unpause``, ``/trigger`` and ``/delete``.

Security. Airflow does not protect plugin apps, so this one does, on every route (pages, JSON, static files,
unknown paths): the user is Airflow's own — the ``Authorization: Bearer`` token of API clients, else the UI's
``_token`` cookie — and a request without a valid one gets 401. Changing the registry needs the auth manager's
permission to edit that DAG (403 otherwise). A change the cookie authenticates must come from a page of this
site (its ``Origin``, else its ``Referer``), so another site cannot make a logged-in browser send it; only a
valid bearer token exempts a change, not the mere presence of an ``Authorization`` header (``Basic …``, say).
Query names follow the registry's ``DAG_ID`` rule before any file is touched; every query text is escaped
(Jinja2 autoescaping, ``textContent`` in scripts).
"""

from __future__ import annotations

import dataclasses
import re
import shutil
import time
from functools import lru_cache
from importlib import resources
from pathlib import Path
from urllib.parse import quote, urlsplit

from fastapi import FastAPI, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape
from markupsafe import Markup

from csparql import monitoring
from csparql.deployment import (
    DAG_ID,
    Deployment,
    RegistrationError,
    Settings,
    check_registry_name,
    deployment_of,
    register_text,
    registry_files,
    text_version,
    unregister,
    versions,
)
from csparql.orchestration.ui import charts
from csparql.preview import MAX_TEXT, preview
from csparql.windows import format_instant, parse_evaluation_instant

PREFIX = "/csparql"
SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
STATIC_FILES = {"csparql.css": "text/css; charset=utf-8", "csparql.js": "text/javascript; charset=utf-8",
                "editor.js": "text/javascript; charset=utf-8"}
AIRFLOW_DAG_ID = r"[A-Za-z0-9_.\-]{1,250}"
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "form-action 'self'; frame-ancestors 'self'",
    "X-Frame-Options": "SAMEORIGIN",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}
WINDOWS_SHOWN = 50
RESULT_ROWS_SHOWN = 100


class Refused(Exception):
    """A request answered with ``status`` and a message saying what is wrong; nothing was changed."""

    def __init__(self, status: int, message: str, page: str | None = None, context: dict | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.page = page
        self.context = context or {}


# --- presentation helpers ----------------------------------------------------------------------------------


def instant(micros: int | None) -> str:
    return format_instant(micros) if micros is not None else "—"


def duration(micros: int | None) -> str:
    """A duration for people: ``0s``, ``42s``, ``24m 59s``, ``3h 5m``, ``2d 4h``."""
    if micros is None:
        return "—"
    seconds = round(micros / 1e6)
    if seconds < 60:
        return f"{micros / 1e6:.3g}s" if 0 < micros < 10_000_000 and micros % 1_000_000 else f"{seconds}s"
    parts = []
    for unit, length in (("d", 86_400), ("h", 3_600), ("m", 60), ("s", 1)):
        if seconds >= length:
            parts.append(f"{seconds // length}{unit}")
            seconds %= length
    return " ".join(parts[:2])


def moment(micros: int | None) -> str:
    """An instant to the second (when something happened, not a window bound)."""
    if micros is None:
        return "—"
    return format_instant(micros - micros % 1_000_000)


NUMERIC_TYPES = {f"http://www.w3.org/2001/XMLSchema#{t}" for t in ("integer", "decimal", "double", "boolean")}


def term(text: str | None) -> str:
    """An RDF term as N-Triples, numbers and booleans as their plain lexical form (``9`` for
    ``"9"^^xsd:integer``); IRIs keep their angle brackets."""
    if text is None:
        return ""
    if text.startswith('"') and '"^^<' in text:
        lexical, datatype = text[1:].rsplit('"^^<', 1)
        if datatype.rstrip(">") in NUMERIC_TYPES and "\\" not in lexical:
            return lexical
    return text


def size(count: int | None) -> str:
    if count is None:
        return "—"
    for unit in ("B", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:,.0f} {unit}" if unit == "B" else f"{count:,.1f} {unit}"
        count /= 1024
    return f"{count:,.1f} TiB"


@lru_cache(maxsize=1)
def templates() -> Environment:
    environment = Environment(loader=PackageLoader("csparql.orchestration.ui", "templates"),
                              autoescape=select_autoescape(default=True, default_for_string=True))
    environment.filters.update(instant=instant, duration=duration, size=size, moment=moment, term=term,
                               number=lambda n: "—" if n is None else f"{n:,}")
    return environment


# --- who is asking ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Login:
    """Airflow's user for a request, and whether its ``Authorization: Bearer`` token authenticated it (a
    browser does not add one to a request another site makes it send) rather than the UI's cookie."""

    user: object
    by_bearer_token: bool


async def login(request: Request) -> Login:
    """The request's login, decided as Airflow's own API decides it: a bearer token as Airflow parses the
    ``Authorization`` header (scheme ``Bearer`` in any case, then a non-empty token) authenticates the request,
    else the ``_token`` cookie does; any other header (``Basic``, ``Token``, a bare ``Bearer``) is ignored, so
    the cookie authenticates. ``Refused(401)`` without a valid login."""
    from fastapi import HTTPException

    from airflow.api_fastapi.core_api.security import bearer_scheme, get_user

    try:
        credentials = await bearer_scheme(request)
        user = await get_user(request, None, credentials)
    except HTTPException as error:
        raise Refused(401, f"log in to Airflow first ({error.detail})") from None
    return Login(user, by_bearer_token=credentials is not None and credentials.scheme.lower() == "bearer")


def same_origin(request: Request) -> bool:
    """Whether a cookie-authenticated change comes from a page of this site: its Origin (else Referer) has
    the host the request was sent to."""
    source = request.headers.get("origin") or request.headers.get("referer")
    if not source or source == "null":
        return False
    host = request.headers.get("host", "")
    return urlsplit(source).netloc.lower() == host.lower()


def allowed(request: Request, method: str, dag_id: str | None = None, run: bool = False) -> bool:
    """Whether the request's user may do ``method`` on the DAG (on its runs with ``run``)."""
    from airflow.api_fastapi.app import get_auth_manager
    from airflow.api_fastapi.auth.managers.models.resource_details import DagAccessEntity, DagDetails

    return get_auth_manager().is_authorized_dag(
        method=method, user=request.state.csparql_user,
        access_entity=DagAccessEntity.RUN if run else None,
        details=DagDetails(id=dag_id) if dag_id else None,
    )


def require(request: Request, method: str, dag_id: str | None, what: str, run: bool = False) -> None:
    if not allowed(request, method, dag_id, run):
        raise Refused(403, f"you may not {what}: it needs a user allowed to edit DAGs")


def user_name(request: Request) -> str | None:
    user = getattr(request.state, "csparql_user", None)
    return user.get_name() if user is not None else None


# --- the app ---------------------------------------------------------------------------------------------


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app; ``settings`` default to the environment's (read on first use)."""
    app = FastAPI(title="csparql", docs_url=None, redoc_url=None, openapi_url=None)
    state: dict = {}

    def current_settings() -> Settings:
        if "settings" not in state:
            state["settings"] = settings or Settings.from_environment()
        return state["settings"]

    @app.middleware("http")
    async def require_login(request: Request, call_next):
        try:
            requester = await login(request)
            request.state.csparql_user = requester.user
            if request.method not in SAFE_METHODS and not requester.by_bearer_token and not same_origin(request):
                raise Refused(403, "refused: the request does not come from a page of this site (its Origin "
                                   "or Referer header is missing or names another site)")
        except Refused as refused:
            return protected(refusal_response(request, refused))
        return protected(await call_next(request))

    def protected(response: Response) -> Response:
        """Only Airflow's own pages may frame these (no clickjacking), and nothing but this site's own files
        runs or loads in them."""
        response.headers.update(SECURITY_HEADERS)
        return response

    @app.exception_handler(Refused)
    async def on_refused(request: Request, refused: Refused):
        return refusal_response(request, refused)

    def context(request: Request, **values) -> dict:
        root = request.scope.get("root_path", "").rstrip("/")
        return {"base": root, "airflow": root.removesuffix(PREFIX), "user": user_name(request),
                "done": request.query_params.get("done"), **values}

    def page(request: Request, template: str, status: int = 200, **values) -> HTMLResponse:
        html = templates().get_template(template).render(context(request, **values))
        return HTMLResponse(html, status_code=status, headers={"Cache-Control": "no-store"})

    def refusal_response(request: Request, refused: Refused) -> Response:
        headers = {"Cache-Control": "no-store"}
        if refused.status == 401:
            headers["WWW-Authenticate"] = "Bearer"
        if wants_json(request) or refused.page is None:
            if wants_json(request):
                return JSONResponse({"detail": refused.message}, status_code=refused.status, headers=headers)
            html = templates().get_template("refused.html").render(
                context(request, status=refused.status, message=refused.message))
            return HTMLResponse(html, status_code=refused.status, headers=headers)
        html = templates().get_template(refused.page).render(
            context(request, **refused.context, refusal=refused.message))
        return HTMLResponse(html, status_code=refused.status, headers=headers)

    # --- static files (behind the login like everything else) -------------------------------------------

    @app.get("/static/{name}")
    def static(name: str):
        if name not in STATIC_FILES:
            raise Refused(404, f"no static file {name!r}")
        body = resources.files("csparql.orchestration.ui").joinpath("static", name).read_bytes()
        return Response(body, media_type=STATIC_FILES[name], headers={"Cache-Control": "private, max-age=300"})

    # --- reading ----------------------------------------------------------------------------------------

    @app.get("/", response_class=HTMLResponse)
    def overview(request: Request):
        return page(request, "overview.html", queries=query_summaries(request, current_settings()),
                    can_register=allowed(request, "POST"))

    @app.get("/api/queries")
    def api_queries(request: Request):
        return [summary_json(s) for s in query_summaries(request, current_settings())]

    @app.get("/queries/{name}", response_class=HTMLResponse)
    def query_page(request: Request, name: str):
        return page(request, "query.html", **monitor(request, current_settings(), name))

    @app.get("/api/queries/{name}")
    def api_query(request: Request, name: str):
        return monitor_json(monitor(request, current_settings(), name))

    @app.get("/queries/{name}/versions/{number}", response_class=HTMLResponse)
    def version_page(request: Request, name: str, number: int):
        settings = current_settings()
        readable(request, settings, name, must_exist=False)
        saved = {v.number: v for v in versions(name, settings)}
        if number not in saved:
            raise Refused(404, f"{name} has no version {number}")
        return page(request, "version.html", name=name, version=saved[number], text=saved[number].text,
                    versions=list(saved.values()))

    @app.get("/dags/{dag_id}", response_class=HTMLResponse)
    def dag_tab(request: Request, dag_id: str):
        settings = current_settings()
        if DAG_ID.fullmatch(dag_id) and (settings.registry / f"{dag_id}.rq").is_file():
            return page(request, "query.html", tab=True, **monitor(request, settings, dag_id))
        if not re.fullmatch(AIRFLOW_DAG_ID, dag_id):
            raise Refused(400, "this is not a DAG id")
        return page(request, "not_a_query.html", tab=True, dag_id=dag_id,
                    ingest=dag_id.startswith("ingest_"))

    @app.get("/streams", response_class=HTMLResponse)
    def streams_page(request: Request):
        return page(request, "streams.html", **streams(current_settings()))

    # --- registering and editing -----------------------------------------------------------------------

    @app.get("/register", response_class=HTMLResponse)
    def register_page(request: Request):
        return page(request, "editor.html", mode="register", name="", text=EXAMPLE, can_save=allowed(request, "POST"))

    @app.post("/api/check")
    async def api_check(request: Request):
        try:
            body = await request.json()
        except ValueError:
            raise Refused(400, "send a JSON object {\"text\": …, \"name\": …}") from None
        if not isinstance(body, dict) or not isinstance(body.get("text", ""), str) or not isinstance(body.get("name") or "", str):
            raise Refused(400, "send a JSON object {\"text\": …, \"name\": …} with strings")
        from starlette.concurrency import run_in_threadpool

        def check() -> dict:
            settings = current_settings()
            outcome = preview(body.get("text", ""), settings, body.get("name") or None,
                              statistics=warehouse_statistics(settings))
            return preview_json(outcome, settings, body.get("name") or outcome.name)

        return await run_in_threadpool(check)  # parsing and reading statistics must not block the server

    @app.post("/queries")
    def register_query(request: Request, text: str = Form(""), name: str = Form(""),
                       upload: UploadFile | None = File(None)):
        settings = current_settings()
        require(request, "POST", None, "register queries")
        text = uploaded_text(upload) if upload is not None and upload.filename else text
        name = name.strip()
        editor = {"mode": "register", "name": name, "text": text, "can_save": True}
        try:
            if name:
                check_registry_name(name, settings)
            outcome = preview(text, settings, name or None)
            if not outcome.ok:
                raise Refused(400, "the query was not registered: " + "; ".join(
                    problem_text(p) for p in outcome.problems), "editor.html", editor)
            name = outcome.name
            require(request, "POST", name, f"register {name}")
            if (settings.registry / f"{name}.rq").exists():
                raise Refused(409, f"a query is already registered as {name}: edit it, or choose another name",
                              "editor.html", editor)
            register_text(text, settings, name=name, by=user_name(request))
        except RegistrationError as error:
            raise Refused(400, f"the query was not registered: {error.message.strip()}", "editor.html", editor) from None
        return done(request, f"/queries/{name}", "registered", {"name": name})

    @app.get("/queries/{name}/edit", response_class=HTMLResponse)
    def edit_page(request: Request, name: str):
        settings = current_settings()
        path = readable(request, settings, name)
        return page(request, "editor.html", mode="edit", name=name, text=path.read_text(encoding="utf-8"),
                    can_save=allowed(request, "PUT", name))

    @app.post("/queries/{name}")
    def save_query(request: Request, name: str, text: str = Form(""), upload: UploadFile | None = File(None)):
        settings = current_settings()
        readable(request, settings, name)
        require(request, "PUT", name, f"edit {name}")
        text = uploaded_text(upload) if upload is not None and upload.filename else text
        editor = {"mode": "edit", "name": name, "text": text, "can_save": True}
        outcome = preview(text, settings, name)
        if not outcome.ok:
            raise Refused(400, "the change was not saved: " + "; ".join(problem_text(p) for p in outcome.problems),
                          "editor.html", editor)
        try:
            register_text(text, settings, name=name, replace=True, by=user_name(request))
        except RegistrationError as error:
            raise Refused(400, f"the change was not saved: {error.message.strip()}", "editor.html", editor) from None
        return done(request, f"/queries/{name}", "saved", {"name": name})

    # --- acting on the DAG ----------------------------------------------------------------------------

    @app.post("/queries/{name}/pause")
    def pause(request: Request, name: str):
        return set_paused(request, name, True)

    @app.post("/queries/{name}/unpause")
    def unpause(request: Request, name: str):
        return set_paused(request, name, False)

    def set_paused(request: Request, name: str, paused: bool):
        from csparql.orchestration.ui import airflow_state

        readable(request, current_settings(), name)
        require(request, "PUT", name, f"{'pause' if paused else 'unpause'} {name}")
        if not airflow_state.set_paused(name, paused):
            raise Refused(409, f"Airflow has not parsed the DAG {name} yet: try again in a few seconds")
        return done(request, f"/queries/{name}", "paused" if paused else "unpaused", {"name": name})

    @app.post("/queries/{name}/trigger")
    def trigger(request: Request, name: str, window_end: str = Form("")):
        from csparql.orchestration.ui import airflow_state

        readable(request, current_settings(), name)
        require(request, "POST", name, f"trigger runs of {name}", run=True)
        if window_end.strip():
            try:
                at = parse_evaluation_instant(window_end.strip())
            except ValueError as error:
                raise Refused(400, f"window end: {error} (write e.g. 2010-03-22T08:35:00Z)") from None
        else:
            at = time.time_ns() // 1000
        try:
            run_id = airflow_state.trigger(name, at, user_name(request))
        except airflow_state.TriggerRefused as error:
            raise Refused(409, str(error)) from None
        return done(request, f"/queries/{name}", "triggered", {"name": name, "run_id": run_id})

    @app.get("/queries/{name}/delete", response_class=HTMLResponse)
    def delete_page(request: Request, name: str):
        settings = current_settings()
        readable(request, settings, name)
        return page(request, "delete.html", name=name, kind=monitoring.result_kind(settings.warehouse, name),
                    can_delete=allowed(request, "DELETE", name))

    @app.post("/queries/{name}/delete")
    def delete(request: Request, name: str, confirm: str = Form(""), drop_results: str = Form("")):
        from csparql.orchestration.ui import airflow_state

        settings = current_settings()
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

    def done(request: Request, where: str, what: str, details: dict) -> Response:
        if wants_json(request):
            return JSONResponse({"ok": True, "done": what, **details})
        root = request.scope.get("root_path", "").rstrip("/")
        return RedirectResponse(f"{root}{where}?done={quote(what)}", status_code=303)

    return app


def wants_json(request: Request) -> bool:
    return request.url.path.startswith(f"{request.scope.get('root_path', '').rstrip('/')}/api/") or (
        "application/json" in request.headers.get("accept", "") and "text/html" not in request.headers.get("accept", ""))


def uploaded_text(upload: UploadFile) -> str:
    data = upload.file.read(MAX_TEXT * 4 + 1)
    if len(data) > MAX_TEXT * 4:
        raise Refused(413, f"the uploaded file is too large: a query file has at most {MAX_TEXT:,} characters")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise Refused(400, f"the uploaded file {upload.filename!r} is not UTF-8 text (byte {error.start})") from None


def problem_text(problem) -> str:
    where = f"line {problem.line}, column {problem.column}: " if problem.line else ""
    return where + problem.message


EXAMPLE = """REGISTER QUERY CarsPerTollgate COMPUTED EVERY 1m AS
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?tollgate ?passages
FROM STREAM <http://streams.org/milantollgates.trdf> [RANGE 10m STEP 1m]
WHERE { ?tollgate t:registers ?car . }
AGGREGATE { (?passages, COUNT, {?tollgate}) }
"""


# --- what the pages show ---------------------------------------------------------------------------------


def readable(request: Request, settings: Settings, name: str, must_exist: bool = True) -> Path:
    """The registry file of ``name``, after checking the name and that the user may read that DAG."""
    try:
        check_registry_name(name, settings)
    except RegistrationError as error:
        raise Refused(400, error.message) from None
    if not allowed(request, "GET", name):
        raise Refused(403, f"you may not see the DAG {name}")
    path = settings.registry / f"{name}.rq"
    if must_exist and not path.is_file():
        raise Refused(404, f"no query is registered as {name}")
    return path


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
            from csparql.optimizer import SourceStatistics

            cached = (time.monotonic(), SourceStatistics({}))
        _statistics_cache[key] = cached
    return cached[1]


def preview_json(outcome, settings: Settings, name: str | None) -> dict:
    existing = None
    if outcome.ok and name and (settings.registry / f"{name}.rq").is_file():
        saved = versions(name, settings)
        existing = {"name": name, "version": saved[-1].number if saved else None}
    return {
        "ok": outcome.ok,
        "problems": [p.to_dict() for p in outcome.problems],
        "name": outcome.name,
        "form": outcome.form,
        "description": outcome.description,
        "schedule": outcome.schedule,
        "streams": [{"iri": iri, "window": window} for iri, window in outcome.streams],
        "output_stream": outcome.output_stream,
        "optimized": outcome.optimized,
        "algebra": outcome.algebra,
        "next_runs": [
            {"at": format_instant(r.at), "window_start": instant(r.window_start), "window_end": format_instant(r.window_end),
             "waits_for": [f"<{iri}> watermark ≥ {format_instant(t)}" for iri, t in sorted(r.streams.items())]
             + [f"{q} windows ending {', '.join(format_instant(e) for e in ends)}" for q, ends in sorted(r.producers.items())]}
            for r in outcome.next_runs
        ],
        "registered": existing,
    }


@dataclasses.dataclass
class QuerySummary:
    name: str
    deployment: Deployment | None
    error: str | None
    version: int | None
    dag: object
    latest: monitoring.WindowRun | None


def query_summaries(request: Request, settings: Settings) -> list[QuerySummary]:
    from csparql.orchestration.ui import airflow_state
    from csparql.storage import delta

    files = [p for p in registry_files(settings) if DAG_ID.fullmatch(p.stem) and allowed(request, "GET", p.stem)]
    names = [p.stem for p in files]
    dags = airflow_state.dag_states(names)
    actions = monitoring.runs_actions(settings.warehouse) if delta.exists(settings.warehouse.runs) else None
    summaries = []
    for path in files:
        name = path.stem
        try:
            deployment, error = deployment_of(path, settings), None
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
    digest = text_version(path.read_text(encoding="utf-8"))
    numbers = [v.number for v in versions(name, settings) if v.digest == digest]
    return numbers[-1] if numbers else None


def monitor(request: Request, settings: Settings, name: str) -> dict:
    """Everything the monitor page of a query shows."""
    from csparql.orchestration.ui import airflow_state
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
        "dag": dag, "import_error": import_error, "views": views, "lags": lags, "counts": counts,
        "time_chart": Markup(time_chart), "rows_chart": Markup(rows_chart),
        "latest": monitoring.latest_results(settings.warehouse, name, RESULT_ROWS_SHOWN),
        "refresh": 5 if in_progress else None, "signature": signature,
        "can_edit": allowed(request, "PUT", name), "can_trigger": allowed(request, "POST", name, run=True),
        "can_delete": allowed(request, "DELETE", name),
    }


def window_json(window: monitoring.WindowRun) -> dict:
    return {"window_start": instant(window.window_start), "window_end": format_instant(window.window_end),
            "state": window.state, "triples_read": window.total_triples_read, "rows_written": window.rows_written,
            "duration_ms": window.duration_ms, "version": window.version, "error": window.error}


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
                if v.evaluation else {})}
            for v in data["views"]
        ],
        "lags": [dataclasses.asdict(lag) for lag in data["lags"]],
        "latest_results": None if latest is None else {
            "window_end": format_instant(latest.window_end), "columns": list(latest.columns),
            "rows": [list(r) for r in latest.rows], "total": latest.total, "version": latest.version},
    }


def streams(settings: Settings) -> dict:
    """Every stream table with its statistics and chart, the queries reading it, and the static graphs."""
    from csparql.deployment import ingest_dag_id

    readers: dict[str, list[str]] = {}
    for path in registry_files(settings):
        try:
            deployment = deployment_of(path, settings)
        except RegistrationError:
            continue
        for stream in deployment.inputs:
            readers.setdefault(stream.iri, []).append(deployment.name)
    stream_rows = []
    for stream in monitoring.stream_statistics(settings.warehouse):
        series = monitoring.hourly_series(stream.per_hour, 48)
        chart = charts.time_chart(series, title="Triples per hour", unit="triples", bars=True,
                                  chart_id=f"chart-{Path(stream.folder).name}")
        stream_rows.append({"stream": stream, "chart": Markup(chart), "readers": readers.get(stream.iri, []),
                            "ingest_dag": ingest_dag_id(stream.iri) if not stream.produced_by else None})
    return {"streams": stream_rows, "graphs": monitoring.static_graphs(settings.warehouse),
            "warehouse": str(settings.warehouse.root)}


app = create_app()
"""The app the plugin mounts."""

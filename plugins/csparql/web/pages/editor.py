"""``/register`` and ``/queries/NAME/edit``: the editor, validated as you type (``POST /api/check`` previews
the text: its problems, or its plan and next windows); ``POST /queries`` registers a query (typed or
uploaded), ``POST /queries/NAME`` saves an edit as a new version."""

from __future__ import annotations

from fastapi import APIRouter, File, Form, Request, UploadFile
from fastapi.responses import HTMLResponse

from csparql.deploy.history import versions
from csparql.deploy.preview import MAX_TEXT, preview
from csparql.deploy.registration import register_text
from csparql.deploy.registry import RegistrationError, check_registry_name
from csparql.deploy.settings import Settings
from csparql.web.security import allowed, readable, require
from csparql.web.state import current_settings, warehouse_statistics
from csparql.web.views import Refused, done, instant, page, user_name
from csparql.core.windows import format_instant

router = APIRouter()


@router.get("/register", response_class=HTMLResponse)
def register_page(request: Request):
    return page(request, "editor.html", **register_editor(allowed(request, "POST")))


def register_editor(can_save: bool, name: str = "", text: str = "") -> dict:
    """What the register editor shows: ``text`` (empty at first, so a paste replaces nothing), the example
    its *Insert an example* button puts in (``EXAMPLE``), and whether it may save."""
    return {"mode": "register", "name": name, "text": text, "example": EXAMPLE, "can_save": can_save}


@router.post("/api/check")
async def api_check(request: Request):
    try:
        body = await request.json()
    except ValueError:
        raise Refused(400, "send a JSON object {\"text\": …, \"name\": …}") from None
    if not isinstance(body, dict) or not isinstance(body.get("text", ""), str) or not isinstance(body.get("name") or "", str):
        raise Refused(400, "send a JSON object {\"text\": …, \"name\": …} with strings")
    from starlette.concurrency import run_in_threadpool

    def check() -> dict:
        settings = current_settings(request)
        outcome = preview(body.get("text", ""), settings, body.get("name") or None,
                          statistics=warehouse_statistics(settings))
        return preview_json(outcome, settings, body.get("name") or outcome.name)

    return await run_in_threadpool(check)  # parsing and reading statistics must not block the server


@router.post("/queries")
def register_query(request: Request, text: str = Form(""), name: str = Form(""),
                   upload: UploadFile | None = File(None)):
    settings = current_settings(request)
    require(request, "POST", None, "register queries")
    text = uploaded_text(upload) if upload is not None and upload.filename else text
    name = name.strip()
    editor = register_editor(True, name, text)
    try:
        if name:
            check_registry_name(name, settings)
        outcome = preview(text, settings, name or None, plans=False)
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


@router.get("/queries/{name}/edit", response_class=HTMLResponse)
def edit_page(request: Request, name: str):
    settings = current_settings(request)
    path = readable(request, settings, name)
    return page(request, "editor.html", mode="edit", name=name, text=path.read_text(encoding="utf-8"),
                can_save=allowed(request, "PUT", name))


@router.post("/queries/{name}")
def save_query(request: Request, name: str, text: str = Form(""), upload: UploadFile | None = File(None)):
    settings = current_settings(request)
    readable(request, settings, name)
    require(request, "PUT", name, f"edit {name}")
    text = uploaded_text(upload) if upload is not None and upload.filename else text
    editor = {"mode": "edit", "name": name, "text": text, "can_save": True}
    outcome = preview(text, settings, name, plans=False)
    if not outcome.ok:
        raise Refused(400, "the change was not saved: " + "; ".join(problem_text(p) for p in outcome.problems),
                      "editor.html", editor)
    try:
        register_text(text, settings, name=name, replace=True, by=user_name(request))
    except RegistrationError as error:
        raise Refused(400, f"the change was not saved: {error.message.strip()}", "editor.html", editor) from None
    return done(request, f"/queries/{name}", "saved", {"name": name})


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
"""The query the register editor offers to insert (*Insert an example*): over a sample stream that the
embedded stack plays live, so that it shows results on its schedule. The editor itself starts empty."""


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

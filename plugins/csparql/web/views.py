"""How the pages answer: the refusal every route raises (``Refused``), the Jinja2 templates and their filters,
an HTML page or JSON depending on what the client asked for, and the redirect after a change."""

from __future__ import annotations

from functools import lru_cache
from urllib.parse import quote

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from jinja2 import Environment, PackageLoader, select_autoescape

from csparql.deploy import monitoring
from csparql.storage.vocabulary import XSD_BOOLEAN, XSD_DECIMAL, XSD_DOUBLE, XSD_INTEGER
from csparql.core.windows import format_instant


PREFIX = "/csparql"
"""Where the plugin mounts the app in the api-server."""


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


PLAIN_TYPES = {XSD_INTEGER, XSD_DECIMAL, XSD_DOUBLE, XSD_BOOLEAN}
"""The datatypes whose literals are shown by their lexical form alone (as SPARQL writes them abbreviated)."""


def term(text: str | None) -> str:
    """An RDF term as N-Triples, numbers and booleans as their plain lexical form (``9`` for
    ``"9"^^xsd:integer``); IRIs keep their angle brackets."""
    if text is None:
        return ""
    if text.startswith('"') and '"^^<' in text:
        lexical, datatype = text[1:].rsplit('"^^<', 1)
        if datatype.rstrip(">") in PLAIN_TYPES and "\\" not in lexical:
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
    environment = Environment(loader=PackageLoader("csparql.web", "templates"),
                              autoescape=select_autoescape(default=True, default_for_string=True))
    environment.filters.update(instant=instant, duration=duration, size=size, moment=moment, term=term,
                               number=lambda n: "—" if n is None else f"{n:,}")
    return environment


# --- answers ---------------------------------------------------------------------------------------------


def user_name(request: Request) -> str | None:
    user = getattr(request.state, "csparql_user", None)
    return user.get_name() if user is not None else None


def context(request: Request, **values) -> dict:
    root = request.scope.get("root_path", "").rstrip("/")
    return {"base": root, "airflow": root.removesuffix(PREFIX), "user": user_name(request),
            "done": request.query_params.get("done"), "done_run": request.query_params.get("run"), **values}


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


def done(request: Request, where: str, what: str, details: dict) -> Response:
    """The answer to a change that was made: JSON for API clients, else a redirect to ``where`` (with the
    Airflow run it created, ``run_id``, so that the page links to it and its log)."""
    if wants_json(request):
        return JSONResponse({"ok": True, "done": what, **details})
    root = request.scope.get("root_path", "").rstrip("/")
    run = f"&run={quote(details['run_id'], safe='')}" if details.get("run_id") else ""
    return RedirectResponse(f"{root}{where}?done={quote(what)}{run}", status_code=303)


def wants_json(request: Request) -> bool:
    return request.url.path.startswith(f"{request.scope.get('root_path', '').rstrip('/')}/api/") or (
        "application/json" in request.headers.get("accept", "") and "text/html" not in request.headers.get("accept", ""))


def window_json(window: monitoring.WindowRun) -> dict:
    return {"window_start": instant(window.window_start), "window_end": format_instant(window.window_end),
            "state": window.state, "triples_read": window.total_triples_read, "rows_written": window.rows_written,
            "duration_ms": window.duration_ms, "version": window.version, "error": window.error,
            "revision": window.revision}

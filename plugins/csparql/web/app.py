"""The C-SPARQL pages inside Airflow: a FastAPI app the plugin mounts at ``/csparql`` in the api-server.

Pages (server-rendered HTML, a little JavaScript, nothing from the network), one router each in ``pages/``:

    /                          the registered queries (overview)
    /register                  register a query: an editor validated as you type, with plan and windows (editor)
    /queries/NAME              monitor a query: windows, charts, lag, latest results, versions (query)
    /queries/NAME/edit         edit it (a new version) (editor)
    /queries/NAME/delete       asks before deleting (actions)
    /queries/NAME/versions/N   one saved version of its text (query)
    /streams                   stream tables (watermark, triples per hour, files, size) and static graphs (streams)
    /dags/DAG_ID               the "Query" tab of every DAG page (a DAG that is not a query says so) (query)

JSON: ``POST /api/check`` (the editor's validation), ``GET /api/queries`` and ``GET /api/queries/NAME``.
Changes: ``POST /queries`` (register), ``POST /queries/NAME`` (save an edit), ``POST /queries/NAME/pause``,
``/unpause``, ``/trigger`` and ``/delete``; ``POST /api/streams/STREAM`` lands a body of RDF in a stream (push).

Security (``security``): every route needs Airflow's login, changes need the permission to edit the DAG and,
when the cookie authenticates them, to come from a page of this site. Every query text is escaped (Jinja2
autoescaping, ``textContent`` in scripts).
"""

from __future__ import annotations

from fastapi import FastAPI, Request

from csparql.deploy.settings import Settings
from csparql.web.pages import actions, editor, overview, push, query, static, streams
from csparql.web.security import SAFE_METHODS, require_login
from csparql.web.views import Refused, refusal_response

__all__ = ["SAFE_METHODS", "app", "create_app"]

ROUTERS = (static, overview, query, streams, editor, actions, push)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The app; ``settings`` default to the environment's (read on first use)."""
    app = FastAPI(title="csparql", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.csparql_given_settings = settings
    app.state.csparql_settings = None
    app.middleware("http")(require_login)

    @app.exception_handler(Refused)
    async def on_refused(request: Request, refused: Refused):
        return refusal_response(request, refused)

    for module in ROUTERS:
        app.include_router(module.router)
    return app


app = create_app()
"""The app the plugin mounts."""

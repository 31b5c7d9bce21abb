"""Who is asking, and what they may do. Airflow does not protect plugin apps, so this app does, on every route
(pages, JSON, static files, unknown paths): the user is Airflow's own — the ``Authorization: Bearer`` token of
API clients, else the UI's ``_token`` cookie — and a request without a valid one gets 401. Changing the
registry needs the auth manager's permission to edit that DAG (403 otherwise). A change the cookie
authenticates must come from a page of this site (its ``Origin``, else its ``Referer``), so another site
cannot make a logged-in browser send it; only a valid bearer token exempts a change, not the mere presence of
an ``Authorization`` header (``Basic …``, say). Query names follow the registry's ``DAG_ID`` rule before any
file is touched."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from urllib.parse import urlsplit

from fastapi import Request
from fastapi.responses import Response

from csparql.deploy.registry import RegistrationError, check_registry_name
from csparql.deploy.settings import Settings
from csparql.web.views import Refused, refusal_response

SAFE_METHODS = {"GET", "HEAD", "OPTIONS"}
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; img-src 'self' data:; object-src 'none'; base-uri 'none'; "
                               "form-action 'self'; frame-ancestors 'self'",
    "X-Frame-Options": "SAMEORIGIN",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


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


async def require_login(request: Request, call_next):
    """The app's middleware: every request needs a login, and a change the cookie authenticates must come
    from a page of this site; every answer carries ``SECURITY_HEADERS``."""
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

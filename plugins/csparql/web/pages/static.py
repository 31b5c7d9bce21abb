"""The pages' stylesheet and scripts (behind the login like everything else)."""

from __future__ import annotations

from importlib import resources

from fastapi import APIRouter
from fastapi.responses import Response

from csparql.web.views import Refused

STATIC_FILES = {"csparql.css": "text/css; charset=utf-8", "csparql.js": "text/javascript; charset=utf-8",
                "editor.js": "text/javascript; charset=utf-8"}

router = APIRouter()


@router.get("/static/{name}")
def static(name: str):
    if name not in STATIC_FILES:
        raise Refused(404, f"no static file {name!r}")
    body = resources.files("csparql.web").joinpath("static", name).read_bytes()
    return Response(body, media_type=STATIC_FILES[name], headers={"Cache-Control": "private, max-age=300"})

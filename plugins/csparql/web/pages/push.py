"""``POST /api/streams/{stream}``: push RDF to a stream over HTTP (``csparql.ingest.pushed``).

``{stream}`` is the stream's IRI, percent-encoded as one path segment (``http%3A%2F%2Fex.org%2Fs``) or written
as is. The body's ``Content-Type`` names its format; ``?timestamp=`` gives timestamp-less triples (N-Triples,
Turtle) their instant. The pusher needs Airflow's login (401) and the permission to edit the stream's ingestion
DAG (403). A body larger than the ``push_max_bytes`` setting is refused with 413 before it is read whole; a
malformed one with 400 naming each rejected line (or graph) and why, and nothing lands; an unknown media type
with 415. A body that lands is answered 201 with the triples landed and the stream version that holds them; a
retry with the same ``Idempotency-Key`` (or of content that landed already) is answered 200 naming the
earlier commit, and lands nothing again. Like an ingest task, a push records the windows its late triples make
stale and starts the revision DAGs of their queries (``stale_windows`` and ``revised_by`` in the answer).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from csparql.deploy.plan import ingest_dag_id
from csparql.deploy.settings import Settings
from csparql.ingest.inputs import FORMAT_EXTENSIONS
from csparql.ingest.pushed import PushRefused, check_key, land_pushed, push_format
from csparql.web.security import require
from csparql.web.state import current_settings
from csparql.web.views import Refused, user_name
from csparql.core.windows import format_instant

router = APIRouter()


@router.post("/api/streams/{stream:path}")
async def push(request: Request, stream: str, timestamp: str | None = None):
    settings = current_settings(request)
    stream = stream.strip().removeprefix("<").removesuffix(">")  # the permission is the stream's DAG's
    require(request, "PUT", ingest_dag_id(stream), f"push to <{stream}>")
    try:
        format = push_format(request.headers.get("content-type"))
        key = check_key(request.headers.get("idempotency-key"))
    except PushRefused as refused:
        raise Refused(refused.status, refused.message) from None
    limit = settings.push_max_bytes
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Refused(413, f"the body has {int(declared)} bytes; a push takes at most {limit} (push_max_bytes)")
    with tempfile.TemporaryDirectory(prefix="csparql-push-") as folder:
        body = Path(folder) / f"body{FORMAT_EXTENSIONS[format]}"
        size = 0
        with open(body, "wb") as out:
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise Refused(413, f"the body has more than {limit} bytes, the most a push takes "
                                       "(push_max_bytes)")
                out.write(chunk)
        try:
            outcome = await run_in_threadpool(
                land_pushed, settings.warehouse, stream, body, format, key, user_name(request), timestamp,
                settings.max_future_skew, settings.timestamp_predicates_of(stream))
        except PushRefused as refused:
            raise Refused(refused.status, refused.message) from None
    answer = {"stream": outcome.stream, "landed": outcome.landed, "version": outcome.version,
              "replayed": outcome.replayed}
    if outcome.version is not None and not outcome.replayed and not outcome.rejected:
        answer.update(await run_in_threadpool(revise_stale_windows, settings, outcome.stream, outcome.version))
    if outcome.watermark is not None:
        answer["watermark"] = format_instant(outcome.watermark)
    if outcome.warnings:
        answer["warnings"] = outcome.warnings + answer.get("warnings", [])
    if outcome.rejected:
        shown = "; ".join(f"line {r['line']}: {r['reason']}" for r in outcome.rejects)
        return JSONResponse({"detail": f"nothing landed: {outcome.rejected} rejected ({shown})",
                             "rejected": outcome.rejected, "rejects": outcome.rejects},
                            status_code=400, headers={"Cache-Control": "no-store"})
    if outcome.version is None:  # an empty body
        return JSONResponse({**answer, "detail": "the body holds no triple: nothing landed"}, status_code=200)
    return JSONResponse(answer, status_code=200 if outcome.replayed else 201)


def revise_stale_windows(settings: Settings, stream: str, version: int) -> dict:
    """What an ingest task does after its commit: record the windows the pushed triples make stale and announce
    the queries to revise (``csparql.deploy.revisions``); the answer's ``stale_windows`` and ``revised_by``."""
    from csparql.deploy.revisions import detect_after_commits, windows_to_revise
    from csparql.web import airflow_state

    try:
        stale = detect_after_commits(settings, stream, version - 1)
        ends = {query: [format_instant(end) for end in windows]
                for query, windows in windows_to_revise(stale).items()}
        return {"stale_windows": len(stale), "revised_by": airflow_state.announce_revisions(ends)}
    except Exception as error:  # noqa: BLE001 - the triples landed: say so rather than fail the push
        return {"warnings": [f"the triples landed, but the windows they make stale were not looked for: {error}"]}

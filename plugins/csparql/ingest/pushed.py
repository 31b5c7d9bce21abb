"""A body pushed to a stream over HTTP (``POST /csparql/api/streams/{stream}``, ``csparql.web.pages.push``), landed
in this process in one commit, all or nothing, at most once per ``Idempotency-Key``.

The media type says the format: ``application/trig``, ``application/n-quads`` (standard N-Quads of timestamped
named graphs, or the project's timestamped line format: told apart as a file is), ``application/ld+json``,
``application/trix``; ``application/n-triples`` and ``text/turtle`` only with a timestamp for all of their
triples. A body with a single malformed line or graph lands nothing and says which and why. A retry with the
key of a body that landed finds its commit (the key is recorded in it) and lands nothing; the same key with
another body is refused. Pushes to one stream are landed one at a time in a process, so two retries racing each
other land once. A push creates a stream only under an absolute IRI (``new_stream_problem``). What is refused
is said as the push is made: the query parameter ``?timestamp=`` where the command line has ``--timestamp``,
"the body" for the file it was saved to."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from collections.abc import Sequence
from pathlib import Path

from csparql.ingest.ingest import (
    IngestReport, InputError, check_stream_request, check_timestamp, content_digest, ingest_stream, landed_commit,
)
from csparql.ingest.inputs import MEDIA_TYPES, media_type_format
from csparql.ingest.parsers.lines import TIMESTAMP_OPTION
from csparql.storage import delta
from csparql.storage.tables import CONTENT_SHA256, IDEMPOTENCY_KEY, LANDED_TRIPLES, LANDED_WATERMARK, PUSHED_BY
from csparql.storage.vocabulary import DEFAULT_TIMESTAMP_PREDICATES
from csparql.storage.warehouse import Warehouse, new_stream_problem

MAX_KEY_LENGTH = 255
TIMESTAMP_PARAMETER = "?timestamp="
"""How a push gives timestamp-less triples their instant (the command line's ``--timestamp``)."""

_STREAM_LOCKS: dict[str, threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


class PushRefused(Exception):
    """The push is refused as a whole (``status``: 400 bad request, 409 key reused for another body, 415 media
    type); nothing landed."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class PushOutcome:
    """What a push did: ``version`` is the commit that holds the body (this push's, or, ``replayed``, the one
    an earlier push with the same key or the same content made); ``rejects`` (line, reason, text) when the body
    was refused for them."""

    stream: str
    landed: int = 0
    version: int | None = None
    watermark: int | None = None
    replayed: bool = False
    rejected: int = 0
    rejects: list[dict] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def push_format(content_type: str | None) -> str:
    """The ingest format of a ``Content-Type`` (parameters such as ``charset`` aside); ``PushRefused(415)``
    naming the accepted ones otherwise."""
    format = media_type_format(content_type)
    if format is None:
        media_type = (content_type or "").split(";", 1)[0].strip()
        given = f"Content-Type {media_type!r}" if media_type else "no Content-Type"
        raise PushRefused(415, f"{given}: push one of {', '.join(MEDIA_TYPES)}")
    return format


def check_key(key: str | None) -> str | None:
    """The ``Idempotency-Key`` header's value (None without one); ``PushRefused(400)`` when it is empty, too long
    or not printable ASCII."""
    if key is None:
        return None
    key = key.strip()
    if not key or len(key) > MAX_KEY_LENGTH or not key.isascii() or not key.isprintable():
        raise PushRefused(400, f"Idempotency-Key: give 1 to {MAX_KEY_LENGTH} printable ASCII characters")
    return key


def land_pushed(warehouse: Warehouse, stream: str, body: Path, format: str, key: str | None = None,
                user: str | None = None, timestamp: str | None = None, max_future_skew: int | None = None,
                timestamp_predicates: Sequence[str] = DEFAULT_TIMESTAMP_PREDICATES) -> PushOutcome:
    """Land the body saved at ``body`` (its name ends as ``format``'s files do) into ``stream``'s table, as the
    module docstring says (named graphs timestamped by a triple with one of ``timestamp_predicates``);
    ``PushRefused`` for a request that cannot land."""
    options = {"timestamp_predicates": tuple(timestamp_predicates)}
    if max_future_skew is not None:
        options["max_future_skew"] = max_future_skew
    try:
        stream = check_stream_request(stream, [body], timestamp, format, **options)[0]
    except InputError as error:
        raise PushRefused(400, as_pushed(str(error), body)) from None
    if new_stream_problem(stream) is not None and not delta.exists(warehouse.stream(stream)):
        raise PushRefused(400, new_stream_problem(stream))
    with _stream_lock(stream):
        path = warehouse.stream(stream)
        if key is not None:
            earlier = landed_commit(path, lambda commit: commit.get(IDEMPOTENCY_KEY) == key)
            if earlier is not None:
                digest = content_digest(stream, [body], check_timestamp(timestamp), options["timestamp_predicates"])
                return _replayed(path, stream, key, earlier.version, digest)
        metadata = {IDEMPOTENCY_KEY: key} if key is not None else {}
        if user:
            metadata[PUSHED_BY] = user
        try:
            report = ingest_stream(None, warehouse, stream, [body], timestamp=timestamp, format=format,
                                   rejects=body.with_name("rejects.tsv"), commit_metadata=metadata,
                                   in_process=True, all_or_nothing=True, **options)
        except InputError as error:
            raise PushRefused(400, as_pushed(str(error), body)) from None
    return _outcome(stream, report, body)


def as_pushed(message: str, body: Path) -> str:
    """An ingest's ``message`` as a push says it: ``TIMESTAMP_PARAMETER`` where the command line's option is
    named, "the body" for the file ``body`` it was saved to."""
    message = message.replace(str(body), "the body")
    message = message.replace(f"{TIMESTAMP_OPTION} T", f"{TIMESTAMP_PARAMETER}T")
    return message.replace(f"{TIMESTAMP_OPTION}:", f"{TIMESTAMP_PARAMETER.rstrip('=')}:").replace(
        TIMESTAMP_OPTION, TIMESTAMP_PARAMETER)


def _stream_lock(stream: str) -> threading.Lock:
    with _LOCKS_LOCK:
        return _STREAM_LOCKS.setdefault(stream, threading.Lock())


def _commit(path, version: int) -> dict:
    """The history entry (with its commit metadata) of the table's commit ``version``."""
    table = delta.open_table(path)
    return next(c for c in table.history(table.version() - version + 1) if int(c["version"]) == version)


def _replayed(path, stream: str, key: str, version: int, digest: str) -> PushOutcome:
    commit = _commit(path, version)
    if commit.get(CONTENT_SHA256) != digest:
        raise PushRefused(409, f"the Idempotency-Key {key!r} was used for another body, which landed as version "
                               f"{version} of the stream: use a new key for new content")
    mark = commit.get(LANDED_WATERMARK)
    return PushOutcome(stream, landed=int(commit.get(LANDED_TRIPLES) or 0), version=version,
                       watermark=int(mark) if mark is not None else None, replayed=True)


def _outcome(stream: str, report: IngestReport, body: Path) -> PushOutcome:
    outcome = PushOutcome(stream, landed=report.landed, version=report.version, watermark=report.max_ts,
                          rejected=report.rejected, warnings=[as_pushed(w, body) for w in report.warnings])
    if report.already_landed is not None:  # the same content landed before, under another key or none
        earlier = report.already_landed
        outcome.version, outcome.watermark, outcome.replayed = earlier.version, earlier.watermark, True
        outcome.landed = int(_commit(report.table, earlier.version).get(LANDED_TRIPLES) or 0)
    outcome.rejects = [{"line": r.line, "reason": as_pushed(r.reason, body), "text": r.text}
                       for r in report.first_rejects]
    return outcome

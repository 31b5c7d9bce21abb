"""What the warehouse records about late triples: stream commits' event times and stale windows.

Every stream commit (an ingest, an output window of a ``REGISTER STREAM`` query) carries its *event times* in
its commit metadata (``EVENT_TIMES``: ``[[ts, count], …]``, only the timestamps that could fall in a window
already evaluated, see ``csparql.core.lateness``). A window evaluated before such a commit whose stream window holds
one of those timestamps is stale: ``_csparql/stale_windows`` (``schema.STALE_WINDOWS``) records it, one row per
(query, window, stream, stream version) and change of status (``PENDING``, ``REVISED``, ``BEYOND_HORIZON``).
What re-evaluating such a window numbers and keeps is ``csparql.storage.revisions``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from csparql.core.lateness import EventTimes, event_times_from
from csparql.storage import delta, schema
from csparql.storage.instants import instant_of as _instant
from csparql.storage.instants import micros_of as _micros
from csparql.storage.warehouse import Warehouse

EVENT_TIMES = "csparql.event_times"
"""Commit metadata of a stream commit: the event times of the triples it committed (JSON)."""

PENDING, REVISED, BEYOND_HORIZON = "pending", "revised", "beyond_horizon"
LATE_TRIPLES, PREVIOUS_WINDOW = "late triples", "previous window changed"
HISTORY_LOOKBACK = 200
"""How many of a stream's latest commits the check after an evaluation looks at."""


COMMIT_TIME_PRECISION = 1000
"""Delta records when a commit was made in whole milliseconds: a commit timestamped ``t`` (µs) was made at
some instant of ``[t, t + 1000)``."""


def began_before_commit(started_at: int, committed_at: int) -> bool:
    """Whether something that began at ``started_at`` (µs) may have begun before a commit Delta timestamped
    ``committed_at`` (µs): yes unless it began after the whole millisecond of the commit."""
    return started_at < committed_at + COMMIT_TIME_PRECISION


def encode_event_times(event_times: EventTimes) -> str:
    return json.dumps([list(pair) for pair in event_times])


@dataclass(frozen=True)
class StreamCommit:
    """One commit of a stream table: its version, when it was committed (µs) and its event times."""

    version: int
    committed_at: int
    event_times: EventTimes


def stream_commits(path: str | Path, after_version: int | None = None, after_time: int | None = None,
                   lookback: int = HISTORY_LOOKBACK) -> list[StreamCommit]:
    """The stream table's commits carrying event times, newer than ``after_version`` and committed after
    ``after_time`` (µs; commit timestamps have milliseconds, so a commit in the same millisecond counts), oldest
    first, among its ``lookback`` latest commits."""
    if not delta.exists(path):
        return []
    table = delta.SNAPSHOTS.latest(path)
    count = lookback if after_version is None else max(table.version() - after_version, 0)
    if count == 0:
        return []
    commits = []
    for commit in table.history(min(count, lookback)):
        if EVENT_TIMES not in commit or "version" not in commit:
            continue
        committed_at = int(commit["timestamp"]) * 1000
        if after_time is not None and not began_before_commit(after_time, committed_at):
            continue
        if after_version is not None and commit["version"] <= after_version:
            continue
        commits.append(StreamCommit(int(commit["version"]), committed_at,
                                    event_times_from(json.loads(commit[EVENT_TIMES]))))
    return sorted(commits, key=lambda c: c.version)


@dataclass(frozen=True)
class StaleWindow:
    """One row of ``_csparql/stale_windows`` (instants in µs, lateness in ms)."""

    query: str
    window_start: int | None
    window_end: int
    stream: str
    stream_version: int
    committed_at: int
    reason: str
    late_triples: int
    lateness_p50_ms: int | None
    lateness_max_ms: int | None
    detected_at: int
    within_horizon: bool
    status: str
    revision: int | None = None

    @property
    def key(self) -> tuple[str, int, str, int]:
        return self.query, self.window_end, self.stream, self.stream_version

    def row(self) -> dict:
        return {**self.__dict__, "window_start": _instant(self.window_start), "window_end": _instant(self.window_end),
                "committed_at": _instant(self.committed_at), "detected_at": _instant(self.detected_at)}

    @classmethod
    def from_row(cls, row: dict) -> StaleWindow:
        return cls(**{**row, **{k: _micros(row[k]) for k in ("window_start", "window_end", "committed_at",
                                                                 "detected_at")}})


def append_stale_windows(warehouse: Warehouse, windows: list[StaleWindow]) -> None:
    """Record stale windows (or a change of their status) in one commit."""
    if windows:
        table = pa.Table.from_pylist([w.row() for w in windows], schema=schema.STALE_WINDOWS)
        delta.append(warehouse.stale_windows, table, schema.STALE_WINDOWS)
        delta.compact_record_table(warehouse.stale_windows)


def stale_windows(warehouse: Warehouse, query: str | None = None) -> list[StaleWindow]:
    """Each stale window's latest row (per query, window, stream and stream version), in detection order."""
    if not delta.exists(warehouse.stale_windows):
        return []
    table = delta.SNAPSHOTS.rows(warehouse.stale_windows, schema.STALE_WINDOWS)
    rows = (table.filter(pc.field("query") == query) if query is not None else table).to_pylist()
    latest: dict[tuple, StaleWindow] = {}
    for window in sorted((StaleWindow.from_row(row) for row in rows), key=lambda w: w.detected_at):
        latest[window.key] = window
    return sorted(latest.values(), key=lambda w: (w.detected_at, w.window_end))

"""The event times a stream commit records (``csparql.storage.stale_windows.EVENT_TIMES``), from the triples an
ingest staged, before they are committed."""

from __future__ import annotations

import time
from collections.abc import Iterable

from csparql.lateness import keep_until
from csparql.storage import revisions as rv
from csparql.storage import stale_windows as sw
from csparql.storage.warehouse import Warehouse


def recorded_until(warehouse: Warehouse) -> int:
    """The latest instant (µs) whose triples' event times a commit records: the latest window end evaluated or
    the clock, whichever is later (a later triple is late for no window, and an evaluation running now
    evaluates no window past the clock unless asked to)."""
    return max(rv.latest_evaluated_end(warehouse) or 0, time.time_ns() // 1000)


def event_times_metadata(triples_at: Iterable[tuple[int, int]], until: int) -> dict[str, str]:
    """The commit metadata giving the event times of staged triples: ``triples_at`` holds (instant µs, how many
    triples) for the instants up to ``until`` (``recorded_until``), coarsened as ``csparql.lateness.keep_until``
    says."""
    return {sw.EVENT_TIMES: sw.encode_event_times(keep_until(triples_at, until))}

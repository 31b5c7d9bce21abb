"""The event times a stream commit records (``csparql.storage.stale_windows.EVENT_TIMES``), from the triples an
ingest staged, before they are committed."""

from __future__ import annotations

import time
from collections.abc import Iterable

import pyarrow as pa
import pyarrow.compute as pc

from csparql.core.lateness import GRAINS, MAX_EVENT_TIMES, keep_until
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
    triples) for the instants up to ``until`` (``recorded_until``), coarsened as ``csparql.core.lateness.keep_until``
    says."""
    return {sw.EVENT_TIMES: sw.encode_event_times(keep_until(triples_at, until))}


_GRAIN_UNITS = {1_000_000: "second", 60_000_000: "minute", 3_600_000_000: "hour", 86_400_000_000: "day"}


def staged_event_times_metadata(micros: pa.Array | pa.ChunkedArray, until: int) -> dict[str, str]:
    """``event_times_metadata`` of the staged triples' instants ``micros`` (µs), counted and coarsened by
    Arrow's kernels first: a file of a million distinct instants reaches Python as at most
    ``MAX_EVENT_TIMES`` of them (the same ones ``csparql.core.lateness.coarsen`` keeps)."""
    counted = pa.table({"t": micros}).filter(pc.less_equal(pc.field("t"), until))
    counted = counted.group_by("t", use_threads=False).aggregate([("t", "count")]).rename_columns(["t", "n"])
    for grain in GRAINS:
        if counted.num_rows <= MAX_EVENT_TIMES:
            break
        floored = pc.cast(pc.floor_temporal(pc.cast(counted.column("t"), pa.timestamp("us")), 1, _GRAIN_UNITS[grain]),
                          pa.int64())
        counted = pa.table({"t": floored, "n": counted.column("n")}).group_by("t", use_threads=False) \
            .aggregate([("n", "sum")]).rename_columns(["t", "n"])
    return event_times_metadata(zip(counted.column("t").to_pylist(), counted.column("n").to_pylist()), until)

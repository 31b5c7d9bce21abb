"""Stream watermarks: how far each stream's triples are known to have landed (read and written without Spark).

A watermark W for a stream promises that triples with τ ≤ W have landed, up to the allowed lateness the
deployment grants (``csparql.deploy.settings.Settings.allowed_lateness``). It is the greatest value recorded for the
stream in ``_csparql/watermarks``; recording never lowers it. Ingest advances it to the greatest τ it landed,
which is never later than the ingest's clock plus the maximum future skew (``csparql.ingest.ingest`` rejects
later triples); an evaluation of a ``REGISTER STREAM`` query advances its output stream to the window's end; an
operator may advance a quiet stream by hand (``csparql watermark``, which asks for ``--allow-future`` beyond
that bound). The Airflow layer waits on it before evaluating.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from csparql.storage import delta, schema
from csparql.storage.instants import MAX_MICROS, MIN_MICROS
from csparql.storage.warehouse import Warehouse, iri_problem, new_stream_problem
from csparql.core.windows import (
    EARLIEST_INSTANT, INSTANT_RANGE, LATEST_INSTANT, MAX_DURATION, format_duration, format_instant,
)

MAX_FUTURE_SKEW = 3_600_000_000
"""How far past the ingest's wall clock a triple's timestamp may lie (µs), unless ``CSPARQL_MAX_FUTURE_SKEW``
(or ``csparql ingest --max-future-skew``) says otherwise: one hour covers clocks that drift and files written
a little ahead, while a timestamp beyond it (a wrong clock, a typo, 9999-12-31) is rejected like a malformed
line instead of moving its stream's watermark, which never goes back, past windows that have not happened."""


def check_future_skew(skew: int) -> int:
    """``skew`` (µs) itself when it is a maximum future skew csparql accepts, from 0 to ``MAX_DURATION`` (100
    years, the longest duration csparql accepts anywhere); otherwise ``ValueError`` saying which bound it
    breaks."""
    if skew < 0:
        raise ValueError(f"{format_duration(skew)} must not be negative")
    if skew > MAX_DURATION:
        raise ValueError(f"{format_duration(skew)} is longer than {format_duration(MAX_DURATION)} (100 years), "
                         "the longest duration csparql accepts")
    return skew


def future_bound(skew: int, now: int | None = None) -> int:
    """The latest instant a stream's watermark may reach at ``now`` (µs; default: the wall clock): ``now`` plus
    the maximum future skew, and never past ``LATEST_INSTANT``, the latest instant csparql evaluates."""
    now = time.time_ns() // 1000 if now is None else now
    return min(now + skew, LATEST_INSTANT)


def read_watermarks(warehouse: Warehouse) -> dict[str, int]:
    """Each stream's watermark (µs since the epoch); streams never recorded are absent."""
    path = warehouse.watermarks
    if not delta.exists(path):
        return {}
    table = delta.SNAPSHOTS.rows(path, schema.WATERMARKS).select(["stream", "watermark"])
    if table.num_rows == 0:
        return {}
    grouped = table.group_by("stream").aggregate([("watermark", "max")])
    micros = pc.cast(grouped["watermark_max"], pa.int64())
    return dict(zip(grouped["stream"].to_pylist(), micros.to_pylist(), strict=True))


def watermark(warehouse: Warehouse, stream: str) -> int | None:
    """One stream's watermark, None when none was recorded."""
    return read_watermarks(warehouse).get(str(stream))


def advance_watermark(warehouse: Warehouse, stream: str, instant: int, source: str) -> None:
    """Record that ``stream`` is complete up to ``instant`` (a no-op when its watermark is already there);
    ``ValueError`` for an instant outside the instants csparql evaluates (``INSTANT_RANGE``): a watermark never
    goes back, so one there would stay there for good."""
    if not EARLIEST_INSTANT <= instant <= LATEST_INSTANT:
        shown = format_instant(instant) if MIN_MICROS <= instant <= MAX_MICROS else f"{instant}µs after the epoch"
        raise ValueError(f"the watermark of <{stream}> cannot be {shown}: it must lie within {INSTANT_RANGE}")
    current = watermark(warehouse, stream)
    if current is not None and current >= instant:
        return
    row = {
        "stream": str(stream),
        "watermark": instant,
        "recorded_at": time.time_ns() // 1000,
        "source": source,
    }
    table = pa.Table.from_pylist([row], schema=pa.schema([
        pa.field("stream", pa.string(), nullable=False),
        pa.field("watermark", pa.int64(), nullable=False),
        pa.field("recorded_at", pa.int64(), nullable=False),
        pa.field("source", pa.string(), nullable=False),
    ])).cast(schema.WATERMARKS)
    delta.append(warehouse.watermarks, table, schema.WATERMARKS)
    delta.compact_record_table(warehouse.watermarks)


class WatermarkRefused(ValueError):
    """A watermark set by hand that is refused; the message says why, in one line. Nothing was recorded."""


@dataclass(frozen=True)
class WatermarkChange:
    """What setting a stream's watermark by hand did: its watermark before (None: it had none) and the instant
    asked for; ``advanced`` when that instant was recorded."""

    stream: str
    before: int | None
    requested: int

    @property
    def advanced(self) -> bool:
        return self.before is None or self.requested > self.before


def set_watermark(warehouse: Warehouse, stream: str, instant: int, source: str,
                  create: bool = False) -> WatermarkChange:
    """Advance ``stream``'s watermark to ``instant`` by hand (an operator's act: ``csparql watermark``).
    ``WatermarkRefused`` when ``stream`` is not an IRI (``<...>`` accepted), or when the warehouse has no stream
    by that IRI — no table and no watermark, e.g. a typo — unless ``create`` (a stream that has not landed
    yet, whose IRI must then be absolute: ``csparql.storage.warehouse.new_stream_problem``). A watermark never
    goes back: an ``instant`` at or before the current one records nothing, and the returned change says so
    (``advanced`` false)."""
    problem = iri_problem(stream, "stream")
    if problem is not None:
        raise WatermarkRefused(problem)
    iri = stream.strip()
    iri = iri[1:-1] if iri.startswith("<") and iri.endswith(">") else iri
    before = watermark(warehouse, iri)
    known = before is not None or delta.exists(warehouse.stream(iri))
    problem = None if known or not create else new_stream_problem(stream)
    if problem is not None:
        raise WatermarkRefused(problem)
    if not known and not create:
        raise WatermarkRefused(
            f"no stream <{iri}> in the warehouse {warehouse.root}: nothing was ingested into it and it has no "
            "watermark; check the IRI, or pass --create to give a stream that has not landed yet its first "
            "watermark")
    change = WatermarkChange(iri, before, instant)
    if change.advanced:
        advance_watermark(warehouse, iri, instant, source)
    return change


def written_windows(warehouse: Warehouse, query: str) -> set[int]:
    """The window ends (µs) a registered query has evaluated successfully, from the runs table."""
    path = warehouse.runs
    if not delta.exists(path):
        return set()
    table = delta.SNAPSHOTS.rows(path, schema.RUNS)
    mask = pc.and_(pc.equal(table["query"], query), pc.equal(table["status"], "succeeded"))
    ends = pc.cast(table.filter(mask)["window_end"], pa.int64())
    return set(ends.to_pylist())


def missing_for_window(warehouse: Warehouse, streams: dict[str, int], producer_windows: dict[str, list[int]]) -> list[str]:
    """What a window still waits for, in plain words (empty when it is complete): each ingested stream whose
    watermark is below its threshold, and each producer window of a derived stream not yet written."""
    missing: list[str] = []
    if streams:
        marks = read_watermarks(warehouse)
        for iri, threshold in sorted(streams.items()):
            mark = marks.get(iri)
            if mark is None or mark < threshold:
                have = "no watermark yet" if mark is None else f"watermark {format_instant(mark)}"
                missing.append(f"<{iri}> until {format_instant(threshold)} ({have})")
    for query, ends in sorted(producer_windows.items()):
        absent = sorted(set(ends) - written_windows(warehouse, query))
        if absent:
            missing.append(f"{query}'s window(s) ending {', '.join(format_instant(e) for e in absent)}")
    return missing


def inputs_complete_at(warehouse: Warehouse, streams: dict[str, int],
                       producer_windows: dict[str, list[int]]) -> int | None:
    """When the last of a window's inputs was committed (µs since the epoch), for a window that waits for
    ``streams`` (each ingested stream and the watermark it must reach) and ``producer_windows`` (each
    producer's window ends): the latest of when each stream's watermark was first recorded at or past its
    threshold and when each producer window's first successful run ended. None when one of them is not there
    yet, or the window waits for nothing."""
    instants: list[int] = []
    if streams:
        if not delta.exists(warehouse.watermarks):
            return None
        marks = delta.SNAPSHOTS.rows(warehouse.watermarks, schema.WATERMARKS)
        for iri, threshold in streams.items():
            mask = pc.and_(pc.equal(marks["stream"], iri),
                           pc.greater_equal(pc.cast(marks["watermark"], pa.int64()), threshold))
            reached = pc.min(pc.cast(marks.filter(mask)["recorded_at"], pa.int64())).as_py()
            if reached is None:
                return None
            instants.append(reached)
    if producer_windows:
        if not delta.exists(warehouse.runs):
            return None
        runs = delta.SNAPSHOTS.rows(warehouse.runs, schema.RUNS)
        succeeded = runs.filter(pc.and_(pc.equal(runs["status"], "succeeded"),
                                        pc.is_in(runs["query"], pa.array(sorted(producer_windows), pa.string()))))
        ended = pc.add(pc.cast(succeeded["started_at"], pa.int64()),
                       pc.multiply(pc.fill_null(succeeded["duration_ms"], 0), 1000))
        first_end: dict[tuple[str, int], int] = {}
        for query, end, at in zip(succeeded["query"].to_pylist(),
                                  pc.cast(succeeded["window_end"], pa.int64()).to_pylist(), ended.to_pylist()):
            first_end[(query, end)] = min(at, first_end.get((query, end), at))
        for query, ends in producer_windows.items():
            for end in ends:
                if (query, end) not in first_end:
                    return None
                instants.append(first_end[(query, end)])
    return max(instants) if instants else None


def latest_run(warehouse: Warehouse, query: str, window_end: int) -> dict | None:
    """The last recorded run of a query's window (a row of the runs table), None when there is none."""
    path = warehouse.runs
    if not delta.exists(path):
        return None
    table = delta.SNAPSHOTS.rows(path, schema.RUNS)
    mask = pc.and_(pc.equal(table["query"], query), pc.equal(pc.cast(table["window_end"], pa.int64()), window_end))
    rows = table.filter(mask).sort_by("started_at").to_pylist()
    return rows[-1] if rows else None

"""Which data files of a table can hold what a reader wants, from the statistics the Delta log records.

The one rule every reader prunes by: Delta records a file's timestamp bounds truncated to the millisecond, so a
file's values lie in ``[minimum, ceiling(maximum))``, where ``ceiling`` adds the millisecond the truncation may
have cut (``STATISTICS_TRUNCATION_MICROS``). A file without statistics may hold anything. Stream windows
(``select_window_files``, ``select_latest_files``), stored panes, result tables (by ``window_end``) and the
runs table (by ``window_end``) are all pruned through these functions.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from csparql.storage.instants import bucket_of

if TYPE_CHECKING:
    from csparql.core.windows import WindowBounds


@dataclass(frozen=True)
class FileInfo:
    """One live data file of a table version, with what the log says about it."""

    uri: str  # absolute path a reader can open
    size: int
    records: int | None
    min_ts: int | None  # the bounds of its timestamp column (µs), truncated to milliseconds as Delta stores them
    max_ts: int | None
    partition: Mapping[str, str | None]
    written: int | None = None  # when the file was written (its add action's modification time), µs


STATISTICS_TRUNCATION_MICROS = 1_000
"""Delta stores timestamp statistics truncated to milliseconds: a file's true maximum can be up to this much
above its recorded one."""


def ceiling(maximum: int) -> int:
    """An instant (µs) above every value of a file whose recorded maximum is ``maximum``."""
    return maximum + STATISTICS_TRUNCATION_MICROS


def may_hold_after(maximum: int | None, instant: int) -> bool:
    """Whether a file whose recorded maximum is ``maximum`` may hold a value later than ``instant``."""
    return maximum is None or ceiling(maximum) > instant


def may_hold_from(maximum: int | None, instant: int) -> bool:
    """Whether a file whose recorded maximum is ``maximum`` may hold a value at or after ``instant``."""
    return maximum is None or ceiling(maximum) >= instant


def may_hold_instant(minimum: int | None, maximum: int | None, instant: int) -> bool:
    """Whether a file whose timestamp statistics (µs) are [minimum, maximum] may hold ``instant``."""
    if minimum is not None and minimum - STATISTICS_TRUNCATION_MICROS > instant:
        return False
    return may_hold_from(maximum, instant)


def may_hold_between(minimum: int | None, maximum: int | None, start: int | None, end: int | None) -> bool:
    """Whether a file whose timestamp statistics (µs) are [minimum, maximum] may hold a value in [start, end]
    (None: unbounded on that side)."""
    if end is not None and minimum is not None and minimum - STATISTICS_TRUNCATION_MICROS > end:
        return False
    return start is None or may_hold_from(maximum, start)


def may_hold_string(minimum: str | None, maximum: str | None, value: str) -> bool:
    """Whether a file whose string statistics are [minimum, maximum] may hold ``value`` (Delta writers may
    truncate string statistics to a prefix, so the maximum is compared on the value's prefix)."""
    if minimum is not None and minimum > value:
        return False
    if maximum is not None and value[: len(maximum)] > maximum:
        return False
    return True


def select_window_files(files: list[FileInfo], bounds: WindowBounds) -> list[FileInfo]:
    """The files that can hold a triple with start < τ ≤ end: by hour bucket, then by timestamp statistics."""
    first_bucket, last_bucket = bucket_of(bounds.start + 1), bucket_of(bounds.end)
    chosen = []
    for file in files:
        bucket = file.partition.get("bucket")
        if bucket is not None and not (first_bucket <= bucket <= last_bucket):
            continue
        if file.min_ts is not None and file.min_ts > bounds.end:
            continue
        if not may_hold_after(file.max_ts, bounds.start):
            continue
        chosen.append(file)
    return chosen


def select_latest_files(files: list[FileInfo], end: int, count: int) -> list[FileInfo]:
    """The files that surely hold the ``count`` latest triples with τ ≤ end: what a physical window
    ``[TRIPLES count]`` ending at ``end`` holds (docs/semantics.md, *Physical windows*).

    Files are taken newest first. Once the files lying wholly at or before ``end`` hold ``count`` records,
    every triple of the answer is at least as late as the oldest of them (``floor``); any other file whose
    maximum reaches ``floor`` may still hold one of the answer's triples and is kept too. Files without
    statistics are always kept.
    """
    candidates = [f for f in files if f.min_ts is None or f.min_ts <= end]
    unknown = [f for f in candidates if f.max_ts is None or f.records is None]
    known = sorted((f for f in candidates if f not in unknown), key=lambda f: f.max_ts, reverse=True)
    chosen: list[FileInfo] = []
    held = 0
    floor = None
    for file in known:
        within = ceiling(file.max_ts) <= end
        if floor is not None and not may_hold_from(file.max_ts, floor):
            break
        chosen.append(file)
        if within and floor is None:
            held += file.records
            if held >= count:
                floor = min(f.min_ts for f in chosen if ceiling(f.max_ts) <= end and f.min_ts is not None)
    return chosen + unknown


def select_latest_window(files: list[FileInfo]) -> list[FileInfo]:
    """The files that can hold the latest value of the table's timestamp column: all of them when one has no
    statistics, else those whose maximum may reach the greatest recorded maximum."""
    if any(f.max_ts is None for f in files):
        return list(files)
    latest = max((f.max_ts for f in files), default=None)
    return [f for f in files if latest is None or may_hold_from(f.max_ts, latest)]

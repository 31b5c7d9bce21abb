"""A stream table's small files merged minute by minute, so that a window reads a few files, not one per landing.

Every ingest commits at least one file per hour bucket it touches, so a stream landed every few seconds holds
hundreds of small files an hour, and an evaluation opens every file its window overlaps: Spark lists each
one, reads its footer and schedules its rows, which costs more than the rows themselves for small windows (a
5-minute window of a stream landed every 5 s is 60 files). After each ingest, ``compact_stream`` rewrites the
small files whose timestamps all lie within one *closed* minute — ``[m, m + 1 min)``, with a later triple
landed in the stream — as one file. Late triples for a closed minute land in a file of their own, which the
next ingest merges with that minute's file again. The minute still filling is left alone: its files would
be rewritten at every landing.

A compaction changes no row and no window's answer: it is a commit that removes the files and adds their
rows as one file (``csparql.storage.delta.compact_files``: ``dataChange`` false, the timestamp bounds
recorded, one of concurrent compactions commits), with no event times, so the staleness checks
(``csparql.storage.stale_windows``) never take it for late data; the removed files stay readable for an
evaluation that listed them until ``csparql vacuum`` deletes them past its retention.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

from csparql.storage import delta
from csparql.storage.pruning import FileInfo

log = logging.getLogger(__name__)

COMPACTION_SPAN_MICROS = 60_000_000
"""The span of event time whose small files are merged into one: a minute."""
SMALL_FILE_BYTES = 8 * 1024 * 1024
"""Files from this size on are never rewritten (a stream landed in large batches has nothing to merge)."""

SpanKey = tuple[tuple[tuple[str, str | None], ...], int]
"""A group of files to merge: their partition (sorted items) and the start of their span (µs)."""


def closed_span_groups(files: Sequence[FileInfo], span: int = COMPACTION_SPAN_MICROS) -> dict[SpanKey, list[FileInfo]]:
    """The groups of ``files`` (a stream table's live files) worth merging: in one partition, small
    (``SMALL_FILE_BYTES``), with every timestamp in one aligned span of ``span`` µs that a later file's
    timestamps have passed (closed), and at least two of them; each in the order of its files' first
    timestamps, so that the merged file's rows are in time order."""
    bounded = [f for f in files if f.min_ts is not None and f.max_ts is not None]
    if not bounded:
        return {}
    latest = max(f.max_ts for f in bounded)
    groups: dict[SpanKey, list[FileInfo]] = {}
    for file in bounded:
        start = file.min_ts // span * span
        if file.size is None or file.size >= SMALL_FILE_BYTES or file.max_ts >= start + span or \
                latest < start + span:
            continue
        groups.setdefault((tuple(sorted(file.partition.items())), start), []).append(file)
    return {key: sorted(group, key=lambda f: (f.min_ts, f.max_ts, f.uri)) for key, group in groups.items()
            if len(group) >= 2}


def compact_stream(path, span: int = COMPACTION_SPAN_MICROS) -> int:
    """Merge each group of ``closed_span_groups`` of the stream table at ``path`` into one file, a commit each
    (``delta.compact_files``); returns how many groups were merged. Never raises: a compaction is an
    optimization, and what fails is logged and left for the next ingest."""
    try:
        _, files = delta.SNAPSHOTS.snapshot(path)
        merged = 0
        for key in sorted(closed_span_groups(files, span)):
            if delta.compact_files(path, functools.partial(_group, key, span), timestamp_column="ts"):
                merged += 1
        return merged
    except Exception as error:  # noqa: BLE001 - the stream's rows are right either way
        log.warning("compacting the stream table at %s failed (%s); its files stay as they are", path,
                    " ".join(str(error).split())[:300])
        return 0


def _group(key: SpanKey, span: int, files: list[FileInfo]) -> list[FileInfo]:
    """The files of the group ``key`` among ``files`` (a newer version's), if it is still worth merging."""
    return closed_span_groups(files, span).get(key, [])

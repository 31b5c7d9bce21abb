"""The Arrow schemas of the warehouse's tables."""

from __future__ import annotations

import pyarrow as pa

from csparql.storage.terms import TERM_TYPE

TIMESTAMP = pa.timestamp("us", tz="UTC")

STREAM = pa.schema(
    [
        pa.field("s", TERM_TYPE, nullable=False),
        pa.field("p", TERM_TYPE, nullable=False),
        pa.field("o", TERM_TYPE, nullable=False),
        pa.field("ts", TIMESTAMP, nullable=False),
        pa.field("arrival", pa.int64(), nullable=False),
        pa.field("bucket", pa.string(), nullable=False),
    ]
)
"""A stream: triples with their event time ``ts`` (UTC, µs), arrival order, and the hour bucket they are
partitioned by (``yyyyMMddTHH`` of ``ts``)."""

STREAM_PARTITIONS = ["bucket"]

STATIC = pa.schema(
    [
        pa.field("s", TERM_TYPE, nullable=False),
        pa.field("p", TERM_TYPE, nullable=False),
        pa.field("o", TERM_TYPE, nullable=False),
    ]
)

WINDOW_COLUMNS = [pa.field("window_start", TIMESTAMP), pa.field("window_end", TIMESTAMP, nullable=False)]

QUERY_VERSION = pa.field("query_version", pa.string())
"""The version of the query text that produced a result row (the last column of every result table; tables
written before versions were recorded gain it on their next write, their older rows null)."""

ANSWERS = pa.schema([*WINDOW_COLUMNS, pa.field("answer", pa.bool_(), nullable=False), QUERY_VERSION])

TRIPLES = pa.schema(
    [
        *WINDOW_COLUMNS,
        pa.field("subject", pa.string(), nullable=False),
        pa.field("predicate", pa.string(), nullable=False),
        pa.field("object", pa.string(), nullable=False),
        QUERY_VERSION,
    ]
)
"""CONSTRUCT/DESCRIBE results of a registered query, terms in N-Triples syntax."""

RUNS = pa.schema(
    [
        pa.field("run_id", pa.string(), nullable=False),
        pa.field("query", pa.string(), nullable=False),
        pa.field("window_start", TIMESTAMP),
        pa.field("window_end", TIMESTAMP, nullable=False),
        pa.field("started_at", TIMESTAMP, nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("triples_read", pa.string()),
        pa.field("files_read", pa.string()),
        pa.field("rows_written", pa.int64()),
        pa.field("duration_ms", pa.int64()),
        pa.field("complete", pa.bool_()),
        pa.field("query_version", pa.string()),
        pa.field("revision", pa.int64()),
        pa.field("result_version", pa.int64()),
    ]
)
"""One row per evaluation. ``triples_read`` and ``files_read`` are JSON objects keyed by stream IRI: the files
the evaluation read after pruning and the triples they hold (the I/O, so at least the window's triples; an
ISTREAM or DSTREAM query reads the previous window too, and both count);
``query_version`` is the version of the query text evaluated (``csparql.deploy.history.text_version``), null in
rows written before versions were recorded (the column was added to existing tables on their next append).
``revision`` numbers the evaluations of one window (0 the first, 1 its first revision …) and ``result_version``
is the Delta version of the result table the evaluation committed (Delta time travel reads a window's earlier
revisions there); both are null in rows written before revisions were recorded."""

REVISION = pa.field("revision", pa.int64())
"""The revision of a window's results (0: its first evaluation; ``csparql.storage.revisions``), the column
after ``query_version`` in every result table; older rows read null."""

STALE_WINDOWS = pa.schema(
    [
        pa.field("query", pa.string(), nullable=False),
        pa.field("window_start", TIMESTAMP),
        pa.field("window_end", TIMESTAMP, nullable=False),
        pa.field("stream", pa.string(), nullable=False),
        pa.field("stream_version", pa.int64(), nullable=False),
        pa.field("committed_at", TIMESTAMP, nullable=False),
        pa.field("reason", pa.string(), nullable=False),
        pa.field("late_triples", pa.int64(), nullable=False),
        pa.field("lateness_p50_ms", pa.int64()),
        pa.field("lateness_max_ms", pa.int64()),
        pa.field("detected_at", TIMESTAMP, nullable=False),
        pa.field("within_horizon", pa.bool_(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("revision", pa.int64()),
    ]
)
"""Windows already evaluated that a later stream commit touched (``csparql.storage.revisions``): an append-only
log; a window's staleness by one commit (query, window_end, stream, stream_version) is its latest row: status
``pending`` (to be revised), ``beyond_horizon`` (recorded, never revised) or ``revised`` (with the revision that
saw the commit)."""

STATISTICS = pa.schema(
    [
        pa.field("source", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("generation", pa.int64(), nullable=False),
        pa.field("replaces", pa.bool_(), nullable=False),
        pa.field("predicate", pa.string(), nullable=False),
        pa.field("triples", pa.int64(), nullable=False),
    ]
)
"""Append-only counts of triples per source and predicate; a generation that ``replaces`` hides the earlier
ones of its source (a static graph loaded with --replace). ``source`` is the IRI, or '' for the default graph."""

WATERMARKS = pa.schema(
    [
        pa.field("stream", pa.string(), nullable=False),
        pa.field("watermark", TIMESTAMP, nullable=False),
        pa.field("recorded_at", TIMESTAMP, nullable=False),
        pa.field("source", pa.string(), nullable=False),
    ]
)
"""How far each stream is known to be complete: its watermark is the greatest value recorded for it."""

"""The Arrow schemas of the warehouse's tables, of the files Spark reads and writes, and of the term struct.

These are the storage contract: the Spark layer derives its schemas from them (``csparql.spark.schema``)
rather than spelling them again. Only pyarrow, so that the executors' line parser can use them.
"""

from __future__ import annotations

import pyarrow as pa

IRI, BLANK, LITERAL = 1, 2, 3
"""The ``kind`` of a stored term (see ``csparql.storage.terms``)."""

TERM_TYPE = pa.struct(
    [
        pa.field("kind", pa.int8(), nullable=False),
        pa.field("value", pa.string(), nullable=False),
        pa.field("datatype", pa.string()),
        pa.field("language", pa.string()),
    ]
)
"""An RDF term as stored: (kind, value, datatype, language)."""

TIMESTAMP = pa.timestamp("us", tz="UTC")

TRIPLE_FIELDS = [
    pa.field("s", TERM_TYPE, nullable=False),
    pa.field("p", TERM_TYPE, nullable=False),
    pa.field("o", TERM_TYPE, nullable=False),
]

STREAM = pa.schema(
    [
        *TRIPLE_FIELDS,
        pa.field("ts", TIMESTAMP, nullable=False),
        pa.field("arrival", pa.int64(), nullable=False),
        pa.field("bucket", pa.string(), nullable=False),
    ]
)
"""A stream: triples with their event time ``ts`` (UTC, µs), arrival order, and the hour bucket they are
partitioned by (``yyyyMMddTHH`` of ``ts``)."""

STREAM_PARTITIONS = ["bucket"]

STREAM_FILE = pa.schema([field for field in STREAM if field.name not in STREAM_PARTITIONS])
"""What a stream table's data files hold (the bucket is in their folder, not in them)."""

STATIC = pa.schema(TRIPLE_FIELDS)
"""A static graph, and what its data files hold."""

PARSED_STREAM = pa.schema(
    [
        *TRIPLE_FIELDS,
        pa.field("ts_micros", pa.int64(), nullable=False),
        pa.field("arrival", pa.int64(), nullable=False),
        pa.field("bucket", pa.string(), nullable=False),
    ]
)
"""What the executors' line parser returns for a stream: terms, the timestamp in microseconds (Spark turns it
into a timestamp), the arrival order and the hour bucket."""

PARSED_STATIC = STATIC
"""What the executors' line parser returns for a static graph."""

CLOSURES = pa.schema(
    [
        pa.field("a", TERM_TYPE),
        pa.field("b", TERM_TYPE),
        pa.field("g", pa.string()),
        pa.field("family", pa.string(), nullable=False),
        pa.field("closure", pa.string(), nullable=False),
    ]
)
"""Closures of static graphs: pairs (a, b) per graph ``g`` (null: the default graph), partitioned by
``CLOSURES_PARTITIONS``."""

CLOSURES_PARTITIONS = ["family", "closure"]

CLOSURES_FILE = pa.schema([field for field in CLOSURES if field.name not in CLOSURES_PARTITIONS])
"""What the closures table's data files hold."""

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
        pa.field("inputs_complete_at", TIMESTAMP),
    ]
)
"""One row per evaluation. ``triples_read`` and ``files_read`` are JSON objects keyed by stream IRI: the files
the evaluation read after pruning and the triples they hold (the I/O, so at least the window's triples; an
ISTREAM or DSTREAM query reads the previous window too, and both count);
``query_version`` is the version of the query text evaluated (``csparql.deploy.history.text_version``), null in
rows written before versions were recorded (the column was added to existing tables on their next append).
``revision`` numbers the evaluations of one window (0 the first, 1 its first revision …) and ``result_version``
is the Delta version of the result table the evaluation committed (Delta time travel reads a window's earlier
revisions there); both are null in rows written before revisions were recorded. ``inputs_complete_at`` is when
the last of a complete window's inputs was committed (``csparql.storage.watermarks.inputs_complete_at``), so
``started_at - inputs_complete_at`` is how long the window waited after its data was there; null for a window
evaluated incomplete or waiting for nothing, and in rows written before it was recorded."""

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
"""Windows already evaluated that a later stream commit touched (``csparql.storage.stale_windows``): an append-only
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

PANE_TERM = pa.struct([pa.field("kind", pa.int8()), pa.field("value", pa.string()),
                       pa.field("datatype", pa.string()), pa.field("language", pa.string())])
"""A stored term of a pane row (null when unbound)."""

PANE_PARTITIONS = ["bucket"]
"""Pane tables are partitioned by the hour bucket of the pane's end, as streams are: a window reads only the
buckets it overlaps, and a bucket's files are compacted once there are enough of them
(``csparql.engine.panes.COMPACT_FILES``)."""


def pane_table_schema(columns: int) -> pa.Schema:
    """A pane table (``_csparql/panes/<query>/<key>``, ``csparql.engine.panes``): ``ts`` the pane's end (null
    for rows of static solutions, in every window), ``pane_key`` the pane's end and fingerprint
    (``end:fingerprint``), ``marker`` true for the one row recording that the pane was computed, one term
    column ``c<i>`` per stored variable, and ``bucket``, the hour bucket of ``ts`` (the partition)."""
    return pa.schema([pa.field("ts", TIMESTAMP), pa.field("pane_key", pa.string()),
                      pa.field("marker", pa.bool_()), *(pa.field(f"c{i}", PANE_TERM) for i in range(columns)),
                      pa.field("bucket", pa.string())])


def pane_file_schema(columns: int) -> pa.Schema:
    """What a pane table's data files hold (the bucket is in their folder, not in them)."""
    return pa.schema([field for field in pane_table_schema(columns) if field.name not in PANE_PARTITIONS])

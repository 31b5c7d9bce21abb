"""The catalog of the warehouse's tables, without Spark: where each of csparql's own tables lives, its SQL
name, its schema and partitions; the keys csparql records in Delta table properties and commit metadata; and
how a SELECT query's variables name the columns of its result table.

Streams, static graphs and result tables are found per IRI or query through ``csparql.storage.warehouse``;
their schemas are in ``csparql.storage.schema``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import pyarrow as pa

from csparql.storage import schema

# --- Delta table properties (a table's configuration) ----------------------------------------------------

IRI_PROPERTY = "csparql.iri"
"""The IRI of the stream or named graph a table holds (absent for the default graph)."""
KIND_PROPERTY = "csparql.kind"
"""What a table holds: ``stream``, ``static`` or ``closures``."""
QUERY_PROPERTY = "csparql.query"
"""The query whose results a result table holds, or that produces an output stream (REGISTER STREAM)."""
VARIABLES_PROPERTY = "csparql.variables"
"""A bindings table's query variables, in order (JSON), which name its columns (``column_names``)."""

# --- Delta commit metadata (what one commit records) ------------------------------------------------------

RUN_METADATA = "csparql.run"
"""Commit metadata of every result commit: the run it completes, as JSON (``RunRecord``). The results and
the runs table are two Delta tables, so two commits; a process that dies between them leaves results whose
run is written here only, and ``Engine.record_lost_runs`` appends it to the runs table later."""
OUTPUT_PREDICATES = "csparql.predicates"
"""Commit metadata of a REGISTER STREAM output commit: its triples per predicate (JSON), what the statistics
record for the stream."""
LANDED_FILE = "csparql.landed_file"
"""Commit metadata of an ingest of a landed file: the file's name (``csparql.ingest.landing``)."""
LANDED_SHA256 = "csparql.landed_sha256"
"""Commit metadata of an ingest of a landed file: the SHA-256 of its content."""
CONTENT_SHA256 = "csparql.content_sha256"
"""Commit metadata of an ingest or a static load: the SHA-256 that identifies what it landed, from the stream or
graph, its input files' contents and ``--timestamp`` (``csparql.ingest.ingest.content_digest``): the same content
is not landed twice unless asked again."""
LANDED_WATERMARK = "csparql.landed_watermark"
"""Commit metadata of a stream ingest: the watermark (µs) it advances the stream to once committed, which a
re-run of the same content completes when the ingest stopped before recording it."""
LANDED_TRIPLES = "csparql.landed_triples"
"""Commit metadata of a stream ingest: how many triples it landed."""
IDEMPOTENCY_KEY = "csparql.idempotency_key"
"""Commit metadata of a pushed body (``POST /csparql/api/streams/...``): the request's ``Idempotency-Key``, so a
retry with the same key finds the commit that landed it instead of landing it again."""
PUSHED_BY = "csparql.pushed_by"
"""Commit metadata of a pushed body: the Airflow user who pushed it."""
SOURCE = "csparql.source"
"""Commit metadata of a batch consumed from a message bus: the source (``csparql.ingest.sources.SourceSpec.id``);
the commit also records Delta's application transaction ``csparql-source:<source>`` with the batch's number."""
SOURCE_POSITIONS = "csparql.source_positions"
"""Commit metadata of a batch consumed from a message bus: where the next batch starts (JSON: the last Redis
entry id consumed, or the next offset of each Kafka partition)."""
SOURCE_GAP = "csparql.source_gap"
"""Commit metadata of a batch consumed from a message bus after messages were gone before they were read (a
trimmed Redis stream, a Kafka partition's retention): JSON, per gap, the position after which they were lost, the
oldest one still there and how many (``csparql.ingest.sources.Gap``)."""
OPERATION = "csparql.operation"
"""Commit metadata: what wrote the commit (``ingest-stream``, ``load-static``, ``store-closure`` …)."""
TARGET = "csparql.target"
"""Commit metadata of an ingest: the stream or graph it loaded."""
INGEST_ID = "csparql.ingest"
"""Commit metadata of an ingest: its id (the name of its staging folder)."""
INPUTS = "csparql.inputs"
"""Commit metadata of an ingest: the files it read (JSON)."""
CLOSURE = "csparql.closure"
"""Commit metadata of a stored closure: what it closes (``ClosureKey.description``)."""

# --- csparql's own tables ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SystemTable:
    """One of csparql's own tables: its SQL name, its folder under the warehouse root, schema, partitions, and
    whether ``csparql sql`` shows it (``in_sql``; the name is reserved either way)."""

    name: str
    folder: str
    schema: pa.Schema
    partitions: tuple[str, ...] = ()
    in_sql: bool = True


RUNS = SystemTable("runs", "_csparql/runs", schema.RUNS)
"""One row per evaluation."""
STATISTICS = SystemTable("statistics", "_csparql/statistics", schema.STATISTICS)
"""Per source and predicate, how many triples were loaded (the optimizer's statistics)."""
STALE_WINDOWS = SystemTable("stale_windows", "_csparql/stale_windows", schema.STALE_WINDOWS)
"""Windows evaluated before late triples of their streams landed (``csparql.storage.stale_windows``)."""
WATERMARKS = SystemTable("watermarks", "_csparql/watermarks", schema.WATERMARKS, in_sql=False)
"""Per stream, how far its triples are known to have landed."""
CLOSURES = SystemTable("closures", "_csparql/closures", schema.CLOSURES, tuple(schema.CLOSURES_PARTITIONS),
                       in_sql=False)
"""Closures of static graphs, per version of the graphs (property paths, entailment)."""

SYSTEM_TABLES = (RUNS, STATISTICS, STALE_WINDOWS, WATERMARKS, CLOSURES)
"""csparql's own tables, under ``_csparql/``."""

INTERNAL_FOLDERS = {"panes": "_csparql/panes", "query_facts": "_csparql/query_facts"}
"""csparql's other folders under ``_csparql/``, by name: the pane tables of every query (one Delta table per
query and pane plan, ``csparql.engine.panes``) and the registry's compile cache (JSON files)."""

SQL_SCHEMA_NAMES = ("datafusion", "public", "information_schema")
"""The names SQL (DataFusion) gives its catalog and schemas: a table named so reads as one of them
(``information_schema.tables``, ``public.runs``, ``datafusion.public.runs``)."""

RESERVED_NAMES = {**{table.name: f"the warehouse's {table.name} table ({table.folder})" for table in SYSTEM_TABLES},
                  **{name: f"the warehouse's {name} folder ({folder})" for name, folder in INTERNAL_FOLDERS.items()},
                  **{name: f"a catalog or schema name of SQL ({name})" for name in SQL_SCHEMA_NAMES}}
"""Every name a query's SQL result table must not take, with what it names: the warehouse's own tables and
folders, and SQL's catalog and schema names."""

# --- result tables ----------------------------------------------------------------------------------------

RESULT_KINDS = ("bindings", "answers", "triples")
"""The result table of a SELECT, an ASK, a CONSTRUCT or DESCRIBE query (``results/<query>/<kind>``)."""

RESULT_SCHEMAS = {"answers": schema.ANSWERS, "triples": schema.TRIPLES}
"""The fixed schemas of result tables; a bindings table's columns follow its variables (``column_names``)."""

RESERVED_COLUMNS = frozenset({"window_start", "window_end", "query_version", "revision"})
"""The columns of every result table that no variable may name."""


def column_names(variables: Iterable) -> dict:
    """The analyst column name of each variable of a SELECT query: its name with unsafe characters replaced,
    unique (the typed value is in that column, the N-Triples term in ``<name>_term``)."""
    names = {}
    used = set(RESERVED_COLUMNS)
    for var in variables:
        base = re.sub(r"[^A-Za-z0-9_]", "_", str(var)) or "var"
        if base[0].isdigit():
            base = "v_" + base
        name = base
        counter = 2
        while name in used or name + "_term" in used:
            name = f"{base}_{counter}"
            counter += 1
        used.update({name, name + "_term"})
        names[var] = name
    return names

"""Windows computed from panes (issue 18): each pane's partial result computed once, stored, and combined.

``csparql.optimizer.panes`` decides which queries may (``pane_plan``) and rewrites them into a partial plan and
a combination plan. Here they meet storage and Spark:

- **The store.** A query's panes live in ``_csparql/panes/<query>/<key>``, one Delta table per *pane key*: a
  hash of the partial plan (so of the query text and the statistics its optimization used), the pane length
  and the identity (Delta id and version) of every static graph the query reads. A new static version or a
  new query version is a new key: its panes are computed afresh, never mixed with older ones.
- **A pane's identity.** Each stored pane records the *fingerprint* of the stream files it was computed from:
  the files whose timestamps can hold a triple of the pane (the same pruning a window's read uses). Late
  triples land in new files, so the panes they reach get a new fingerprint and are computed again; panes they
  do not reach are kept. A pane with no solution is stored too, as a marker row, so it is not computed again.
- **A window.** An evaluation computes the window's missing panes in one Spark job (pane mode: every solution
  tagged with its pane), appends their rows and markers in one commit, then combines the window's rows in a
  second job (``alg.PaneRows`` read from the pane table's files, filtered to the window's panes with their
  current fingerprints, plus the rows of solutions made of static triples only, which belong to every window).
  Rows stored twice (two evaluations computing one pane at once) change nothing: the combination reads the
  rows as a set.
- **Replays** compute the missing panes of all their windows in one job first (``PaneComputer.ensure``).
- **Housekeeping.** Pane tables are partitioned by the hour bucket of the pane's end, as streams are; a
  bucket's files are compacted into one once there are ``COMPACT_FILES``; ``csparql vacuum`` removes panes
  older than its retention (``csparql.storage.maintenance.prune_panes``): a cache, computed again on need.
- **When** (``csparql.engine.runner.Engine.pane_computer``): the pane mode (``csparql.optimizer.panes.AUTO``,
  ``ALWAYS``, ``OFF``) and, in ``AUTO``, whether the partials are keyed and the window's size
  (``pane_min_triples``).

Every answer equals the recompute's (``tests/engine/test_panes.py`` checks pane, recompute and an independent
evaluator window by window); ``# csparql panes off`` recomputes.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Iterable
from contextlib import contextmanager
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, StringType, StructField, StructType, TimestampType

from csparql.algebra import operators as alg
from csparql.algebra.sexpr import format_operator
from csparql.engine.catalog import Catalog, DeltaSourceReader, select_window_files
from csparql.engine.evaluate import QueryResult, compile_plan
from csparql.optimizer.panes import PanePlan, PartialPlan, pane_combination_plan, pane_partial_plan
from csparql.optimizer.statistics import SourceStatistics
from csparql.spark.terms import NULLABLE_TERM_STRUCT
from csparql.storage import delta
from csparql.storage.instants import bucket_of
from csparql.storage.tables import OPERATION
from csparql.windows import WindowBounds

log = logging.getLogger(__name__)

PANE_FORMAT = "1"
"""What a pane table holds; a change of it is a change of every pane key."""

PANE_TERM = pa.struct([pa.field("kind", pa.int8()), pa.field("value", pa.string()),
                       pa.field("datatype", pa.string()), pa.field("language", pa.string())])
"""A stored term of a pane row (null when unbound)."""


PANE_PARTITIONS = ["bucket"]
"""Pane tables are partitioned by the hour bucket of the pane's end, as streams are: a window reads only the
buckets it overlaps, and a bucket's files are compacted once there are ``COMPACT_FILES`` of them."""

COMPACT_FILES = 16
"""How many files an hour bucket of a pane table holds before they are compacted into one (every evaluation
that computes panes appends one)."""


def pane_table_schema(columns: int) -> pa.Schema:
    """A pane table: ``ts`` the pane's end (null for rows of static solutions, in every window), ``pane_key``
    the pane's end and fingerprint (``end:fingerprint``), ``marker`` true for the one row recording that the
    pane was computed, one term column ``c<i>`` per stored variable, and ``bucket``, the hour bucket of ``ts``
    (the partition)."""
    return pa.schema([pa.field("ts", pa.timestamp("us", tz="UTC")), pa.field("pane_key", pa.string()),
                      pa.field("marker", pa.bool_()), *(pa.field(f"c{i}", PANE_TERM) for i in range(columns)),
                      pa.field("bucket", pa.string())])


def _spark_schema(columns: int) -> StructType:
    return StructType([StructField("ts", TimestampType()), StructField("pane_key", StringType()),
                       StructField("marker", BooleanType()),
                       *(StructField(f"c{i}", NULLABLE_TERM_STRUCT) for i in range(columns))])


@dataclass
class PaneUse:
    """How one evaluation used panes: the pane length (µs), the window's panes, how many of them this
    evaluation computed (the others were read back), and the pane key."""

    pane: int
    panes: int
    computed: int
    key: str


def pane_ends(bounds: WindowBounds, pane: int) -> list[int]:
    """The ends of the panes (end − pane, end] that make up a window."""
    return list(range(bounds.start + pane, bounds.end + 1, pane))


class PaneComputer:
    """Computes and combines the panes of one query's windows (see the module docstring)."""

    def __init__(self, spark: SparkSession, catalog: Catalog, name: str, plan: alg.QueryPlan, decision: PanePlan,
                 statistics: SourceStatistics, compact_triples: int):
        """``plan``: the query optimized with ``statistics``; ``decision``: its ``pane_plan``."""
        self.spark = spark
        self.catalog = catalog
        self.name = name
        self.plan = plan
        self.decision = decision
        self.statistics = statistics
        self.compact_triples = compact_triples
        self.pane = decision.windows[0].pane
        self.streams = tuple(sorted(window.stream for window in decision.windows))
        self.partial: PartialPlan = pane_partial_plan(plan, decision)
        self.combination = pane_combination_plan(plan, decision, self.partial)
        self._static = DeltaSourceReader(spark, catalog, {})
        self.key = self._key()
        self.path = catalog.warehouse.panes(name) / self.key
        self._stream_files = {iri: self._files(iri) for iri in self.streams}

    # identities

    def _key(self) -> str:
        """The pane key: the partial plan, the pane length and the static graphs' identities."""
        digest = hashlib.sha256()
        digest.update(f"{PANE_FORMAT}\n{self.pane}\n".encode())
        digest.update(format_operator(self.partial.plan.pattern).encode())
        for source in self._static_sources():
            digest.update(f"{source.iri}={self._static.static_identity(source)}\n".encode())
        return digest.hexdigest()[:20]

    def _static_sources(self) -> list[alg.StaticGraph]:
        dataset = self.plan.dataset
        sources = [s for s in (*dataset.default, *dataset.named) if isinstance(s, alg.StaticGraph)]
        expanded: dict[alg.StaticGraph, None] = {}
        for source in sources:
            if source == alg.ALL_NAMED_GRAPHS:
                expanded.update(dict.fromkeys(alg.StaticGraph(iri) for iri in self.catalog.named_graphs()))
            else:
                expanded[source] = None
        return sorted(expanded, key=lambda s: str(s.iri))

    def _files(self, iri) -> list[delta.FileInfo]:
        path = self.catalog.warehouse.stream(str(iri))
        if not delta.exists(path):
            return []
        _, files = delta.SNAPSHOTS.snapshot(path)
        return files

    def fingerprint(self, end: int) -> str:
        """The stream files a pane is computed from (those that can hold a triple of it), as a hash."""
        digest = hashlib.sha256()
        bounds = WindowBounds(end - self.pane, end)
        for iri in self.streams:
            digest.update(f"{iri}\n".encode())
            for uri in sorted(f.uri for f in select_window_files(self._stream_files[iri], bounds)):
                digest.update(f"{uri}\n".encode())
        return digest.hexdigest()[:20]

    def pane_keys(self, ends: Iterable[int]) -> dict[int, str]:
        """Each pane's key in the table (``end:fingerprint``) as the streams stand now."""
        return {end: f"{end}:{self.fingerprint(end)}" for end in ends}

    # computing

    def stored(self, keys: dict[int, str]) -> set[int]:
        """The panes among ``keys`` whose marker (with their current fingerprint) the table has: read from
        the files whose panes can be among them."""
        if not keys:
            return set()
        files = pane_files(self.path, WindowBounds(min(keys) - self.pane, max(keys)))
        present: set[str] = set()
        for file in files:
            found = pq.read_table(file.uri, columns=["pane_key", "marker"])
            present.update(found.filter(found.column("marker")).column("pane_key").to_pylist())
        return {end for end, key in keys.items() if key in present}

    def ensure(self, ends: Iterable[int]) -> tuple[int, dict]:
        """Compute the panes among ``ends`` the table lacks, in one Spark job and one commit; returns how many
        were computed and the scans of the stream reads (IRI → ``Scan``)."""
        keys = self.pane_keys(sorted(set(ends)))
        missing = sorted(set(keys) - self.stored(keys))
        if not missing:
            return 0, {}
        bounds = WindowBounds(missing[0] - self.pane, missing[-1])
        reader = DeltaSourceReader(self.spark, self.catalog,
                                   {(source.iri, source.window): bounds for source in self.plan.dataset.streams})
        reader.prepare(self.partial.plan)
        compiled = compile_plan(self.spark, self.partial.plan, reader, at=bounds.end, statistics=self.statistics,
                                optimized=True, compact_triples=self.compact_triples, pane=self.pane)
        result = compiled.result()
        self._store(result, {end: keys[end] for end in missing})
        return len(missing), dict(reader.scans)

    def _store(self, result: QueryResult, keys: dict[int, str]) -> None:
        """Append the rows of the computed panes (and of static solutions) and one marker per pane."""
        terms = result.terms  # the columns of the partial plan's variables: the stored ones, then PANE_VAR
        width = len(self.partial.vars)
        ends = pc.cast(terms.column(width).combine_chunks().field("value"), pa.int64())
        wanted = pa.array(sorted(keys), pa.int64())
        keep = pc.or_kleene(pc.is_null(ends), pc.is_in(ends, value_set=wanted))
        rows = terms.filter(keep)
        row_ends = pc.cast(rows.column(width).combine_chunks().field("value"), pa.int64())
        key_of = pa.array([keys.get(end) for end in row_ends.to_pylist()], pa.string())
        columns = {
            "ts": pc.cast(row_ends, pa.timestamp("us", tz="UTC")),
            "pane_key": key_of,
            "marker": pa.array([False] * rows.num_rows, pa.bool_()),
            **{f"c{i}": rows.column(i).combine_chunks().cast(PANE_TERM) for i in range(width)},
        }
        schema = pane_table_schema(width)
        columns["bucket"] = pa.array([None if end is None else bucket_of(end) for end in row_ends.to_pylist()],
                                     pa.string())
        data = pa.Table.from_pydict(columns, schema=schema)
        markers = pa.Table.from_pydict({
            "ts": pa.array(sorted(keys), pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "pane_key": pa.array([keys[end] for end in sorted(keys)], pa.string()),
            "marker": pa.array([True] * len(keys), pa.bool_()),
            **{f"c{i}": pa.nulls(len(keys), PANE_TERM) for i in range(width)},
            "bucket": pa.array([bucket_of(end) for end in sorted(keys)], pa.string()),
        }, schema=schema)
        delta.append(self.path, pa.concat_tables([data, markers]), schema, PANE_PARTITIONS,
                     metadata={OPERATION: "store-panes"})
        self._compact({bucket_of(end) for end in keys})

    def _compact(self, buckets: set[str]) -> None:
        """Compact the hour buckets among ``buckets`` that hold ``COMPACT_FILES`` files or more into one file
        each. Compaction rewrites what is there (readers of the previous version still see theirs); if it
        fails (a concurrent commit), the files stay as they are and the next evaluation tries again."""
        _, files = delta.SNAPSHOTS.snapshot(self.path)
        counts: dict[str, int] = {}
        for file in files:
            bucket = file.partition.get("bucket")
            if bucket in buckets:
                counts[bucket] = counts.get(bucket, 0) + 1
        for bucket, count in sorted(counts.items()):
            if count >= COMPACT_FILES:
                try:
                    delta.open_table(self.path).optimize.compact(partition_filters=[("bucket", "=", bucket)])
                except Exception as error:  # noqa: BLE001 - an optimization; the data are right either way
                    log.warning("panes of %s: compacting bucket %s failed (%s); kept as they are", self.name,
                                bucket, error)

    # combining

    def window_triples(self, bounds: WindowBounds) -> int | None:
        """How many triples the stream files of a window hold (None when a file does not say)."""
        records = [f.records for iri in self.streams for f in select_window_files(self._stream_files[iri], bounds)]
        return None if any(r is None for r in records) else sum(records)

    def window_bounds(self, streams: dict) -> WindowBounds:
        """The bounds of the windows panes make up in an evaluation (every such window has the same)."""
        return streams[self.streams[0]]

    def evaluate(self, window_bounds: WindowBounds, at: int, phases=None) -> tuple[QueryResult, PaneUse, dict]:
        """The window's result combined from its panes, computing the missing ones first; with how panes were
        used and the scans of the stream reads. ``phases`` (``csparql.engine.runner.Phases``) times the
        computation of panes (``panes``) and the combination (``spark``)."""
        phases = phases or _no_phases
        ends = pane_ends(window_bounds, self.pane)
        with phases("panes"):
            computed, scans = self.ensure(ends)
        keys = self.pane_keys(ends)
        reader = PaneRowsReader(self.spark, self.catalog, self.path, window_bounds, keys)
        with phases("spark"):
            compiled = compile_plan(self.spark, self.combination, reader, at=at, statistics=self.statistics,
                                    optimized=True, compact_triples=self.compact_triples)
            result = compiled.result()
        return result, PaneUse(self.pane, len(ends), computed, self.key), scans


def pane_files(path, bounds: WindowBounds) -> list[delta.FileInfo]:
    """The files of a pane table that can hold a pane ending in ``(bounds.start, bounds.end]`` — by hour
    bucket, then by the statistics of ``ts`` — and those of static solutions (no bucket, no ``ts``)."""
    if not delta.exists(path):
        return []
    _, files = delta.SNAPSHOTS.snapshot(path)
    return select_window_files(files, bounds)


@contextmanager
def _no_phases(name: str):
    yield


class PaneRowsReader(DeltaSourceReader):
    """The reader of a combination: static graphs as usual (a HAVING may look at them), and ``pane_rows``,
    the stored rows of one window's panes with their current fingerprints, and those of static solutions."""

    def __init__(self, spark: SparkSession, catalog: Catalog, path, window: WindowBounds, keys: dict[int, str]):
        super().__init__(spark, catalog, {})
        self.path = path
        self.window = window
        self.keys = keys
        self._pane_files: list[delta.FileInfo] | None = None

    def pane_files(self) -> list[delta.FileInfo]:
        if self._pane_files is None:
            self._pane_files = pane_files(self.path, self.window)
        return self._pane_files

    def window_triples(self, streams) -> int | None:
        records = [f.records for f in self.pane_files()]
        return None if any(r is None for r in records) else sum(records)

    def pane_rows(self, vars_: tuple) -> DataFrame:
        files = self.pane_files()
        schema = _spark_schema(len(vars_))
        if not files:
            return self.spark.createDataFrame([], schema)
        frame = self.spark.read.schema(schema).parquet(*[f.uri for f in files])
        wanted = F.col("ts").isNull() | F.col("pane_key").isin(sorted(self.keys.values()))
        return frame.where(~F.col("marker") & wanted)


__all__ = ["PaneComputer", "PaneRowsReader", "PaneUse", "pane_ends", "pane_table_schema", "PANE_FORMAT"]

"""Windows computed from panes: each pane's partial result computed once, stored, and combined.

``csparql.core.panes`` decides which queries may (``pane_plan``) and rewrites them into a partial plan and
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
  tagged with its pane), appends their rows and markers in one commit, lists the table's files again until
  they hold the markers of all the window's panes, then combines the window's rows in a second job
  (``alg.PaneRows`` read from those files, filtered to the window's panes with their current fingerprints,
  plus the rows of solutions made of static triples only, which belong to every window).
  Rows stored twice (two evaluations computing one pane at once) change nothing: the combination reads the
  rows as a set.
- **Replays** compute the missing panes of all their windows in one job first (``PaneComputer.ensure``).
- **A cache.** An evaluation combines exactly the pane files it listed and read the markers of (removed
  later, they stay on disk for ``vacuum``'s retention). Whatever of a pane table cannot be read is never read
  as empty: a file that is missing, truncated or corrupt is dropped from the table (``PaneTable.drop``), a table
  whose log cannot be read is discarded, each with a warning, and the panes they held are computed again;
  after ``PANE_ATTEMPTS`` setbacks the window is recomputed from its streams (``PanesUnavailable``). The rows
  of the static solutions have a marker of their own (``STATIC_SOLUTIONS``), so that they too are known
  present.
- **Housekeeping.** Pane tables are partitioned by the hour bucket of the pane's end, as streams are; a
  bucket's files are compacted into one once there are ``COMPACT_FILES``; ``csparql vacuum`` removes the pane
  files written more than its retention ago — by the wall clock, whatever the event time of their panes
  (``csparql.storage.maintenance.prune_panes``) — and deletes them once the retention has passed again.
- **When** (``csparql.engine.runner.Engine.pane_computer``): the pane mode (``csparql.core.panes.AUTO``,
  ``ALWAYS``, ``OFF``) and, in ``AUTO``, whether the partials are keyed and the window's size
  (``pane_min_triples``: ``CSPARQL_PANES_MIN_TRIPLES``, read here so that the pure ``csparql.core.panes`` is handed
  the value and never reads the environment).

Every answer equals the recompute's (``tests/engine/test_panes.py`` checks pane, recompute and an independent
evaluator window by window); ``# csparql panes off`` recomputes.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
from collections.abc import Iterable, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from csparql.core.algebra import operators as alg
from csparql.core.algebra.sexpr import format_operator
from csparql.engine.catalog import Catalog, DeltaSourceReader, Scan
from csparql.engine.evaluate import compile_plan
from csparql.core.panes import PanePlan, PartialPlan, pane_combination_plan, pane_partial_plan
from csparql.core.optimizer.statistics import SourceStatistics
from csparql.spark.schema import spark_schema
from csparql.storage import delta
from csparql.storage.instants import bucket_of
from csparql.storage.maintenance import UNREADABLE_LOG, discard_table
from csparql.storage.schema import PANE_PARTITIONS, PANE_TERM, pane_file_schema, pane_table_schema
from csparql.storage.pruning import select_window_files
from csparql.storage.results import QueryResult
from csparql.storage.tables import OPERATION
from csparql.core.windows import WindowBounds

log = logging.getLogger(__name__)

PANES_MIN_TRIPLES_VARIABLE = "CSPARQL_PANES_MIN_TRIPLES"

PANE_MIN_TRIPLES = 1_000_000
"""In the ``AUTO`` pane mode (``csparql.core.panes.AUTO``), windows whose stream files hold fewer triples than this
are recomputed (``CSPARQL_PANES_MIN_TRIPLES`` overrides it). A window from panes costs two Spark jobs — its new
pane, then the combination — where a recompute costs one; on two cores a job costs 0.1–0.3 s whatever its
size, so panes pay off only where reading and joining the window is what costs (``docs/performance/panes.md``)."""


def pane_min_triples(environment: Mapping[str, str] | None = None) -> int:
    """The least number of triples in a window's stream files from which ``AUTO`` combines it from panes:
    ``CSPARQL_PANES_MIN_TRIPLES`` of ``environment`` (the process's by default), else ``PANE_MIN_TRIPLES``;
    ``ValueError`` for a value that is not a whole number of triples."""
    text = (os.environ if environment is None else environment).get(PANES_MIN_TRIPLES_VARIABLE)
    if text is None or not text.strip():
        return PANE_MIN_TRIPLES
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{PANES_MIN_TRIPLES_VARIABLE}={text!r} is not a whole number of triples") from None
    if value < 0:
        raise ValueError(f"{PANES_MIN_TRIPLES_VARIABLE}={text!r} is negative")
    return value


PANE_FORMAT = "2"
"""What a pane table holds; a change of it is a change of every pane key (2: the rows of the static solutions
have a marker of their own, ``STATIC_SOLUTIONS``)."""

STATIC_SOLUTIONS = "static"
"""The ``pane_key`` of the marker recording that a pane table holds the rows of the static solutions (the
solutions made of static triples only, which belong to every window)."""

PANE_ATTEMPTS = 3
"""How many setbacks — pane files it listed found unreadable, panes it stored found removed — an evaluation
takes before it stops reading panes (``PanesUnavailable``: the window is recomputed from its streams)."""

UNREADABLE_FILE = (OSError, pa.ArrowException)
"""What reading a pane file that is missing, truncated or corrupt raises."""


class PanesUnavailable(Exception):
    """A window's panes could not be read back after ``PANE_ATTEMPTS`` setbacks (the message says why)."""


COMPACT_FILES = 16
"""How many files an hour bucket of a pane table holds before they are compacted into one (every evaluation
that computes panes appends one)."""


def _spark_schema(columns: int) -> StructType:
    """What Spark reads from a pane table's data files (``csparql.storage.schema.pane_file_schema``)."""
    return spark_schema(pane_file_schema(columns))


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
        self.table = PaneTable(self.path, name)
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

    def ensure(self, ends: Iterable[int]) -> tuple[int, dict]:
        """Compute the panes among ``ends`` the table lacks, in one Spark job and one commit; returns how many
        were computed and the scans of the stream reads (IRI → ``Scan``)."""
        _, computed, scans = self._complete(ends)
        return computed, scans

    def _complete(self, ends: Iterable[int]) -> tuple[list[delta.FileInfo], int, dict]:
        """Live files of the pane table, every one of them read, that hold the panes among ``ends`` (with their
        current fingerprints) and the rows of the static solutions — computing and storing what the table
        lacks first, in one Spark job and one commit. Returns the files, how many panes were computed and the
        scans of the stream reads.

        What the table does not give back is computed again: a file that cannot be read is dropped from the
        table with a warning (``PaneTable.drop``); panes removed meanwhile (``csparql vacuum``) are computed
        again. After ``PANE_ATTEMPTS`` such setbacks, ``PanesUnavailable``."""
        keys = self.pane_keys(sorted(set(ends)))
        if not keys:
            return [], 0, {}
        bounds = WindowBounds(min(keys) - self.pane, max(keys))
        computed, scans, setbacks = 0, {}, 0
        stored: set[str] = set()  # the marker keys this call stored
        while True:
            files = self.table.files(bounds)
            present, unreadable = self.table.markers(files)
            wanted = {*keys.values(), STATIC_SOLUTIONS}
            if unreadable or (stored - present) & wanted:
                setbacks += 1
                if setbacks > PANE_ATTEMPTS:
                    raise PanesUnavailable(f"the panes of {self.name} kept being unreadable or removed while they "
                                           f"were read ({PANE_ATTEMPTS} attempts)")
            if unreadable:
                self.table.drop(unreadable)
                continue
            missing = [end for end in sorted(keys) if keys[end] not in present]
            static = STATIC_SOLUTIONS in present
            if not missing and static:
                return files, computed, scans
            chosen = missing or [max(keys)]  # the static solutions are computed along with any pane
            _add_scans(scans, self._compute({end: keys[end] for end in chosen}, with_static=not static))
            computed += len(chosen)
            stored |= {keys[end] for end in chosen} | ({STATIC_SOLUTIONS} if not static else set())

    def _compute(self, keys: dict[int, str], with_static: bool) -> dict:
        """Compute the panes ``keys`` (end → key) in one Spark job over the stream range they span and store
        them (and, ``with_static``, the rows of the static solutions); returns the scans of the stream reads."""
        bounds = WindowBounds(min(keys) - self.pane, max(keys))
        reader = DeltaSourceReader(self.spark, self.catalog,
                                   {(source.iri, source.window): bounds for source in self.plan.dataset.streams})
        reader.prepare(self.partial.plan)
        compiled = compile_plan(self.spark, self.partial.plan, reader, at=bounds.end, statistics=self.statistics,
                                optimized=True, compact_triples=self.compact_triples, pane=self.pane)
        result = compiled.result()
        self._store(result, keys, with_static)
        return dict(reader.scans)

    def _store(self, result: QueryResult, keys: dict[int, str], with_static: bool) -> None:
        """Append the rows of the computed panes and one marker per pane — and, ``with_static``, the rows of
        the static solutions and their marker — in one commit."""
        terms = result.terms  # the columns of the partial plan's variables: the stored ones, then PANE_VAR
        width = len(self.partial.vars)
        ends = pc.cast(terms.column(width).combine_chunks().field("value"), pa.int64())
        wanted = pa.array(sorted(keys), pa.int64())
        keep = pc.fill_null(pc.is_in(ends, value_set=wanted), False)
        if with_static:
            keep = pc.or_(keep, pc.is_null(ends))
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
        marked = sorted(keys)
        markers = pa.Table.from_pydict({
            "ts": pa.array([*marked, *([None] if with_static else [])], pa.int64()).cast(
                pa.timestamp("us", tz="UTC")),
            "pane_key": pa.array([*(keys[end] for end in marked), *([STATIC_SOLUTIONS] if with_static else [])],
                                 pa.string()),
            "marker": pa.array([True] * (len(marked) + with_static), pa.bool_()),
            **{f"c{i}": pa.nulls(len(marked) + with_static, PANE_TERM) for i in range(width)},
            "bucket": pa.array([*(bucket_of(end) for end in marked), *([None] if with_static else [])], pa.string()),
        }, schema=schema)
        self.table.append(pa.concat_tables([data, markers]), schema)
        self.table.compact({bucket_of(end) for end in keys})

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
        computation of panes (``panes``) and the combination (``spark``).

        The combination reads exactly the files ``_complete`` listed and read, so panes removed after that
        (``csparql vacuum``) are still read: Delta keeps removed files for the retention. When a file it
        listed cannot be read any more (deleted under it, damaged), the file is dropped with a warning and the
        window's panes are listed, computed and combined again; ``PanesUnavailable`` after ``PANE_ATTEMPTS``.
        A window is never combined from fewer panes than it has."""
        phases = phases or _no_phases
        ends = pane_ends(window_bounds, self.pane)
        computed, scans = 0, {}
        for _ in range(PANE_ATTEMPTS):
            with phases("panes"):
                files, more, read = self._complete(ends)
            computed += more
            _add_scans(scans, read)
            reader = PaneRowsReader(self.spark, self.catalog, files, window_bounds, self.pane_keys(ends))
            with phases("spark"):
                try:
                    compiled = compile_plan(self.spark, self.combination, reader, at=at, statistics=self.statistics,
                                            optimized=True, compact_triples=self.compact_triples)
                    result = compiled.result()
                except Exception:
                    unreadable = self.table.unreadable(files)
                    if not unreadable:
                        raise
                    self.table.drop(unreadable)
                    continue
            return result, PaneUse(self.pane, len(ends), computed, self.key), scans
        raise PanesUnavailable(f"the pane files of {self.name} kept being unreadable when the window was combined "
                               f"({PANE_ATTEMPTS} attempts)")


def _add_scans(total: dict, more: dict) -> None:
    """Add the scans ``more`` (IRI → ``Scan``) to ``total``."""
    for iri, scan in more.items():
        if iri not in total:
            total[iri] = Scan()
        total[iri].files += scan.files
        total[iri].rows += scan.rows
        total[iri].file_uris.extend(scan.file_uris)


class PaneTable:
    """One pane table (``_csparql/panes/<query>/<key>``) read as a cache: what cannot be read — a file missing,
    truncated or corrupt, a log entry that is not JSON — is dropped with a warning, never read as empty, and
    the panes it held are computed again."""

    def __init__(self, path: Path, query: str):
        self.path = path
        self.query = query
        self._markers: dict[str, frozenset[str]] = {}  # a file's marker keys by its URI (Delta files never change)

    def files(self, bounds: WindowBounds) -> list[delta.FileInfo]:
        """The live files that can hold a pane ending in ``(bounds.start, bounds.end]`` — by hour bucket, then by
        the statistics of ``ts`` — and those of the static solutions (no bucket, no ``ts``); none when there is
        no table, or when its log cannot be read (the table is then discarded)."""
        if not delta.exists(self.path):
            return []
        try:
            _, files = delta.SNAPSHOTS.snapshot(self.path)
        except UNREADABLE_LOG as error:
            self.discard(error)
            return []
        return select_window_files(files, bounds)

    def markers(self, files: list[delta.FileInfo]) -> tuple[set[str], list[tuple[delta.FileInfo, Exception]]]:
        """The keys of the markers ``files`` hold (panes, ``STATIC_SOLUTIONS``), and the files that could not
        be read, each with its error."""
        present: set[str] = set()
        unreadable = []
        for file in files:
            keys = self._markers.get(file.uri)
            if keys is None:
                try:
                    found = pq.read_table(file.uri, columns=["pane_key", "marker"])
                except UNREADABLE_FILE as error:
                    unreadable.append((file, error))
                    continue
                marked = found.filter(pc.fill_null(found.column("marker"), False))
                keys = self._markers[file.uri] = frozenset(marked.column("pane_key").to_pylist())
            present |= keys
        return present, unreadable

    def unreadable(self, files: list[delta.FileInfo]) -> list[tuple[delta.FileInfo, Exception]]:
        """The files among ``files`` that cannot be read whole (every row group), each with its error."""
        found = []
        for file in files:
            try:
                parquet = pq.ParquetFile(file.uri)
                for group in range(parquet.num_row_groups):
                    parquet.read_row_group(group)
            except UNREADABLE_FILE as error:
                found.append((file, error))
        return found

    def drop(self, unreadable: list[tuple[delta.FileInfo, Exception]]) -> None:
        """Remove files that could not be read from the table, with a warning for each: the panes they held are
        then missing, and computed again."""
        for file, error in unreadable:
            self._markers.pop(file.uri, None)
            log.warning("panes of %s: the pane file %s could not be read (%s); its panes are computed again",
                        self.query, file.uri, _first_line(error))
        try:
            delta.remove_files(self.path, [file.uri for file, _ in unreadable],
                               metadata={OPERATION: "drop-unreadable-panes"})
        except UNREADABLE_LOG as error:
            self.discard(error)

    def discard(self, error: BaseException) -> None:
        """Discard the whole table, whose log cannot be read, with a warning (``discard_table``)."""
        log.warning("panes of %s: the pane table %s cannot be read (%s); it is discarded and its panes are "
                    "computed again", self.query, self.path, _first_line(error))
        self._markers.clear()
        discard_table(self.path)

    def append(self, data: pa.Table, schema: pa.Schema) -> None:
        """Append rows in one commit (to a new table, when the log of this one cannot be read)."""
        try:
            delta.append(self.path, data, schema, PANE_PARTITIONS, metadata={OPERATION: "store-panes"})
        except UNREADABLE_LOG as error:
            self.discard(error)
            delta.append(self.path, data, schema, PANE_PARTITIONS, metadata={OPERATION: "store-panes"})

    def compact(self, buckets: set[str]) -> None:
        """Compact the hour buckets among ``buckets`` that hold ``COMPACT_FILES`` files or more into one file
        each (``delta.compact_files``: one of concurrent compactions commits). Compaction rewrites what is
        there (readers of the previous version still see theirs); if it fails (a file that cannot be read), the
        files stay as they are and the next evaluation tries again."""
        try:
            _, files = delta.SNAPSHOTS.snapshot(self.path)
        except UNREADABLE_LOG:
            return  # the next listing discards the table
        counts: dict[str, int] = {}
        for file in files:
            bucket = file.partition.get("bucket")
            if bucket in buckets:
                counts[bucket] = counts.get(bucket, 0) + 1
        for bucket, count in sorted(counts.items()):
            if count >= COMPACT_FILES:
                delta.compact_files(self.path, functools.partial(_bucket_files, bucket), timestamp_column="ts")


def _bucket_files(bucket: str, files: list[delta.FileInfo]) -> list[delta.FileInfo]:
    """The files of a pane table's hour ``bucket`` (none when it holds fewer than ``COMPACT_FILES``)."""
    chosen = [f for f in files if f.partition.get("bucket") == bucket]
    return chosen if len(chosen) >= COMPACT_FILES else []


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


@contextmanager
def _no_phases(name: str):
    yield


class PaneRowsReader(DeltaSourceReader):
    """The reader of a combination: static graphs as usual (a HAVING may look at them), and ``pane_rows``,
    the stored rows of one window's panes with their current fingerprints, and those of static solutions,
    read from the pane files ``files`` (those ``PaneComputer`` listed and found the window's panes in)."""

    def __init__(self, spark: SparkSession, catalog: Catalog, files: list[delta.FileInfo], window: WindowBounds,
                 keys: dict[int, str]):
        super().__init__(spark, catalog, {})
        self.files = files
        self.window = window
        self.keys = keys

    def window_triples(self, streams) -> int | None:
        records = [f.records for f in self.files]
        return None if any(r is None for r in records) else sum(records)

    def pane_rows(self, vars_: tuple) -> DataFrame:
        schema = _spark_schema(len(vars_))
        if not self.files:
            return self.spark.createDataFrame([], schema)
        frame = self.spark.read.schema(schema).parquet(*[f.uri for f in self.files])
        wanted = F.col("ts").isNull() | F.col("pane_key").isin(sorted(self.keys.values()))
        return frame.where(~F.col("marker") & wanted)


__all__ = ["PaneComputer", "PaneRowsReader", "PaneTable", "PaneUse", "PanesUnavailable", "pane_ends",
           "pane_table_schema", "PANE_FORMAT"]

"""The catalog of a warehouse: which streams and static graphs exist, what they hold, and how to read them.

``DeltaSourceReader`` is the ``SourceReader`` the compiler uses in production. It reads a table through the
live files of its current Delta version, never by listing folders, and prunes them before Spark sees them:

- a logical window reads only the hour buckets it overlaps and, within them, only the files whose timestamp
  statistics can hold a triple of the window (``csparql.storage.pruning.select_window_files``);
- a physical window ``[TRIPLES n]`` takes files from the newest down until they surely hold the n latest
  triples at or before the window end, so a long stream's old files are never opened
  (``select_latest_files``).

What each evaluation read is kept in ``scans`` (files and rows per stream) for the runs table. Bounds and the
files chosen are kept per window of a stream (``csparql.core.schedule.StreamWindowKey``): an RSP-QL query may read
one stream through several windows. Their scans are summed into the stream's (a file both windows read counts
twice, as one the previous evaluation of an ISTREAM query also read does).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, TimestampType
from rdflib import URIRef

from csparql.core.algebra import operators as alg
from csparql.engine.closures import DeltaClosureStore
from csparql.core.optimizer import SourceStatistics
from csparql.core.schedule import StreamWindowKey
from csparql.spark.sources import empty_triples
from csparql.spark.schema import STATIC_FILE_SCHEMA, STREAM_FILE_SCHEMA
from csparql.storage import delta
from csparql.storage.delta import FileInfo
from csparql.storage.pruning import select_latest_files, select_window_files
from csparql.storage.statistics import read_statistics, record_statistics
from csparql.storage.tables import IRI_PROPERTY
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import LogicalWindow, WindowBounds

@dataclass
class Scan:
    """What one evaluation read from one stream."""

    files: int = 0
    rows: int = 0
    file_uris: list[str] = field(default_factory=list)
    version: int | None = None  # the stream table's Delta version read (None: no table)


class Catalog:
    """Streams, static graphs and their statistics in one warehouse."""

    def __init__(self, warehouse: Warehouse):
        self.warehouse = warehouse

    def stream_exists(self, iri) -> bool:
        return delta.exists(self.warehouse.stream(str(iri)))

    def named_graphs(self) -> list[URIRef]:
        """Every named static graph, by the IRI its table records."""
        graphs = []
        for folder in self.warehouse.static_folders():
            if folder.name == "default":
                continue
            iri = delta.properties(folder).get(IRI_PROPERTY)
            if iri:
                graphs.append(URIRef(iri))
        return sorted(graphs)

    def streams(self) -> list[tuple[URIRef, str]]:
        """Every stream table: (IRI, folder)."""
        found = []
        for folder in self.warehouse.stream_folders():
            iri = delta.properties(folder).get(IRI_PROPERTY)
            if iri:
                found.append((URIRef(iri), str(folder)))
        return sorted(found)

    def check_tables(self, plan: alg.QueryPlan) -> None:
        """Refuse a plan whose stream or static graph tables use a Delta feature csparql does not read (deletion
        vectors, column mapping: ``delta.TableFeatureError``, one line naming the table and the feature), from
        their logs alone, before the evaluation starts Spark or writes anything."""
        paths = [self.warehouse.stream(str(source.iri)) for source in plan.dataset.streams]
        for source in (*plan.dataset.default, *plan.dataset.named):
            if not isinstance(source, alg.StaticGraph):
                continue
            if source.iri == alg.ALL_NAMED_IRI:
                paths += self.warehouse.static_folders()
            else:
                paths.append(self.warehouse.static(None if source.iri is None else str(source.iri)))
        for path in paths:
            if not delta.exists(path):
                continue
            try:
                delta.SNAPSHOTS.latest(path)  # opening a table checks its protocol
            except delta.TableFeatureError:
                raise
            except Exception:  # noqa: BLE001 - a table that cannot be read fails the evaluation, which records it
                continue

    def statistics(self, plan: alg.QueryPlan | None = None) -> SourceStatistics:
        """Triples per predicate of the plan's sources (of every recorded source without a plan), for the
        optimizer: those that account for their tables' rows (``csparql.storage.statistics.read_statistics``)."""
        if plan is None:
            return read_statistics(self.warehouse)
        return read_statistics(self.warehouse, {
            source.iri for source in (*plan.dataset.streams, *plan.dataset.default, *plan.dataset.named)})

    def record_statistics(self, source: str | None, kind: str, counts: dict[str, int], replaces: bool) -> None:
        """Append the triples per predicate one load or ingest added (one commit)."""
        record_statistics(self.warehouse, source, kind, counts, replaces)

    def static_triples(self, iri) -> int | None:
        """How many triples a static graph holds, from its Delta log (None when unknown)."""
        path = self.warehouse.static(None if iri is None else str(iri))
        if not delta.exists(path):
            return 0
        _, files = delta.SNAPSHOTS.snapshot(path)
        if any(f.records is None for f in files):
            return None
        return sum(f.records for f in files)


class DeltaSourceReader:
    """Reads the sources of one evaluation from Delta tables (see the module docstring)."""

    def __init__(self, spark: SparkSession, catalog: Catalog, bounds: dict[StreamWindowKey, WindowBounds]):
        self.spark = spark
        self.catalog = catalog
        self.bounds = bounds
        self.scans: dict[URIRef, Scan] = {}
        self._frames: dict = {}
        self._static_tables: dict = {}
        self._chosen: dict[StreamWindowKey, list[FileInfo]] = {}
        self._versions: dict[URIRef, int] = {}  # each stream table's version its files were chosen from

    @functools.cached_property
    def closures(self) -> DeltaClosureStore:
        """The warehouse's closure store, made when an evaluation's entailment or paths first ask for it."""
        return DeltaClosureStore(self.spark, self.catalog.warehouse)

    def static_version(self, source: alg.StaticGraph) -> str:
        """The Delta version of a static graph's table as this evaluation reads it ("absent" when there is none):
        closures of static graphs are kept per version (``csparql.spark.closures``)."""
        version, _ = self._static_table(source)
        return "absent" if version is None else str(version)

    def static_identity(self, source: alg.StaticGraph) -> tuple[str, int] | None:
        """What identifies the triples of a static graph as this evaluation reads them: its table's Delta id
        (new when a table is created again at the same place) and version (None when there is no table)."""
        version, _ = self._static_table(source)
        if version is None:
            return None
        path = self.catalog.warehouse.static(None if source.iri is None else str(source.iri))
        return delta.SNAPSHOTS.latest(path).metadata().id, version

    def _static_table(self, source: alg.StaticGraph) -> tuple[int | None, list[str]]:
        """The version of a static graph's table and its live files, read once per evaluation so that every
        use of the graph (its triples, its version) sees the same version."""
        if source.iri not in self._static_tables:
            path = self.catalog.warehouse.static(None if source.iri is None else str(source.iri))
            if not delta.exists(path):
                self._static_tables[source.iri] = (None, [])
            else:
                version, files = delta.SNAPSHOTS.snapshot(path)
                self._static_tables[source.iri] = (version, [f.uri for f in files])
        return self._static_tables[source.iri]

    def named_graphs(self) -> list[URIRef]:
        return self.catalog.named_graphs()

    def estimated_triples(self, source: alg.Source) -> int | None:
        if isinstance(source, alg.StaticGraph):
            return self.catalog.static_triples(source.iri)
        return None

    def read(self, source: alg.Source) -> DataFrame:
        key = source if isinstance(source, alg.StaticGraph) else _key(source)  # one frame per window, whatever its graph
        if key not in self._frames:
            self._frames[key] = self._static(source) if isinstance(source, alg.StaticGraph) else self._stream(source)
        return self._frames[key]

    def _static(self, source: alg.StaticGraph) -> DataFrame:
        _, uris = self._static_table(source)
        if not uris:
            return empty_triples(self.spark)
        frame = self.spark.read.schema(STATIC_FILE_SCHEMA).parquet(*uris)
        return frame.select("s", "p", "o", F.lit(None).cast(TimestampType()).alias("ts"), F.lit(None).cast(LongType()).alias("arrival"))

    def prepare(self, plan: alg.QueryPlan) -> None:
        """Read the Delta logs this evaluation needs (each stream's window files, each static graph's version)
        now rather than while the plan is built."""
        for source in plan.dataset.streams:
            if _key(source) in self.bounds:
                self.window_files(source)
        for source in (*plan.dataset.default, *plan.dataset.named):
            if isinstance(source, alg.StaticGraph) and source.iri != alg.ALL_NAMED_IRI:
                self._static_table(source)

    def window_files(self, source: alg.StreamWindow) -> list[FileInfo]:
        """The files of the stream's table that can hold a triple of its window (chosen once per evaluation)."""
        key = _key(source)
        if key not in self._chosen:
            path = self.catalog.warehouse.stream(str(source.iri))
            chosen: list[FileInfo] = []
            if delta.exists(path):
                version, files = delta.SNAPSHOTS.snapshot(path)
                self._versions[source.iri] = version
                bounds = self.bounds[key]
                if isinstance(source.window, LogicalWindow):
                    chosen = select_window_files(files, bounds)
                else:
                    chosen = select_latest_files(files, bounds.end, source.window.count)
            self._chosen[key] = chosen
        return self._chosen[key]

    def window_triples(self, streams: list[alg.StreamWindow]) -> int | None:
        """How many triples the files these windows read hold (None when a file does not say)."""
        records = [f.records for source in streams for f in self.window_files(source)]
        return None if any(r is None for r in records) else sum(records)

    def _stream(self, source: alg.StreamWindow) -> DataFrame:
        bounds = self.bounds[_key(source)]
        scan = self.scans.setdefault(source.iri, Scan())
        chosen = self.window_files(source)
        scan.version = self._versions.get(source.iri)
        scan.files += len(chosen)
        scan.rows += sum(f.records or 0 for f in chosen)
        scan.file_uris.extend(f.uri for f in chosen)
        if not chosen:
            return empty_triples(self.spark)
        frame = self.spark.read.schema(STREAM_FILE_SCHEMA).parquet(*[f.uri for f in chosen])
        end = F.timestamp_micros(F.lit(bounds.end))
        if isinstance(source.window, LogicalWindow):
            start = F.timestamp_micros(F.lit(bounds.start))
            return frame.where((F.col("ts") > start) & (F.col("ts") <= end))
        return frame.where(F.col("ts") <= end).orderBy(F.col("ts").desc(), F.col("arrival").desc()).limit(source.window.count)


def _key(source: alg.StreamWindow) -> StreamWindowKey:
    return source.iri, source.window


__all__ = ["Catalog", "DeltaSourceReader", "Scan", "select_latest_files", "select_window_files"]

"""Triples per predicate of each source, as the optimizer's ``SourceStatistics`` (read without Spark).

Loads and ingests append counts to ``_csparql/statistics``; a generation that ``replaces`` (a static graph
loaded with --replace) hides the earlier generations of its source.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Collection

import pyarrow as pa
import pyarrow.parquet as pq
from rdflib import URIRef

from csparql.core.optimizer import SourceStatistics
from csparql.storage import delta, schema
from csparql.storage.warehouse import Warehouse


def read_table(path, arrow_schema: pa.Schema | None = None) -> pa.Table:
    """A whole (small) Delta table as Arrow, read from the live files of its current version."""
    table = delta.open_table(path)
    uris = [f.uri for f in delta.live_files(table, path)]
    if not uris:
        return pa.Table.from_pylist([], schema=arrow_schema) if arrow_schema is not None else pa.table({})
    return pa.concat_tables([pq.read_table(uri) for uri in uris], promote_options="default")


class _StatisticsCache:
    """Each statistics table's ``SourceStatistics``, aggregated once per version of its rows (read through
    ``delta.SNAPSHOTS.rows``, which reads only the files a new version added and returns the same rows while
    the version stays)."""

    def __init__(self) -> None:
        self._latest: dict[str, tuple[pa.Table, SourceStatistics]] = {}
        self._lock = threading.Lock()

    def read(self, path) -> SourceStatistics:
        key = str(path)
        with self._lock:
            rows = delta.SNAPSHOTS.rows(path, schema.STATISTICS)
            cached = self._latest.get(key)
            if cached is not None and cached[0] is rows:
                return cached[1]
            statistics = _aggregate(rows.to_pylist())
            self._latest[key] = (rows, statistics)
            return statistics


_CACHE = _StatisticsCache()


def read_statistics(warehouse: Warehouse, sources: Collection[URIRef | None] | None = None) -> SourceStatistics:
    """The statistics recorded in a warehouse for ``sources`` (every recorded source when None); each version
    of the table is read once per process, and only the files it added.

    A source's counts are given only while they account for every row its tables hold: a table another
    writer also writes to (a delta-spark job appending to a stream) holds triples the counts do not know of,
    and the source is then left unknown, so that the optimizer prunes no pattern for it. Counts may exceed
    the rows (an output stream's revised window replaces its rows, and its counts are added again)."""
    path = warehouse.statistics
    if not delta.exists(path):
        return SourceStatistics({})
    recorded = _CACHE.read(path).predicate_counts
    return SourceStatistics({source: counts for source, counts in recorded.items()
                             if (sources is None or source in sources)
                             and sum(counts.values()) >= _table_rows(warehouse, source)})


UNKNOWN_ROWS = 2**63
"""The rows of a table whose log does not say how many it holds: more than any counts."""


def _table_rows(warehouse: Warehouse, source: URIRef | None) -> int:
    """How many rows a source's tables (its stream's, its static graph's) hold, from their Delta logs
    (``UNKNOWN_ROWS`` when a file does not say)."""
    paths = [warehouse.static(None if source is None else str(source))]
    if source is not None:
        paths.append(warehouse.stream(str(source)))
    total = 0
    for path in paths:
        if not delta.exists(path):
            continue
        _, files = delta.SNAPSHOTS.snapshot(path)
        if any(f.records is None for f in files):
            return UNKNOWN_ROWS
        total += sum(f.records for f in files)
    return total


def _aggregate(rows: list[dict]) -> SourceStatistics:
    latest_replace: dict[str, int] = {}
    for row in rows:
        if row["replaces"]:
            latest_replace[row["source"]] = max(latest_replace.get(row["source"], -1), row["generation"])
    counts: dict = defaultdict(lambda: defaultdict(int))
    for row in rows:
        if row["generation"] >= latest_replace.get(row["source"], -1) and row["predicate"]:
            key = URIRef(row["source"]) if row["source"] else None
            counts[key][URIRef(row["predicate"])] += row["triples"]
        elif row["generation"] >= latest_replace.get(row["source"], -1):
            counts[URIRef(row["source"]) if row["source"] else None]  # known to be empty
    return SourceStatistics({k: dict(v) for k, v in counts.items()})


def record_statistics(warehouse: Warehouse, source: str | None, kind: str, counts: dict[str, int], replaces: bool) -> None:
    """Append the triples per predicate one load or ingest added (one commit)."""
    generation = time.time_ns() // 1000
    rows = [
        {"source": source or "", "kind": kind, "generation": generation, "replaces": replaces, "predicate": p, "triples": n}
        for p, n in counts.items()
    ]
    if not rows and not replaces:
        return
    if not rows:  # a graph replaced by nothing: record that it now holds nothing
        rows = [{"source": source or "", "kind": kind, "generation": generation, "replaces": True, "predicate": "", "triples": 0}]
    delta.append(warehouse.statistics, pa.Table.from_pylist(rows, schema=schema.STATISTICS), schema.STATISTICS)
    delta.compact_record_table(warehouse.statistics)

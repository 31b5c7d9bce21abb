"""What the warehouse records about the evaluations of a window: their revisions.

Each evaluation of a window is numbered, its ``revision`` (0 the first), in the runs table and in the rows of the
result tables; the runs table also keeps the result table's Delta version each evaluation committed
(``result_version``), where Delta time travel reads an earlier revision. Why a window is evaluated again (late
triples of its streams: stale windows) is ``csparql.storage.stale_windows``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from csparql.storage import delta, schema
from csparql.storage.instants import micros_of as _micros
from csparql.storage.location import file_exists, location
from csparql.storage.tables import RUN_METADATA
from csparql.storage.warehouse import Warehouse

RESULT_HISTORY_LOOKBACK = 20
"""How many of a result table's latest commits are read for the runs they carry (revisions not recorded in the
runs table yet, runs lost by a killed process)."""


def table_version(path: str | Path) -> int:
    """The table's latest version, -1 when there is no table yet."""
    return delta.SNAPSHOTS.latest(path).version() if delta.exists(path) else -1


def committed_after(path, version: int) -> int:
    """The latest version of the table at ``path`` found by looking for the log entries after ``version``
    (-1: the table does not exist yet), one ``stat`` each: ``version`` itself when nothing was committed
    since. Delta numbers its commits without gaps, so the first entry missing ends the look."""
    while file_exists(delta.file_uri(str(location(path)), f"_delta_log/{version + 1:020d}.json")):
        version += 1
    return version


def _runs(warehouse: Warehouse, columns: list[str], queries: set[str] | None = None,
          window_end: int | None = None) -> list[dict]:
    """The successful runs (of ``queries``, of the window ending at ``window_end`` when given), their
    ``columns`` (None for a column the table does not have yet)."""
    if not delta.exists(warehouse.runs):
        return []
    if queries is not None and not queries:
        return []
    runs = delta.SNAPSHOTS.rows(warehouse.runs, schema.RUNS)
    condition = pc.field("status") == "succeeded"
    if queries is not None:
        condition = condition & pc.field("query").isin(pa.array(sorted(queries), pa.string()))
    if window_end is not None:
        condition = condition & (pc.field("window_end") == pa.scalar(window_end, pa.int64()).cast(schema.TIMESTAMP))
    present = [c for c in columns if c in runs.column_names]
    rows = runs.filter(condition).select(present).to_pylist()
    return [{c: row.get(c) for c in columns} for row in rows]


def latest_evaluated_end(warehouse: Warehouse) -> int | None:
    """The latest window end any evaluation reached (µs), None when nothing was evaluated: a triple timestamped
    later cannot be late for any window."""
    if not delta.exists(warehouse.runs):
        return None
    ends = delta.SNAPSHOTS.rows(warehouse.runs, schema.RUNS).column("window_end")
    latest = pc.max(ends).as_py() if len(ends) else None
    return _micros(latest)


@dataclass(frozen=True)
class Evaluated:
    """What the runs table says of one window of a query: its start, when its latest evaluation started (µs)
    and that evaluation's revision."""

    window_start: int | None
    started_at: int
    revision: int


def evaluated_windows(warehouse: Warehouse, queries: set[str] | None,
                      reading: str | None = None) -> dict[str, dict[int, Evaluated]]:
    """Per query (of ``queries``; None: every query the runs table names), each window end evaluated with
    success, and its latest evaluation; with ``reading``, only the evaluations that read that stream (their
    ``triples_read`` names it)."""
    found: dict[str, dict[int, Evaluated]] = {query: {} for query in queries or ()}
    columns = ["query", "window_start", "window_end", "started_at", "revision", "triples_read"]
    for row in _runs(warehouse, columns, queries):
        if reading is not None and reading not in json.loads(row["triples_read"] or "{}"):
            continue
        end, started = _micros(row["window_end"]), _micros(row["started_at"])
        known = found.setdefault(row["query"], {}).get(end)
        if known is None or started > known.started_at:
            found[row["query"]][end] = Evaluated(_micros(row["window_start"]), started, row["revision"] or 0)
    return found


def next_revision(warehouse: Warehouse, query: str, window_end: int, results=None,
                  lookback: int = RESULT_HISTORY_LOOKBACK) -> int:
    """The revision an evaluation of the window writes: 0 when it was never evaluated with success, else one
    more than the latest revision recorded, in the runs table or in the runs that the ``lookback`` latest
    commits of ``results`` (the query's result table as a ``DeltaTable``, the version the evaluation commits
    on) carry — a run whose runs row is not written yet counts too (rows written before revisions were
    recorded count as 0). Committed only on that version (``delta.write_on_version``), the number is unique."""
    revisions = [row["revision"] or 0 for row in _runs(warehouse, ["revision"], {query}, window_end)]
    revisions += [run.get("revision") or 0 for run in committed_runs(results, lookback)
                  if run.get("query") == query and run.get("window_end") == window_end
                  and run.get("status") == "succeeded"]
    if not revisions:
        return 0
    return max(revisions) + 1


def committed_runs(results, lookback: int = RESULT_HISTORY_LOOKBACK) -> list[dict]:
    """The runs (``RUN_METADATA``, with ``version``: the commit's) carried by the ``lookback`` latest commits of
    a result table (a ``DeltaTable``; none for None), newest first."""
    if results is None:
        return []
    runs = []
    for commit in results.history(lookback):
        if RUN_METADATA in commit and int(commit.get("version", -1)) >= 0:
            runs.append({**json.loads(commit[RUN_METADATA]), "version": int(commit["version"])})
    return runs


def with_revision(table: pa.Table, revision: int) -> pa.Table:
    """The result rows with their ``revision`` column (after ``query_version``)."""
    return table.append_column(schema.REVISION, pa.array([revision] * table.num_rows, pa.int64()))


def revision_rows(warehouse: Warehouse, query: str, path: str | Path, revision: int) -> list[dict]:
    """The result rows of each window of ``query`` as its evaluation numbered ``revision`` wrote them, read by
    Delta time travel at the result table version that evaluation committed (windows without that revision
    are left out)."""
    from deltalake import DeltaTable

    versions: dict[int, int] = {}
    for row in _runs(warehouse, ["query", "window_end", "revision", "result_version"], {query}):
        if (row["revision"] or 0) == revision and row["result_version"] is not None:
            versions[_micros(row["window_end"])] = row["result_version"]
    rows = []
    for version in sorted(set(versions.values())):
        with delta.named_failures(path, "reading"):
            table = DeltaTable(str(path), version=version)
        delta.check_protocol(table, path)
        ends = {end for end, v in versions.items() if v == version}
        rows += [row for row in table.to_pyarrow_table().to_pylist() if _micros(row["window_end"]) in ends]
    return rows

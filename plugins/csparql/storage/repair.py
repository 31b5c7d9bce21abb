"""Repairing a warehouse whose tables reference data files that are gone (``csparql repair``).

A Delta table's log may name a file that is not on disk: a vacuum with a short retention that deleted a file a
write had not committed yet, a file removed by hand. Every read of the table then fails. ``repair_warehouse``
looks at every table of the warehouse and, for each that has such files:

- restores what is still on disk: a lost file that a compaction wrote (``csparql.operation`` ``compact``) is
  replaced by the files it merged, when they are all still there (their rows are the same);
- drops the other lost files from the table in one commit (delta-rs's ``repair``, Delta's FSCK), so that the
  table reads again, without their rows;
- for a result table (or the output stream of a ``REGISTER STREAM`` query), marks the windows the dropped files
  held for re-evaluation: a ``pending`` row of ``_csparql/stale_windows`` per window, reason ``LOST_FILES``, that
  the query's revision DAG re-evaluates and any later successful evaluation of the window settles;
- for the runs table, records again the runs that the result tables' commits carry (every result commit holds
  its run) and the runs table lost.

Lost stream triples cannot be rebuilt from the warehouse: their count and time range are reported, for them to be
ingested again (which finds the windows they make stale, as any late triples do).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import CommitProperties, DeltaTable
from deltalake.transaction import AddAction, RemoveAction

from csparql.storage import delta, schema
from csparql.storage import revisions as rv
from csparql.storage import stale_windows as sw
from csparql.storage.failures import first_line
from csparql.storage.instants import instant_of, micros_of
from csparql.storage.location import file_exists, location
from csparql.storage.maintenance import UNREADABLE_LOG, delta_tables
from csparql.storage.tables import KIND_PROPERTY, OPERATION, QUERY_PROPERTY, RUN_METADATA
from csparql.storage.warehouse import Warehouse

LOST_FILES = "result files lost"
"""The reason of a stale window whose results ``csparql repair`` dropped with a lost file."""


@dataclass
class TableRepair:
    """What repairing one table found and did (or, in a dry run, would do)."""

    table: Path
    missing: tuple[str, ...] = ()  # the files its latest version referenced that were not on disk
    restored: tuple[str, ...] = ()  # files a lost compaction merged, put back in its place
    dropped: tuple[str, ...] = ()  # lost files removed from the table
    lost_rows: int | None = 0  # rows the dropped files held, by their statistics (None: not recorded)
    windows: tuple[tuple[str, int], ...] = ()  # (query, window end) marked for re-evaluation
    runs_recorded: int = 0  # runs recorded again from the result tables' commits (the runs table)
    lost_range: tuple[int, int] | None = None  # a stream's lost triples: their first and last timestamps (µs)
    unreadable: str | None = None  # why the table's log cannot be read (nothing done)

    @property
    def healthy(self) -> bool:
        return not self.missing and self.unreadable is None and not self.runs_recorded


def repair_warehouse(warehouse: Warehouse, dry_run: bool = False) -> list[TableRepair]:
    """Repair every Delta table of the warehouse (see the module docstring), the runs table first, so that the
    windows of the result tables are found in it; returns one ``TableRepair`` per table, in that order."""
    tables = delta_tables(warehouse.root) if warehouse.root.is_dir() else []
    runs = warehouse.runs.resolve()
    tables.sort(key=lambda path: path.resolve() != runs)
    done = [_repair_table(warehouse, path.resolve(), dry_run) for path in tables]
    if done and done[0].table == runs and done[0].unreadable is None:
        done[0].runs_recorded = record_runs_from_results(warehouse, dry_run)
    for repair in done:
        if repair.dropped:
            _mark_windows(warehouse, repair, dry_run)
    return done


def _repair_table(warehouse: Warehouse, path: Path, dry_run: bool) -> TableRepair:
    repair = TableRepair(path)
    try:
        table = delta.open_table(path)
        missing = delta.missing_files(table, path)
    except UNREADABLE_LOG as error:
        repair.unreadable = first_line(error)
        return repair
    if not missing:
        return repair
    repair.missing = tuple(missing)
    restorable = _restorable_compactions(path, table, missing)
    repair.restored = tuple(sorted({name for originals in restorable.values() for name in originals}))
    if restorable and not dry_run:
        _restore_compactions(path, table, restorable)
        table = delta.open_table(path)
    dropped = [name for name in missing if name not in restorable]
    repair.dropped = tuple(dropped)
    if dropped:
        actions = delta.add_actions(table)
        lost = set(dropped)
        paths = delta.action_column(actions, "path")
        chosen = [i for i, name in enumerate(paths) if name in lost]
        records = [delta.action_column(actions, "num_records")[i] for i in chosen]
        repair.lost_rows = None if any(r is None for r in records) else sum(records)
        column = "window_end" if path.parent.parent.name == "results" else "ts"
        lows = [micros_of(delta.action_column(actions, f"min.{column}")[i]) for i in chosen]
        highs = [micros_of(delta.action_column(actions, f"max.{column}")[i]) for i in chosen]
        repair.lost_range = None if None in lows + highs or not chosen else (min(lows), max(highs))
        if not dry_run:
            table.repair(commit_properties=CommitProperties(custom_metadata={OPERATION: "repair"}))
    return repair


def _log_entries(path: Path) -> Iterator[list[dict]]:
    """The actions of each of the table's commits still in its log, newest first (paths as the log writes
    them: URL-encoded; decoded once, the file's name on disk)."""
    folder = location(path) / "_delta_log"
    for name in sorted((entry.name for entry in folder.iterdir()), reverse=True):
        if name.endswith(".json") and name[:-5].isdigit():
            text = (folder / name).read_text(encoding="utf-8")
            yield [json.loads(line) for line in text.splitlines() if line.strip()]


def _restorable_compactions(path: Path, table: DeltaTable, missing: list[str]) -> dict[str, list[str]]:
    """The lost files a compaction wrote whose merged files are all still on disk and no longer live: each
    with those files (as the log names them)."""
    lost = {unquote(name): name for name in missing}
    live = {unquote(name) for name in delta.action_column(delta.add_actions(table), "path")}
    found: dict[str, list[str]] = {}
    for actions in _log_entries(path):
        info = next((a["commitInfo"] for a in actions if "commitInfo" in a), {})
        if info.get(OPERATION) != "compact":
            continue
        added = [unquote(a["add"]["path"]) for a in actions if "add" in a]
        merged = [unquote(a["remove"]["path"]) for a in actions if "remove" in a]
        for name in added:
            if name in lost and merged and all(m not in live and (path / m).is_file() for m in merged):
                found[lost[name]] = merged
        if len(found) == len(lost):
            break
    return found


def _restore_compactions(path: Path, table: DeltaTable, restorable: dict[str, list[str]]) -> None:
    """Put the merged files back in place of the lost compacted ones, in one commit that changes no row."""
    actions = delta.add_actions(table)
    paths = delta.action_column(actions, "path")
    sizes = delta.action_column(actions, "size_bytes")
    partition_columns = [c for c in actions.column_names if c.startswith("partition.")]
    column = _timestamp_column(table)
    now = int(time.time() * 1000)
    commit: list[AddAction | RemoveAction] = []
    for lost, merged in restorable.items():
        i = paths.index(lost)
        partition = {c[len("partition."):]: actions.column(c)[i].as_py() for c in partition_columns}
        commit.append(RemoveAction(unquote(lost), False, now, sizes[i], partition))
        for name in merged:
            file = path / name
            commit.append(AddAction(name, file.stat().st_size, partition, now, False,
                                    delta.file_statistics(str(file), column)))
    table.create_write_transaction(
        commit, mode="append", schema=table.schema(), partition_by=table.metadata().partition_columns or None,
        commit_properties=CommitProperties(custom_metadata={OPERATION: "repair"}))


def _timestamp_column(table: DeltaTable) -> str | None:
    """The column whose bounds the table's file statistics record for pruning (``ts``, ``window_end``)."""
    names = pa.schema(table.schema().to_arrow()).names
    return next((column for column in ("ts", "window_end") if column in names), None)


def _query_of(warehouse: Warehouse, repair: TableRepair) -> str | None:
    """The query whose results the table holds: a result table's, or the producer of an output stream."""
    path = repair.table
    if path.parent.parent == (warehouse.root / "results").resolve():
        return path.parent.name
    try:
        properties = delta.properties(path)
    except UNREADABLE_LOG:
        return None
    return properties.get(QUERY_PROPERTY) if properties.get(KIND_PROPERTY) == "stream" else None


def _mark_windows(warehouse: Warehouse, repair: TableRepair, dry_run: bool) -> None:
    """Mark for re-evaluation the windows of the table's query that the dropped files can have held (by their
    statistics; every window evaluated, when they recorded none)."""
    query = _query_of(warehouse, repair)
    if query is None:
        return
    windows: dict[int, int | None] = {}  # window end → start
    for end, run in rv.evaluated_windows(warehouse, {query}).get(query, {}).items():
        windows[end] = run.window_start
    try:
        history = DeltaTable(str(repair.table)).history()
    except UNREADABLE_LOG:
        history = []
    for commit in history:
        if RUN_METADATA in commit:
            run = json.loads(commit[RUN_METADATA])
            if run.get("query") == query and run.get("window_end") is not None:
                windows.setdefault(run["window_end"], run.get("window_start"))
    if repair.lost_range is not None:
        low, high = repair.lost_range
        # statistics hold milliseconds: a bound truncated down may be under the window's end by less than 1 ms
        windows = {end: start for end, start in windows.items() if low <= end < high + 1000}
    repair.windows = tuple((query, end) for end in sorted(windows))
    if dry_run or not windows:
        return
    now = time.time_ns() // 1000
    version = rv.table_version(repair.table)
    relative = repair.table.relative_to(warehouse.root).as_posix()
    sw.append_stale_windows(warehouse, [
        sw.StaleWindow(query=query, window_start=start, window_end=end, stream=relative, stream_version=version,
                       committed_at=now, reason=LOST_FILES, late_triples=0, lateness_p50_ms=None,
                       lateness_max_ms=None, detected_at=now, within_horizon=True, status=sw.PENDING)
        for end, start in sorted(windows.items())])


def record_runs_from_results(warehouse: Warehouse, dry_run: bool = False) -> int:
    """Record in the runs table the runs that the commits of the result tables (and output streams) still in
    their logs carry and the runs table lacks; returns how many (would be) recorded."""
    carried: dict[str, dict] = {}
    outputs = [path for path in warehouse.stream_folders() if _produced(path)]
    for path in warehouse.result_folders() + outputs:
        try:
            history = DeltaTable(str(path)).history()
        except UNREADABLE_LOG:
            continue
        for commit in history:
            if RUN_METADATA in commit and int(commit.get("version", -1)) >= 0:
                run = json.loads(commit[RUN_METADATA])
                if run.get("run_id") and run["run_id"] not in carried:
                    carried[run["run_id"]] = {**run, "result_version": int(commit["version"])}
    if not carried:
        return 0
    recorded: list[int] = [0]

    def build(table) -> delta.Write | None:
        root = warehouse.runs.resolve()
        on_disk = [relative for relative in delta.action_column(delta.add_actions(table), "path")
                   if file_exists(delta.file_uri(root, relative))]  # not the process's cache of lost ones
        rows = delta.read_files(root, on_disk)
        ids = pa.array([], pa.string()) if rows is None else rows.column("run_id")
        present = set(ids.filter(pc.is_in(ids, pa.array(sorted(carried), pa.string()))).to_pylist())
        missing = [carried[run_id] for run_id in sorted(set(carried) - present)]
        recorded[0] = len(missing)
        if not missing or dry_run:
            return None
        return delta.Write(pa.Table.from_pylist([_run_row(run) for run in missing], schema=schema.RUNS),
                           merge_schema=True, metadata={OPERATION: "repair"})

    delta.write_on_version(warehouse.runs, schema.RUNS, build, "recording runs again")
    return recorded[0]


def _produced(stream: Path) -> bool:
    """Whether the stream table is the output of a ``REGISTER STREAM`` query (its commits carry runs)."""
    try:
        return QUERY_PROPERTY in delta.properties(stream)
    except UNREADABLE_LOG:
        return False


def _run_row(run: dict) -> dict:
    """The runs table's row of a run as a result commit carries it (``csparql.engine.runner.RunRecord``)."""
    row = {name: run.get(name) for name in schema.RUNS.names}
    for name in ("window_start", "window_end", "started_at"):
        row[name] = instant_of(run.get(name))
    for name in ("triples_read", "files_read"):
        row[name] = json.dumps(run.get(name) or {})
    return row

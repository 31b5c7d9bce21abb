"""Delta tables through delta-rs: open with a protocol check, list live files with their statistics, and
commit atomically with retries.

The tables stay standard Delta, readable by delta-spark on a cluster that has the connector: they never use
deletion vectors or column mapping, and tables that do are refused on read with a clear error.

Every write is one commit. Writers retry on commit conflicts (another writer committed first) with
exponential backoff, each attempt against the latest version of the table. A write whose content depends on
what the table holds (a number no other commit may take, a row that must not be written twice) commits only
on the version it read (``write_on_version``): delta-rs would otherwise move it past concurrent commits it
does not conflict with. Such writes go through the table the process's previous write to it left, brought up
to date (``WRITERS``), and reads through tables kept open the same way (``SNAPSHOTS``): opening a table reads
its log from the last checkpoint, bringing it up to date only the entries committed since.
"""

from __future__ import annotations

import json
import logging
import os
import random
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.parquet as pq  # noqa: F401 - read_parquet reads local files through it
from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake
from deltalake.exceptions import CommitFailedError, DeltaError, TableNotFoundError
from deltalake.transaction import AddAction, RemoveAction

from csparql.storage.failures import NO_SPACE_LEFT, StorageError, causes, corrupt_log_entry, no_space_left
from csparql.storage.instants import instant_of, micros_of
from csparql.storage.location import (
    ObjectPath, file_exists, location, parquet_metadata, read_parquet, uri, write_parquet)
from csparql.storage.tables import OPERATION
from csparql.storage.pruning import (  # noqa: F401
    STATISTICS_TRUNCATION_MICROS, FileInfo, may_hold_instant, may_hold_string)

log = logging.getLogger(__name__)

STANDARD_CONFIGURATION = {"delta.enableDeletionVectors": "false", "delta.columnMapping.mode": "none"}
REFUSED_READER_FEATURES = {"deletionVectors", "columnMapping", "v2Checkpoint", "variantType", "typeWidening"}
MAX_ATTEMPTS = 8
RECORD_TABLE_COMPACT_FILES = 64
"""How many small files a record table (runs, watermarks, statistics, stale windows: a file per commit) holds
before ``compact_record_table`` merges them."""
RECORD_TABLE_FILE_BYTES = 8 * 1024 * 1024
"""The size a compacted record-table file grows to; larger files are not rewritten again."""


class TransactionMoved(StorageError):
    """A commit for an application transaction found the application at another version than it expected."""


class TableFeatureError(Exception):
    """A Delta table uses a feature csparql does not read (deletion vectors, column mapping)."""


WAREHOUSE_FOLDERS = ("results", "streams", "static", "_csparql")
"""The folders of a warehouse's root that tables lie under (``csparql.storage.warehouse``)."""


def repair_command(path) -> str:
    """The command that repairs the table at ``path``: ``csparql repair`` with the warehouse it lies in."""
    parents = location(path).parents
    root = next((parent for parent in parents if (parent / "_csparql").is_dir()), None)
    if root is None:
        root = next((parent.parent for parent in parents if parent.name in WAREHOUSE_FOLDERS), None)
    return "csparql repair" if root is None else f"csparql repair --warehouse {root}"


class MissingFiles(StorageError):
    """The latest version of a table references data files that are not on disk (deleted under it: a vacuum
    with a short retention racing a write, a file removed by hand). The message names the table, the files and
    the command that repairs it."""

    def __init__(self, table, files: Iterable[str]):
        self.table = location(table)
        self.files = tuple(sorted(files))
        shown = ", ".join(self.files[:3]) + (f" and {len(self.files) - 3} more" if len(self.files) > 3 else "")
        super().__init__(
            f"the Delta table at {self.table} references {len(self.files)} data file(s) that are missing "
            f"({shown}): run `{repair_command(self.table)}` to repair it")


def missing_files(table: DeltaTable, root) -> list[str]:
    """The data files of the table's current version that are not on disk, as its log names them."""
    root = location(root)
    return [relative for relative in action_column(add_actions(table), "path")
            if not file_exists(file_uri(root, relative))]


_MISSING_FILE_TEXT = re.compile(
    r"(?:reading file|File) (?:file:)?/*(/\S+?)\.? (?:File )?does not exist"  # Spark's read of a file
    r"|Path does not exist: (?:file:)?/*(/\S+?)\.?(?:\s|$)"  # Spark's listing of the files it is given
    r"|Object at location (/\S+) not found")  # delta-rs's


def missing_in(error: BaseException) -> MissingFiles | None:
    """The lost data files of the Delta table a failure met one of (Spark's "File … does not exist",
    delta-rs's "Object at location … not found", through the error's causes), None when it met none."""
    for cause in causes(error):
        for match in _MISSING_FILE_TEXT.finditer(str(cause)):
            file = Path(unquote(next(group for group in match.groups() if group)))
            if file.exists():
                continue
            table = next((parent for parent in file.parents if exists(parent)), None)
            if table is None:
                continue
            try:
                lost = missing_files(DeltaTable(str(table)), table)
            except Exception:  # noqa: BLE001 - the file itself says enough
                lost = []
            return MissingFiles(table, lost or [os.path.relpath(file, table)])
    return None


def _missing_file_error(error: BaseException) -> bool:
    """Whether the error is a read of a file that is not there (Python's, or delta-rs's object store's)."""
    if isinstance(error, FileNotFoundError):
        return True
    text = str(error)
    return "Object at location" in text and "not found" in text


@contextmanager
def named_failures(path, doing: str) -> Iterator[None]:
    """Turn what goes wrong inside, when it is the machine's or the stored data's fault, into a ``StorageError``
    of one line naming the table: a full disk ("``doing`` the Delta table at PATH failed: no space left on
    device") or a corrupt log entry ("the Delta table at PATH has a corrupt Delta log entry at version N").
    Other errors, and Rust panics of other causes, pass unchanged."""
    try:
        yield
    except (StorageError, TableFeatureError, TableNotFoundError):
        raise
    except BaseException as error:
        if not isinstance(error, Exception) and type(error).__name__ != "PanicException":  # Ctrl-C, exit
            raise
        if _missing_file_error(error) and exists(path):
            try:
                lost = missing_files(DeltaTable(uri(path)), path)
            except Exception:  # noqa: BLE001 - the original error says more than a failed check
                lost = []
            if lost:
                raise MissingFiles(path, lost) from error
        if no_space_left(error):
            raise StorageError(f"{doing} the Delta table at {path} failed: {NO_SPACE_LEFT}") from error
        corrupt = corrupt_log_entry(path)
        if corrupt is not None:
            version, what = corrupt
            raise StorageError(
                f"the Delta table at {path} has a corrupt Delta log entry at version {version} "
                f"(_delta_log/{version:020d}.json: {what})"
            ) from error
        raise


def exists(path: str | os.PathLike) -> bool:
    """Whether a Delta table is at this path."""
    return (location(path) / "_delta_log").is_dir()


def open_table(path: str | os.PathLike) -> DeltaTable:
    """The latest version of the table, refused if it uses features csparql does not read."""
    try:
        with named_failures(path, "reading"):
            table = DeltaTable(uri(path))
    except TableNotFoundError:
        raise StorageError(f"no Delta table at {path}") from None
    check_protocol(table, path)
    return table


def check_protocol(table: DeltaTable, path) -> None:
    """Refuse tables with deletion vectors, column mapping or other reader features, naming the feature."""
    protocol = table.protocol()
    features = set(protocol.reader_features or [])
    configuration = table.metadata().configuration or {}
    refused = {feature: feature for feature in sorted(features & REFUSED_READER_FEATURES)}
    if configuration.get("delta.enableDeletionVectors", "false").lower() == "true":
        refused["deletionVectors"] = "deletionVectors (delta.enableDeletionVectors = true)"
    mapping = configuration.get("delta.columnMapping.mode", "none")
    if mapping not in ("none", None):
        refused["columnMapping"] = f"columnMapping (delta.columnMapping.mode = {mapping})"
    if refused:
        raise TableFeatureError(
            f"the Delta table at {path} uses {', '.join(refused.values())}; csparql reads standard "
            "Delta tables without deletion vectors or column mapping. Rewrite the table without them "
            "(for example with delta-spark: REORG TABLE … APPLY (PURGE), then disable the features).")


def create(
    path: str | os.PathLike,
    schema: pa.Schema,
    partition_by: list[str] | None = None,
    properties: Mapping[str, str] | None = None,
    name: str | None = None,
    description: str | None = None,
) -> DeltaTable:
    """Create an empty table (or return the existing one, if another writer created it meanwhile)."""
    with named_failures(path, "creating"):
        location(path).mkdir(parents=True, exist_ok=True)
    configuration = {**STANDARD_CONFIGURATION, **(properties or {})}
    try:
        with named_failures(path, "creating"):
            return DeltaTable.create(
                uri(path), schema, mode="ignore", partition_by=partition_by, name=name, description=description,
                configuration=configuration, raise_if_key_not_exists=False,
            )
    except DeltaError as error:
        if exists(path):
            return open_table(path)
        raise StorageError(f"could not create a Delta table at {path}: {error}") from error


def ensure(path, schema: pa.Schema, partition_by=None, properties=None, name=None, description=None) -> DeltaTable:
    """The table at ``path``, created with this schema if it does not exist yet."""
    if exists(path):
        return open_table(path)
    return create(path, schema, partition_by, properties, name, description)


def properties(path) -> dict[str, str]:
    """The table's configuration (csparql records the IRI of a stream or graph there)."""
    return dict(SNAPSHOTS.latest(path).metadata().configuration or {})


def add_actions(table: DeltaTable | str | os.PathLike) -> pa.Table:
    """The add actions of a table's current version (a table, or the path of one): one row per live file,
    its statistics flattened (``num_records``, ``min.<column>``, ``max.<column>``, ``partition.<column>``)."""
    if not isinstance(table, DeltaTable):
        table = open_table(table)
    return pa.table(table.get_add_actions(flatten=True))


def action_column(actions: pa.Table, name: str) -> list:
    """One column of ``add_actions`` as a list; all None when no file records it (no statistics)."""
    return actions.column(name).to_pylist() if name in actions.column_names else [None] * actions.num_rows


def file_uri(root: Path | ObjectPath | str, relative: str) -> str:
    """The absolute path (or S3 URI) of a data file the log names relative to the table's folder ``root``
    (resolved: callers resolve it once per listing, not once per file)."""
    if relative.startswith("/") or "://" in relative:
        return relative
    if isinstance(root, ObjectPath) or (isinstance(root, str) and "://" in root):
        return f"{str(root).rstrip('/')}/{unquote(relative)}"
    return os.path.join(root, unquote(relative))


def read_files(root, relatives: Iterable[str]) -> pa.Table | None:
    """The rows of some data files of the table at ``root`` (None when there are none), their schemas unified
    (files written before a column was added lack it)."""
    root = location(root)
    relatives = list(relatives)
    try:
        tables = [read_parquet(file_uri(root, relative)) for relative in relatives]
    except FileNotFoundError:
        lost = [relative for relative in relatives if not file_exists(file_uri(root, relative))]
        if not lost:
            raise
        raise MissingFiles(root, [unquote(relative) for relative in lost]) from None
    if not tables:
        return None
    return pa.concat_tables(tables, promote_options="permissive")


def live_files(table: DeltaTable, root, timestamp_column: str = "ts") -> list[FileInfo]:
    """The data files of the table's current version (never a directory listing: removed files linger until
    vacuum), each with its record count, the bounds of its ``timestamp_column`` and partition values."""
    actions = add_actions(table)
    paths = action_column(actions, "path")
    sizes = action_column(actions, "size_bytes")
    records = action_column(actions, "num_records")
    mins = action_column(actions, f"min.{timestamp_column}")
    maxs = action_column(actions, f"max.{timestamp_column}")
    written = action_column(actions, "modification_time")
    partition_columns = [c for c in actions.column_names if c.startswith("partition.")]
    partitions = [
        {c[len("partition."):]: actions.column(c)[i].as_py() for c in partition_columns} for i in range(len(paths))
    ]
    root = location(root)
    return [
        FileInfo(file_uri(root, relative), sizes[i], records[i], micros_of(mins[i]), micros_of(maxs[i]), partitions[i],
                 _written_micros(written[i]))
        for i, relative in enumerate(paths)
    ]


def _written_micros(value) -> int | None:
    """An add action's modification time (milliseconds since the epoch, or a timestamp) in µs."""
    if value is None:
        return None
    return value * 1000 if isinstance(value, int) else micros_of(value)


class TableSnapshots:
    """The latest version of each table this process reads, kept open and brought up to date.

    Opening a table reads its log from the last checkpoint; ``latest`` opens each table once and afterwards
    only reads the log entries added since (``DeltaTable.update_incremental``), and ``live_files`` reads a
    version's files once. Every call sees the latest committed version, as ``open_table`` does. Safe to use
    from several threads."""

    def __init__(self) -> None:
        self._tables: dict[str, DeltaTable] = {}
        self._origins: dict[str, tuple[int, int] | None] = {}
        self._files: dict[str, dict[str, tuple[int, list[FileInfo]]]] = {}  # table → timestamp column → files
        self._file_rows: dict[str, dict[str, pa.Table]] = {}  # table → live data file (its log path) → its rows
        self._rows: dict[str, tuple[int, pa.Table]] = {}  # table → (version, its rows)
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def _lock(self, key: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(key, threading.Lock())

    def latest(self, path) -> DeltaTable:
        """The table at its latest version (``StorageError`` when there is none, as ``open_table``)."""
        key = str(location(path))
        with self._lock(key):
            return self._latest(key)

    def _latest(self, key: str) -> DeltaTable:
        table = self._tables.get(key)
        origin = _log_origin(key)
        if table is None or origin != self._origins.get(key):  # new, or removed and created again since
            return self._open(key, origin)
        updated = _brought_up_to_date(table, key)
        return updated if updated is not None else self._open(key, origin)

    def _open(self, key: str, origin: tuple[int, int] | None) -> DeltaTable:
        table = open_table(key)
        self._tables[key], self._origins[key] = table, origin
        self._files.pop(key, None)
        self._file_rows.pop(key, None)
        self._rows.pop(key, None)
        return table

    def snapshot(self, path, timestamp_column: str = "ts") -> tuple[int, list[FileInfo]]:
        """The latest version of the table and its live files, with the bounds of their ``timestamp_column``
        (``ts`` for streams and panes, ``window_end`` for result tables)."""
        key = str(location(path))
        with self._lock(key):
            table = self._latest(key)
            version = table.version()
            files = self._files.setdefault(key, {})
            cached = files.get(timestamp_column)
            if cached is None or cached[0] != version:
                cached = files[timestamp_column] = (version, live_files(table, key, timestamp_column))
            return cached

    def rows(self, path, arrow_schema: pa.Schema, version: DeltaTable | None = None) -> pa.Table:
        """Every row of an unpartitioned table's latest version (or of ``version``, the table opened at the
        version a writer decides on), with ``arrow_schema``'s columns (null where a file predates a column).
        Data files never change, so each is read once per process and a new version reads only the files it
        added: the cost of a call grows with what was committed since the last one, not with the table. For
        the record tables csparql reads often (runs, watermarks, statistics, stale windows).

        A live file that is missing from disk is left out with a warning naming the table, the file and the
        command that repairs it (``MissingFiles``): one lost file of a record table shared by every query must
        not stop every evaluation."""
        key = str(location(path))
        with self._lock(key):
            table = self._latest(key) if version is None else version
            cached = self._rows.get(key)
            if version is None and cached is not None and cached[0] == table.version():
                return cached[1]
            known = self._file_rows.setdefault(key, {})  # as the log names them (relative paths)
            live = action_column(add_actions(table), "path")
            lost = []
            for relative in live:
                if relative not in known:
                    try:
                        known[relative] = _conformed(read_parquet(file_uri(key, relative)), arrow_schema)
                    except FileNotFoundError:
                        lost.append(relative)
            if lost:
                _warn_missing(key, lost)
                live = [relative for relative in live if relative not in lost]
            rows = pa.concat_tables([known[relative] for relative in live]) if live else arrow_schema.empty_table()
            if version is None:
                for relative in known.keys() - set(live):  # removed: compacted, or their rows replaced
                    del known[relative]
                self._rows[key] = (table.version(), rows)
            return rows


_WARNED_MISSING: set[tuple[str, str]] = set()


def _warn_missing(key: str, lost: list[str]) -> None:
    """Log, once per process and file, that a record table's file is missing and its rows are not read."""
    new = [relative for relative in lost if (key, relative) not in _WARNED_MISSING]
    if new:
        _WARNED_MISSING.update((key, relative) for relative in new)
        log.warning("%s; its rows are left out until then", MissingFiles(key, lost))


def _conformed(rows: pa.Table, arrow_schema: pa.Schema) -> pa.Table:
    """``rows`` with exactly ``arrow_schema``'s columns, in its order and types (nulls for a missing column)."""
    columns = [rows.column(f.name).cast(f.type) if f.name in rows.column_names else pa.nulls(rows.num_rows, f.type)
               for f in arrow_schema]
    return pa.Table.from_arrays(columns, schema=arrow_schema)


def compact_record_table(path, threshold: int = RECORD_TABLE_COMPACT_FILES) -> bool:
    """Merge the small files of an unpartitioned record table into one once it holds ``threshold`` of them
    (each commit of a record adds one), so that a process reading it afresh reads a few files, not one per
    commit (``compact_files``)."""

    def small_files(files: list[FileInfo]) -> list[FileInfo]:
        small = [f for f in files if not f.partition and (f.size is None or f.size < RECORD_TABLE_FILE_BYTES)]
        if len(small) < threshold:
            return []
        small = [f for f in small if file_exists(f.uri)]  # a lost file stays for ``csparql repair``
        return small if len(small) >= threshold else []

    return compact_files(path, small_files)


def compact_files(path, choose: Callable[[list[FileInfo]], list[FileInfo]],
                  timestamp_column: str | None = None) -> bool:
    """Rewrite the files ``choose`` picks among the table's live files (all of one partition; none: nothing to
    do) as one file whose statistics bound ``timestamp_column`` (as ``commit_files`` records them), in a commit
    right after the version they were picked from (``dataChange`` false: the rows and what each version holds
    stay). Only one rewrite of the same files can commit, as with ``write_on_version``: delta-rs's own
    ``optimize`` lets two concurrent compactions of the same files both commit, and the table then holds
    their rows twice. The files are first picked from the process's open snapshot, so a call with nothing to
    do reads no log. Returns whether it compacted; it never raises: a failure (a full disk, a file that
    cannot be read) is logged and the files stay for a later call."""
    try:
        if not choose(SNAPSHOTS.snapshot(path, timestamp_column or "")[1]):
            return False
        for attempt in range(EXCLUSIVE_ATTEMPTS):
            table = open_table(path)
            chosen = choose(live_files(table, path, timestamp_column or ""))
            if not chosen:
                return False
            if len({tuple(sorted(f.partition.items())) for f in chosen}) > 1:
                raise ValueError("the files to compact lie in more than one partition")
            with named_failures(path, "compacting"):
                if _compact_exclusively(table, location(path), chosen, timestamp_column):
                    return True
            time.sleep(random.uniform(0.02, 0.06) * 2 ** min(attempt, 5))
        log.info("compacting %s kept conflicting with concurrent writers; its files stay as they are", path)
    except Exception as error:  # noqa: BLE001 - an optimization: the rows are right either way
        log.warning("compacting %s failed (%s); its files stay as they are", path, " ".join(str(error).split())[:300])
    return False


def _compact_exclusively(table: DeltaTable, root: Path | ObjectPath, files: list[FileInfo],
                         timestamp_column: str | None) -> bool:
    """Replace ``files`` (of one partition) by one file of their rows in the table's types (delta-spark's files
    hold nanosecond timestamps), in a commit right after ``table``'s version; False, and no file left behind,
    when another writer committed that version first."""
    partition = dict(files[0].partition)
    data_columns = pa.schema([f for f in pa.schema(table.schema().to_arrow()) if f.name not in partition])
    rows = pa.concat_tables([_conformed(read_parquet(f.uri), data_columns) for f in files])
    folder = "/".join(f"{key}={value}" for key, value in partition.items())
    name = f"{folder}/" * bool(folder) + f"part-00000-{uuid.uuid4()}-c000.snappy.parquet"
    target = root / name
    target.parent.mkdir(parents=True, exist_ok=True)  # a stream's files lie in their ingest's folder, not in it
    write_parquet(rows, target, compression="snappy")
    now = int(time.time() * 1000)
    statistics = file_statistics(str(target), timestamp_column)
    actions: list[AddAction | RemoveAction] = [
        AddAction(name, target.stat().st_size, partition, now, False, statistics)]
    actions += [RemoveAction(location(f.uri).relative_to(root).as_posix(), False, now, f.size, partition)
                for f in files]
    try:
        table.create_write_transaction(
            actions, mode="append", schema=table.schema(), partition_by=table.metadata().partition_columns or None,
            commit_properties=CommitProperties(custom_metadata={OPERATION: "compact"}, max_commit_retries=0))
    except CommitFailedError:
        target.unlink(missing_ok=True)
        return False
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return True


def _log_origin(root: str) -> tuple[int, int] | None:
    """The identity (inode, modification time) of a table's first log entry: a table removed and created again
    has another; None once log clean-up has removed it, or before the table exists."""
    try:
        entry = (location(root) / "_delta_log" / f"{0:020d}.json").stat()
    except OSError:
        return None
    return entry.st_ino, entry.st_mtime_ns


SNAPSHOTS = TableSnapshots()
"""The process's ``TableSnapshots``: what evaluations read tables through."""


def _retrying(operation: Callable[[int], None], what: str, path) -> None:
    for attempt in range(MAX_ATTEMPTS):
        try:
            with named_failures(path, "writing to"):
                operation(attempt)
            return
        except CommitFailedError:
            if attempt == MAX_ATTEMPTS - 1:
                raise StorageError(
                    f"{what} at {path} kept conflicting with concurrent writers after {MAX_ATTEMPTS} attempts"
                ) from None
            time.sleep(random.uniform(0.02, 0.06) * 2**attempt)


def append(path, data, schema: pa.Schema, partition_by=None, metadata: Mapping[str, str] | None = None,
           merge_schema: bool = False) -> None:
    """Append Arrow data (a table or a stream of record batches) in one commit; with ``merge_schema``, columns
    the table lacks are added to it (schema evolution: its older rows read them as null)."""
    ensure(path, schema, partition_by)

    def attempt(_):
        write_deltalake(
            uri(path), data, mode="append", partition_by=partition_by,
            schema_mode="merge" if merge_schema else None,
            commit_properties=CommitProperties(custom_metadata=dict(metadata or {})),
        )

    _retrying(attempt, "appending", path)


def replace_where(
    path,
    data: pa.Table,
    predicate: str,
    schema: pa.Schema,
    partition_by=None,
    merge_schema: bool = False,
    metadata: Mapping[str, str] | None = None,
) -> None:
    """Replace the rows matching ``predicate`` with ``data`` in one commit (overwrite by predicate)."""
    ensure(path, schema, partition_by)

    def attempt(_):
        write_deltalake(
            uri(path), data, mode="overwrite", predicate=predicate, partition_by=partition_by,
            schema_mode="merge" if merge_schema else None,
            commit_properties=CommitProperties(custom_metadata=dict(metadata or {})),
        )

    _retrying(attempt, "replacing rows", path)


@dataclass(frozen=True)
class Write:
    """One write ``write_on_version`` commits: the data and how it goes into the table (``mode`` append, or
    overwrite of the rows ``predicate`` matches), with the commit's metadata."""

    data: pa.Table
    mode: str = "append"
    predicate: str | None = None
    merge_schema: bool = False
    metadata: Mapping[str, str] = field(default_factory=dict)


EXCLUSIVE_ATTEMPTS = 12
"""How many times ``write_on_version`` builds its write again on a newer version before giving up."""


def write_on_version(path, schema: pa.Schema, build: Callable[[DeltaTable], Write | None], what: str,
                     partition_by: list[str] | None = None, properties: Mapping[str, str] | None = None) -> int | None:
    """Commit what ``build`` makes of the table's latest version as the version right after it, and only there:
    when another writer committed first, ``build`` runs again on the newer version (optimistic concurrency).
    So ``build`` may decide from what that version holds, and no concurrent writer decides from the same
    state. A table that does not exist yet is created with ``schema``, ``partition_by`` and ``properties``.
    Returns the version committed (as the write left ``table``: delta-rs brings the table it writes
    through to the version it committed, so the log is not read again), None when ``build`` wrote nothing (it
    returned None); ``StorageError`` after ``EXCLUSIVE_ATTEMPTS`` conflicting attempts.

    The process's writes to one table go one at a time, each through the table the previous one left
    (``WRITERS``): only the log entries committed since are read, not the log from its last checkpoint."""
    with WRITERS.latest(path, schema, partition_by, properties) as held:
        table = held.table
        for attempt in range(EXCLUSIVE_ATTEMPTS):
            if attempt:
                table = held.table = open_table(path)
            write = build(table)
            if write is None:
                return None
            try:
                with named_failures(path, "writing to"):
                    _write_exclusively(table, write, partition_by)
                return table.version()
            except CommitFailedError:
                time.sleep(random.uniform(0.02, 0.06) * 2 ** min(attempt, 5))
    raise StorageError(f"{what} at {path} kept conflicting with concurrent writers after {EXCLUSIVE_ATTEMPTS} attempts")


@dataclass
class _HeldTable:
    table: DeltaTable


class WriterTables:
    """The table each path was last written through by this process, kept for its next write.

    ``latest(path, …)`` holds the path's lock (one write at a time per table in this process) and gives the
    table at its latest version: the kept one brought up to date (``DeltaTable.update_incremental``: the log
    entries committed since), else one opened (or created) anew — the first time, after a failed write, or
    when the table was removed or created again. A write that raises leaves nothing kept."""

    def __init__(self) -> None:
        self._tables: dict[str, tuple[DeltaTable, tuple[int, int] | None]] = {}
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()

    def forget(self) -> None:
        """Keep nothing (a forked child: another thread of its parent may have held a lock at the fork)."""
        self.__init__()

    @contextmanager
    def latest(self, path, schema: pa.Schema, partition_by=None, properties=None) -> Iterator[_HeldTable]:
        key = str(location(path))
        with self._guard:
            lock = self._locks.setdefault(key, threading.Lock())
        with lock:
            kept = self._tables.pop(key, None)
            origin = _log_origin(key)
            table = _brought_up_to_date(kept[0], key) if kept is not None and kept[1] == origin else None
            if table is None:
                table = ensure(path, schema, partition_by, properties)
                origin = _log_origin(key)
            held = _HeldTable(table)
            yield held
            self._tables[key] = (held.table, origin)


def _brought_up_to_date(table: DeltaTable, key: str) -> DeltaTable | None:
    """``table`` at its latest version (its protocol checked again when the version moved), or None when its
    log can no longer be followed (entries cleaned up, the folder gone). Callers first compare the log's origin
    (``_log_origin``): a table removed, or removed and created again, never reaches this.

    Delta numbers its commits without gaps, so a table whose next commit's log entry does not exist is at its
    latest version: that costs one ``stat``, where ``update_incremental`` lists the log (milliseconds of CPU,
    more as the log grows), and most reads of a record table find nothing committed since the last one."""
    before = table.version()
    if not file_exists(file_uri(key, f"_delta_log/{before + 1:020d}.json")):
        return table
    try:
        table.update_incremental()
    except (DeltaError, OSError):
        return None
    if table.version() != before:
        check_protocol(table, key)
    return table


WRITERS = WriterTables()
"""The process's ``WriterTables``: what ``write_on_version`` writes through."""
os.register_at_fork(after_in_child=WRITERS.forget)


def _write_exclusively(table: DeltaTable, write: Write, partition_by: list[str] | None) -> None:
    """Commit ``write`` as the version right after ``table``'s, or ``CommitFailedError``."""
    write_deltalake(
        table, write.data, mode=write.mode, predicate=write.predicate, partition_by=partition_by,
        schema_mode="merge" if write.merge_schema else None,
        # no retries: delta-rs would commit it after the concurrent commits, on a version build never saw
        commit_properties=CommitProperties(custom_metadata=dict(write.metadata), max_commit_retries=0),
    )


def remove_files(path, uris: Iterable[str], metadata: Mapping[str, str] | None = None) -> int:
    """Remove from the table, in one commit, those of the data files ``uris`` (absolute, as ``FileInfo.uri``)
    that its latest version still holds; returns how many. Removal is logical, as every Delta removal: a reader
    that listed the files before can still read them until ``vacuum`` deletes them once the retention has passed.
    The files need not be readable (a cache drops files it cannot read this way)."""
    wanted = set(uris)
    removed = 0

    def attempt(_):
        nonlocal removed
        table = open_table(path)
        actions = add_actions(table)
        root = location(path)
        now = int(time.time() * 1000)
        partition_columns = [c for c in actions.column_names if c.startswith("partition.")]
        removals = []
        for i, relative in enumerate(action_column(actions, "path")):
            if file_uri(root, relative) in wanted:
                partition = {c[len("partition."):]: actions.column(c)[i].as_py() for c in partition_columns}
                # the log holds the path URL-encoded and the action encodes what it is given
                removals.append(RemoveAction(unquote(relative), True, now, action_column(actions, "size_bytes")[i],
                                             partition))
        removed = len(removals)
        if removals:
            table.create_write_transaction(removals, mode="append", schema=table.schema(),
                                           partition_by=table.metadata().partition_columns or None,
                                           commit_properties=CommitProperties(custom_metadata=dict(metadata or {})))

    _retrying(attempt, "removing files", path)
    return removed


def file_statistics(file: str, timestamp_column: str | None = "ts") -> str:
    """The Delta ``stats`` JSON of a Parquet file, from its footer: record count and, for the timestamp
    column, bounds truncated to milliseconds as Delta writers record them."""
    metadata = parquet_metadata(file)
    stats: dict = {"numRecords": metadata.num_rows}
    if timestamp_column is not None:
        # Parquet numbers leaf columns (a struct counts one per field), not Arrow fields.
        index = next(i for i in range(metadata.num_columns) if metadata.schema.column(i).path == timestamp_column)
        low = high = None
        nulls = 0
        for group in range(metadata.num_row_groups):
            column = metadata.row_group(group).column(index)
            if column.statistics is None or not column.statistics.has_min_max:
                low = high = None
                break
            lo, hi = column.statistics.min, column.statistics.max
            low = lo if low is None or lo < low else low
            high = hi if high is None or hi > high else high
            nulls += column.statistics.null_count or 0
        if low is not None:
            stats["minValues"] = {timestamp_column: _delta_timestamp(low)}
            stats["maxValues"] = {timestamp_column: _delta_timestamp(high)}
            stats["nullCount"] = {timestamp_column: nulls}
    return json.dumps(stats)


def _delta_timestamp(value) -> str:
    millis = micros_of(value) // 1000
    instant = instant_of(millis * 1000)
    return instant.strftime("%Y-%m-%dT%H:%M:%S.") + f"{millis % 1000:03d}Z"


def commit_files(
    path,
    files: list[tuple[str, Mapping[str, str]]],
    schema: pa.Schema,
    partition_by: list[str] | None,
    timestamp_column: str | None = "ts",
    metadata: Mapping[str, str] | None = None,
    mode: str = "append",
    transaction: tuple[str, int] | None = None,
) -> None:
    """Commit Parquet files already written inside the table folder (by Spark) in one commit: appended to the
    table, or (``mode="overwrite"``) replacing all of its current files.

    ``transaction`` = (application id, version) records Delta's application transaction with the commit, which
    then happens only if the table's latest version of that application is ``version - 1`` (none: -1), even
    when nothing is added; else ``TransactionMoved``. A writer that commits what it consumed from a source this
    way commits each position once, whatever other writers of that application do meanwhile.

    Every file must exist and lie inside the table: a commit naming a missing file would be accepted by the
    log and break every later read, so this is checked first.
    """
    table = ensure(path, schema, partition_by)
    root = location(path)
    actions = []
    now = int(time.time() * 1000)
    for file, partition_values in files:
        full = location(file)
        if not full.is_file():
            raise StorageError(f"refusing to commit {full}: the file does not exist")
        if root not in full.parents:
            raise StorageError(f"refusing to commit {full}: it is not inside the table folder {root}")
        actions.append(
            AddAction(
                path=str(full.relative_to(root)),
                size=full.stat().st_size,
                partition_values=dict(partition_values),
                modification_time=now,
                data_change=True,
                stats=file_statistics(str(full), timestamp_column),
            )
        )
    if not actions and mode == "append" and transaction is None:
        return
    applications = [] if transaction is None else [Transaction(*transaction)]

    def attempt(_):
        latest = DeltaTable(uri(path))
        if transaction is not None:
            application, version = transaction
            recorded = latest.transaction_version(application)
            if (-1 if recorded is None else recorded) != version - 1:
                raise TransactionMoved(
                    f"{path}: the application {application!r} is at version {recorded} of its transactions, "
                    f"not {version - 1}: another writer committed for it since this one read")
        latest.create_write_transaction(
            actions, mode=mode, schema=schema, partition_by=partition_by,
            commit_properties=CommitProperties(custom_metadata=dict(metadata or {}), app_transactions=applications),
        )

    del table
    _retrying(attempt, "committing files", path)

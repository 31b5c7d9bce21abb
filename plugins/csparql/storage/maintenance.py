"""Keeping a warehouse's disk use in check: ``vacuum`` deletes the files its Delta tables no longer reference.

Every write here is a Delta commit that adds files and, for replacements (a window's results evaluated again,
a static graph loaded with ``--replace``, a closure of a newer static-graph version), removes others. Removal
is logical: the files stay on disk so that a reader that listed them before the commit can still read them,
and so that older versions stay readable (time travel). ``vacuum`` deletes, in every Delta table of the
warehouse, the removed files older than the retention, and files no commit references (what a write that
failed midway left behind) older than it and than ``UNCOMMITTED_HOURS``: a write in progress has written files
it has not committed yet, and a commit naming a deleted file would make the table unreadable. A retention under
``SAFE_RETENTION_HOURS`` is refused while evaluations are recorded as running (``csparql.storage.running``).
Tables whose files are gone all the same are repaired by ``csparql.storage.repair``.

Stored panes (``_csparql/panes``) are a cache: ``prune_panes`` removes the pane files written more than the
retention ago — the wall clock, never the event time of the panes, so that a replay of an old stream keeps
what it just computed —, logically, so an evaluation that listed them still reads them and a later ``vacuum``
deletes them; and it discards a pane table whose log cannot be read (``discard_table``).
"""

from __future__ import annotations

import os
import shutil
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from deltalake import DeltaTable
from deltalake.exceptions import DeltaError

from csparql.storage import delta
from csparql.storage.location import ObjectPath, location, remove_tree
from csparql.storage.tables import OPERATION


SAFE_RETENTION_HOURS = 1
"""Below this retention, a file an evaluation listed just before a commit removed it could be deleted under it:
such a vacuum is refused while evaluations are recorded as running (``csparql.storage.running``)."""
UNCOMMITTED_HOURS = 1
"""Files no commit references are kept at least this long, whatever the retention: a write in progress has
written its files and not committed them yet, and a commit naming a deleted file would break the table."""
HOUR = 3_600_000_000


@dataclass(frozen=True)
class Vacuumed:
    """One table's vacuum: its folder, the files deleted (or that would be, in a dry run) and their bytes."""

    table: Path
    files: tuple[str, ...]
    bytes: int


class EvaluationsRunning(Exception):
    """A vacuum with a retention under ``SAFE_RETENTION_HOURS`` stopped because evaluations are recorded as
    running; ``done`` holds the tables it vacuumed before it found them."""

    def __init__(self, evaluations: list, done: list[Vacuumed]):
        self.evaluations = evaluations
        self.done = done
        first = evaluations[0].describe()
        more = f" and {len(evaluations) - 1} more" if len(evaluations) > 1 else ""
        super().__init__(f"refused: {len(evaluations)} evaluation(s) recorded as running, {first}{more}; a "
                         f"retention under {SAFE_RETENTION_HOURS}h could delete files they read. Wait until they "
                         f"end, or use --retain {SAFE_RETENTION_HOURS}h or more")


def delta_tables(root: str | os.PathLike | ObjectPath) -> list[Path | ObjectPath]:
    """Every Delta table under ``root`` (a folder or S3 prefix holding ``_delta_log``), not looking inside
    tables."""
    root = location(root)
    if isinstance(root, ObjectPath):  # one listing of every object under the prefix
        tables = set()
        for path in root.rglob("*"):
            parts = path.relative_to(root).parts
            if "_delta_log" in parts[:-1] or parts[-1:] == ("_delta_log",):
                tables.add(root / "/".join(parts[:parts.index("_delta_log")]))
        return sorted(t for t in tables if not any(o != t and t.key.startswith(o.key + "/") for o in tables))
    found = []
    for folder, subfolders, _ in os.walk(root):
        if "_delta_log" in subfolders:
            found.append(Path(folder))
            subfolders.clear()
    return sorted(found)


def vacuum(root: str | os.PathLike, retain_hours: int, dry_run: bool = False,
           skip: Iterable[Path] = ()) -> list[Vacuumed]:
    """Vacuum every Delta table under ``root`` (a warehouse) but those in ``skip``: delete the files that the
    latest version does not reference and that were removed more than ``retain_hours`` ago, and the files no
    commit references that were written more than ``retain_hours``, and at least ``UNCOMMITTED_HOURS``, ago —
    or only list them with ``dry_run``. Each table's entry lists the files that were on disk and are deleted
    (a file deleted by an earlier vacuum, whose removal the log still records, is not counted again).

    Evaluations recorded as running (``csparql.storage.running``) are looked for before each table: with a
    retention under ``SAFE_RETENTION_HOURS`` the vacuum stops there (``EvaluationsRunning``); else the
    retention is raised to cover the oldest of them. A table that uses features csparql does not read, or
    whose log cannot be read, is refused (``StorageError`` naming it) before anything is deleted anywhere."""
    if retain_hours < 0:
        raise ValueError("the retention cannot be negative")
    from csparql.storage.running import running_evaluations
    from csparql.storage.warehouse import Warehouse

    warehouse = Warehouse(root)
    skipped = {location(path) for path in skip}
    tables = [(path, _open_for_vacuum(path)) for path in delta_tables(root) if path not in skipped]
    done: list[Vacuumed] = []
    for path, table in tables:
        if table is None:
            continue
        path = path.resolve()
        hours = retain_hours
        running = running_evaluations(warehouse)
        if running:
            if retain_hours < SAFE_RETENTION_HOURS:
                raise EvaluationsRunning(running, done)
            oldest = running[0].started_at
            hours = max(hours, -(-(time.time_ns() // 1000 - oldest) // HOUR))
        removed = _on_disk(path, _vacuum_table(table, hours, dry_run=True, full=False))
        uncommitted_hours = max(hours, UNCOMMITTED_HOURS)
        everything = _on_disk(path, _vacuum_table(table, uncommitted_hours, dry_run=True, full=True))
        candidates = sorted(set(removed) | set(everything))
        sizes = {name: _size(path / name) for name in candidates}
        if dry_run:
            files = candidates
        else:
            if removed:
                _vacuum_table(table, hours, dry_run=False, full=False)
            if set(everything) - set(removed):  # each vacuum commits twice to the log: only when it deletes
                _vacuum_table(table, uncommitted_hours, dry_run=False, full=True)
            files = [name for name in candidates if not (path / name).exists()]
        done.append(Vacuumed(path, tuple(files), sum(sizes.get(name, 0) for name in files)))
    return done


def _on_disk(root: Path | ObjectPath, names: Iterable[str]) -> list[str]:
    """Those of the files a vacuum lists (relative to the table, or absolute) that are stored, relative."""
    root = root.resolve()
    found = []
    for name in names:
        file = location(name) if os.path.isabs(name) or "://" in name else root / name
        if file.exists():
            try:
                found.append(file.relative_to(root).as_posix())
            except ValueError:  # not in the table's folder
                found.append(str(file))
    return found


@dataclass(frozen=True)
class PrunedPanes:
    """One pane table's pruning: its folder, how many of its files were written before the cutoff, and, for a
    table whose log could not be read, why it was discarded instead."""

    table: Path
    files: int
    discarded: str | None = None


def prune_panes(panes_root: str | os.PathLike, before: int, dry_run: bool = False) -> list[PrunedPanes]:
    """Remove, from every pane table under ``panes_root`` (``_csparql/panes``), the files written before the
    wall-clock instant ``before`` (µs) — when they were written, not the event times of the panes they hold:
    pane rows are a cache, and a window that needs them again computes them again (``csparql.engine.panes``).
    The removal is logical: an evaluation that listed the files before can still read them until ``vacuum``
    deletes them, once its retention has passed since the removal. A pane table whose log cannot be read is
    discarded whole (``discard_table``). Returns, per table, how many files were (or, with ``dry_run``, would be)
    removed."""
    done = []
    for path in delta_tables(panes_root) if location(panes_root).is_dir() else []:
        try:
            _, files = delta.SNAPSHOTS.snapshot(path)
        except UNREADABLE_LOG as error:
            reason = _first_line(error)
            if not dry_run:
                discard_table(path)
            done.append(PrunedPanes(path, 0, reason))
            continue
        old = [f.uri for f in files if f.written is not None and f.written < before]
        if old and not dry_run:
            delta.remove_files(path, old, metadata={OPERATION: "prune-panes"})
        done.append(PrunedPanes(path, len(old)))
    return done


UNREADABLE_LOG = (DeltaError, delta.StorageError, OSError)
"""What opening a Delta table whose log is damaged (an entry truncated, not JSON, or missing) raises."""


def discard_table(path: str | os.PathLike) -> None:
    """Remove a cache table (a pane table) whose log cannot be read: its folder is first renamed aside — so
    that a writer at the same path starts a new table rather than add to the damaged one —, then deleted.
    Readers that listed its files find them gone, and compute what they needed again."""
    path = location(path)
    if isinstance(path, ObjectPath):  # no renaming in S3: its log goes first, then the rest
        remove_tree(path / "_delta_log")
        remove_tree(path)
        return
    aside = path.with_name(f".{path.name}.discarded-{uuid.uuid4().hex[:12]}")
    try:
        path.rename(aside)
    except FileNotFoundError:
        return  # another process discarded it first
    shutil.rmtree(aside, ignore_errors=True)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def _open_for_vacuum(path: Path) -> DeltaTable | None:
    """The table to vacuum; None when it is gone since it was found (a pane table discarded meanwhile)."""
    try:
        return delta.open_table(path)
    except (DeltaError, delta.StorageError) as error:
        if not delta.exists(path):
            return None
        raise delta.StorageError(f"the Delta log of {path} cannot be read: {_first_line(error)}") from None


def _vacuum_table(table: DeltaTable, hours: int, dry_run: bool, full: bool) -> list[str]:
    """delta-rs's vacuum: removed files older than ``hours``; with ``full``, unreferenced files older than it too
    (without, only those removed since the last checkpoint)."""
    return sorted(table.vacuum(retention_hours=hours, dry_run=dry_run, enforce_retention_duration=False, full=full))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0

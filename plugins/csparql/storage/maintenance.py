"""Keeping a warehouse's disk use in check: ``vacuum`` deletes the files its Delta tables no longer reference.

Every write here is a Delta commit that adds files and, for replacements (a window's results evaluated again,
a static graph loaded with ``--replace``, a closure of a newer static-graph version), removes others. Removal
is logical: the files stay on disk so that a reader that listed them before the commit can still read them,
and so that older versions stay readable (time travel). ``vacuum`` deletes, in every Delta table of the
warehouse, the removed files older than the retention, and files no commit ever added (what a write that
failed midway left behind) older than it.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from deltalake import DeltaTable

from csparql.storage import delta
from csparql.storage.instants import bucket_of

@dataclass(frozen=True)
class Vacuumed:
    """One table's vacuum: its folder, the files deleted (or that would be, in a dry run) and their bytes."""

    table: Path
    files: tuple[str, ...]
    bytes: int


def delta_tables(root: str | os.PathLike) -> list[Path]:
    """Every Delta table under ``root`` (a folder holding ``_delta_log``), not looking inside tables."""
    found = []
    for folder, subfolders, _ in os.walk(root):
        if "_delta_log" in subfolders:
            found.append(Path(folder))
            subfolders.clear()
    return sorted(found)


def vacuum(root: str | os.PathLike, retain_hours: int, dry_run: bool = False) -> list[Vacuumed]:
    """Vacuum every Delta table under ``root``: delete the files that the latest version does not reference
    and that were removed (or written) more than ``retain_hours`` ago — or only list them with ``dry_run``.
    A table that uses features csparql does not read is refused (``StorageError``) before anything is deleted
    anywhere."""
    if retain_hours < 0:
        raise ValueError("the retention cannot be negative")
    tables = [(path, delta.open_table(path)) for path in delta_tables(root)]
    done = []
    for path, table in tables:
        candidates = _vacuum_table(table, retain_hours, dry_run=True)
        sizes = {name: _size(path / name) for name in candidates}
        files = candidates if dry_run else _vacuum_table(table, retain_hours, dry_run=False)
        done.append(Vacuumed(path, tuple(files), sum(sizes.get(name, 0) for name in files)))
    return done


@dataclass(frozen=True)
class PrunedPanes:
    """One pane table's pruning: its folder and how many of its files held only panes older than the cutoff."""

    table: Path
    files: int


def prune_panes(panes_root: str | os.PathLike, before: int, dry_run: bool = False) -> list[PrunedPanes]:
    """Remove, from every pane table under ``panes_root`` (``_csparql/panes``), the hour buckets that end at or
    before the instant ``before`` (µs): pane rows are a cache, and a window that needs them again computes
    them again (``csparql.engine.panes``). The rows of static solutions (no bucket) stay. Returns, per table,
    how many files were (or, with ``dry_run``, would be) removed; ``vacuum`` deletes them later."""
    cutoff = bucket_of(before)
    done = []
    for path in delta_tables(panes_root) if Path(panes_root).is_dir() else []:
        _, files = delta.SNAPSHOTS.snapshot(path)
        old = [f for f in files if f.partition.get("bucket") is not None and f.partition["bucket"] < cutoff]
        if old and not dry_run:
            delta.open_table(path).delete(predicate=f"bucket < '{cutoff}'")
        done.append(PrunedPanes(path, len(old)))
    return done


def _vacuum_table(table: DeltaTable, hours: int, dry_run: bool) -> list[str]:
    return sorted(table.vacuum(retention_hours=hours, dry_run=dry_run, enforce_retention_duration=False, full=True))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0

"""``storage.delta.TableSnapshots``: tables kept open across evaluations always read at their latest version,
also when another process commits, or removes the table and creates it again (real Delta tables, delta-rs)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import write_deltalake

from csparql.storage.delta import StorageError, TableSnapshots


def _write(path, values, mode="append"):
    write_deltalake(str(path), pa.table({"n": pa.array(values, pa.int64())}), mode=mode)


def _values(snapshots, path):
    return sorted(snapshots.latest(path).to_pyarrow_table().column("n").to_pylist())


def test_a_commit_by_another_writer_is_seen_and_the_files_are_listed_once_per_version(tmp_path):
    table = tmp_path / "t"
    _write(table, [1])
    snapshots = TableSnapshots()
    version, files = snapshots.snapshot(table)
    assert (version, len(files)) == (0, 1)
    assert snapshots.snapshot(table)[1] is files  # the same version: not listed again
    _write(table, [2])  # another writer, after the table was opened
    version, files = snapshots.snapshot(table)
    assert (version, len(files)) == (1, 2)
    assert _values(snapshots, table) == [1, 2]


def test_a_table_removed_and_created_again_is_read_afresh_even_at_the_same_version(tmp_path):
    table = tmp_path / "t"
    _write(table, [1])
    _write(table, [2])
    snapshots = TableSnapshots()
    assert snapshots.snapshot(table)[0] == 1 and _values(snapshots, table) == [1, 2]
    shutil.rmtree(table)
    _write(table, [10])
    _write(table, [20])  # version 1 again, other files
    version, files = snapshots.snapshot(table)
    assert version == 1 and sorted(f.records for f in files) == [1, 1]
    assert _values(snapshots, table) == [10, 20]
    assert all(Path(f.uri).exists() for f in files)


def test_a_removed_table_is_refused_as_open_table_refuses_it(tmp_path):
    table = tmp_path / "t"
    _write(table, [1])
    snapshots = TableSnapshots()
    snapshots.latest(table)
    shutil.rmtree(table)
    with pytest.raises(StorageError, match="no Delta table"):
        snapshots.latest(table)

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


def test_the_log_is_read_again_only_once_it_holds_a_newer_commit(tmp_path, monkeypatch):
    from deltalake import DeltaTable

    table = tmp_path / "t"
    _write(table, [1])
    snapshots = TableSnapshots()
    snapshots.latest(table)
    updates = []
    update = DeltaTable.update_incremental
    monkeypatch.setattr(DeltaTable, "update_incremental", lambda self: updates.append(1) or update(self))
    for _ in range(3):  # nothing committed since: the log is not listed
        assert snapshots.latest(table).version() == 0
    assert updates == []
    _write(table, [2])
    _write(table, [3])  # two commits by another writer: both read in one update
    assert snapshots.latest(table).version() == 2 and updates == [1]
    assert _values(snapshots, table) == [1, 2, 3] and updates == [1]


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


def test_rows_reads_each_data_file_once_and_a_file_written_before_a_column_reads_it_as_null(tmp_path, monkeypatch):
    from csparql.storage import delta

    table = tmp_path / "t"
    _write(table, [1])
    wide = pa.schema([pa.field("n", pa.int64()), pa.field("note", pa.string())])
    delta.append(table, pa.table({"n": pa.array([2], pa.int64()), "note": ["two"]}), wide, merge_schema=True)
    reads: list[str] = []
    read_table = delta.pq.read_table
    monkeypatch.setattr(delta.pq, "read_table", lambda uri, *a, **k: reads.append(uri) or read_table(uri, *a, **k))
    snapshots = TableSnapshots()
    rows = snapshots.rows(table, wide)
    assert rows.schema == wide
    assert sorted(rows.to_pylist(), key=lambda r: r["n"]) == [{"n": 1, "note": None}, {"n": 2, "note": "two"}]
    assert len(reads) == 2
    assert snapshots.rows(table, wide) is rows  # the same version: nothing read again
    delta.append(table, pa.table({"n": pa.array([3], pa.int64()), "note": ["three"]}), wide)
    assert sorted(snapshots.rows(table, wide).column("n").to_pylist()) == [1, 2, 3]
    assert len(reads) == 3  # only the file the new version added


def test_rows_of_a_given_version_ignore_later_commits(tmp_path):
    from deltalake import DeltaTable

    table = tmp_path / "t"
    _write(table, [1])
    at_first = DeltaTable(str(table))
    _write(table, [2])
    snapshots = TableSnapshots()
    assert snapshots.rows(table, pa.schema([pa.field("n", pa.int64())])).num_rows == 2
    assert snapshots.rows(table, pa.schema([pa.field("n", pa.int64())]), at_first).column("n").to_pylist() == [1]


def test_a_record_table_is_compacted_once_it_holds_enough_small_files_and_keeps_every_row_and_version(tmp_path):
    """The watermarks table gains a file per advance: past the threshold its files are merged, a fresh process
    reads the same watermarks from a few files, and earlier versions still read as they were."""
    from deltalake import DeltaTable

    from csparql.storage import delta
    from csparql.storage.warehouse import Warehouse
    from csparql.storage.watermarks import advance_watermark, read_watermarks

    warehouse = Warehouse(tmp_path / "warehouse")
    start = 1_800_000_000_000_000
    for step in range(1, delta.RECORD_TABLE_COMPACT_FILES + 6):
        advance_watermark(warehouse, "http://example.org/s", start + step, "test")
        advance_watermark(warehouse, "http://example.org/t", start + 2 * step, "test")
    steps = delta.RECORD_TABLE_COMPACT_FILES + 5
    table = DeltaTable(str(warehouse.watermarks))
    assert len(table.file_uris()) < delta.RECORD_TABLE_COMPACT_FILES
    assert any(entry.get("csparql.operation") == "compact" for entry in table.history())
    rows = table.to_pyarrow_table()
    assert rows.num_rows == 2 * steps  # every advance kept, none twice
    expected = {"http://example.org/s": start + steps, "http://example.org/t": start + 2 * steps}
    assert read_watermarks(warehouse) == expected
    delta.SNAPSHOTS._tables.clear()  # as a fresh process
    assert read_watermarks(warehouse) == expected
    assert DeltaTable(str(warehouse.watermarks), version=2).to_pyarrow_table().num_rows == 2  # created, s, t


def test_a_record_table_below_the_threshold_is_left_as_it_is(tmp_path):
    from csparql.storage import delta

    table = tmp_path / "t"
    for n in range(5):
        _write(table, [n])
    assert delta.compact_record_table(table) is False
    assert delta.compact_record_table(table, threshold=5) is True
    assert len(delta.open_table(table).file_uris()) == 1
    assert sorted(delta.open_table(table).to_pyarrow_table().column("n").to_pylist()) == [0, 1, 2, 3, 4]
    assert delta.compact_record_table(table, threshold=2) is False  # one file now


def test_compactions_racing_on_one_record_table_keep_every_row_once(tmp_path):
    """Writers compact after their commits; when several do at once, only one rewrite of the same files commits
    (delta-rs's own optimize let two commit, and the runs table then held each run twice)."""
    import threading

    from deltalake import DeltaTable

    from csparql.storage import delta

    table = tmp_path / "t"
    for n in range(40):
        _write(table, [n])
    start = threading.Barrier(4)
    outcomes: list[bool] = []

    def compact():
        start.wait()
        outcomes.append(delta.compact_record_table(table, threshold=8))

    def append(values):
        start.wait()
        for n in values:
            _write(table, [n])

    threads = [threading.Thread(target=compact) for _ in range(3)]
    threads.append(threading.Thread(target=append, args=(range(40, 50),)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(DeltaTable(str(table)).to_pyarrow_table().column("n").to_pylist()) == list(range(50))
    assert any(outcomes)
    assert sorted(TableSnapshots().rows(table, pa.schema([pa.field("n", pa.int64())])).column("n").to_pylist()) == \
        list(range(50))


# ``storage.delta.write_on_version`` through ``WRITERS``: the table a write left is kept for the next write.

SCHEMA = pa.schema([pa.field("n", pa.int64())])


def _numbered(path, value):
    """Write ``value`` with the version ``build`` saw; the version committed."""
    from csparql.storage import delta

    seen = []

    def build(table):
        seen.append(table.version())
        return delta.Write(pa.table({"n": pa.array([value], pa.int64())}))

    committed = delta.write_on_version(path, SCHEMA, build, "writing a number")
    return seen, committed


def _opened(monkeypatch):
    """The paths ``write_on_version`` opened (or created) a table at from now on."""
    from csparql.storage import delta

    opened: list[str] = []
    ensure = delta.ensure
    monkeypatch.setattr(delta, "ensure", lambda path, *a, **k: opened.append(str(path)) or ensure(path, *a, **k))
    return opened


def test_writes_go_through_the_table_the_last_one_left_and_see_other_writers_commits(tmp_path, monkeypatch):
    from deltalake import DeltaTable

    table = tmp_path / "t"
    opened = _opened(monkeypatch)
    assert _numbered(table, 1) == ([0], 1)  # created (version 0), then written
    assert _numbered(table, 2) == ([1], 2)
    _write(table, [3])  # another writer: version 3
    assert _numbered(table, 4) == ([3], 4)  # built on the version the other writer committed
    assert opened == [str(table)]  # opened once, then brought up to date
    assert sorted(DeltaTable(str(table)).to_pyarrow_table().column("n").to_pylist()) == [1, 2, 3, 4]


def test_a_table_removed_and_created_again_is_written_afresh(tmp_path, monkeypatch):
    from deltalake import DeltaTable

    table = tmp_path / "t"
    _numbered(table, 1)
    _numbered(table, 2)
    shutil.rmtree(table)
    _write(table, [10])
    _write(table, [20])  # version 1 again, another table
    opened = _opened(monkeypatch)
    assert _numbered(table, 30) == ([1], 2)
    assert opened == [str(table)]
    assert sorted(DeltaTable(str(table)).to_pyarrow_table().column("n").to_pylist()) == [10, 20, 30]


def test_a_write_that_fails_keeps_no_table_and_the_next_write_opens_it_again(tmp_path, monkeypatch):
    from csparql.storage import delta

    table = tmp_path / "t"
    _numbered(table, 1)
    opened = _opened(monkeypatch)

    def failing(_):
        raise RuntimeError("the build failed")

    with pytest.raises(RuntimeError, match="the build failed"):
        delta.write_on_version(table, SCHEMA, failing, "failing")
    assert _numbered(table, 2) == ([1], 2)
    assert opened == [str(table)]  # the failed write used the kept table and left none: opened again


def test_a_commit_made_while_a_write_was_built_is_built_on_again_and_concurrent_writers_each_get_a_version(
        tmp_path):
    import threading

    from deltalake import DeltaTable

    from csparql.storage import delta

    table = tmp_path / "t"
    _numbered(table, 0)
    seen = []

    def build_then_lose_the_race(current):
        seen.append(current.version())
        if len(seen) == 1:
            _write(table, [-1])  # another process commits first
        return delta.Write(pa.table({"n": pa.array([100], pa.int64())}))

    assert delta.write_on_version(table, SCHEMA, build_then_lose_the_race, "racing") == 3
    assert seen == [1, 2]

    committed: list[int] = []
    start = threading.Barrier(3)

    def write(values):
        start.wait()
        committed.extend(_numbered(table, n)[1] for n in values)

    threads = [threading.Thread(target=write, args=(range(k * 10, k * 10 + 5),)) for k in (1, 2, 3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(committed) == list(range(4, 19))  # one version each, none lost
    values = sorted(DeltaTable(str(table)).to_pyarrow_table().column("n").to_pylist())
    assert values == sorted([-1, 0, 100, *range(10, 15), *range(20, 25), *range(30, 35)])

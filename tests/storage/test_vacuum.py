"""``csparql vacuum`` over a warehouse of real Delta tables (written with delta-rs, no Spark needed): removed
and orphaned files go, the live version stays whole, recent files stay, and bad retentions are refused."""

from __future__ import annotations

import json
import os
import socket
import time

import pyarrow as pa
import pyarrow.parquet  # noqa: F401 - pa.parquet
import pytest
from deltalake import DeltaTable, write_deltalake

from csparql.cli import main
from csparql.storage.maintenance import delta_tables, vacuum


@pytest.fixture
def warehouse(tmp_path):
    """A result table overwritten once (its first file removed), a stream table, and an orphaned file written
    two hours ago (files no commit references are kept for an hour whatever the retention)."""
    root = tmp_path / "warehouse"
    results = root / "results" / "q" / "bindings"
    write_deltalake(str(results), pa.table({"x": [1, 2, 3]}))
    write_deltalake(str(results), pa.table({"x": [4, 5]}), mode="overwrite")
    write_deltalake(str(root / "streams" / "s"), pa.table({"y": ["a"]}))
    orphan = root / "streams" / "s" / "part-orphan.parquet"
    orphan.write_bytes(b"left by a write that failed midway")
    os.utime(orphan, (time.time() - 2 * 3600, time.time() - 2 * 3600))
    (root / "landing").mkdir()
    (root / "landing" / "input.nq").write_text("not a table\n")
    return root


def files_on_disk(table) -> set[str]:
    return {p.relative_to(table).as_posix() for p in table.rglob("*.parquet")}


def test_every_delta_table_is_found_and_nothing_else(warehouse):
    assert delta_tables(warehouse) == [warehouse / "results" / "q" / "bindings", warehouse / "streams" / "s"]


def test_a_dry_run_lists_removed_and_orphaned_files_and_deletes_nothing(warehouse):
    results = warehouse / "results" / "q" / "bindings"
    before = files_on_disk(results) | files_on_disk(warehouse / "streams" / "s")
    done = {t.table.name: t for t in vacuum(warehouse, 0, dry_run=True)}
    live = set(DeltaTable(str(results)).file_uris())
    assert len(done["bindings"].files) == 1 and not any(f in u for u in live for f in done["bindings"].files)
    assert done["s"].files == ("part-orphan.parquet",) and done["s"].bytes > 0
    assert files_on_disk(results) | files_on_disk(warehouse / "streams" / "s") == before


def test_vacuum_deletes_them_and_the_live_versions_read_the_same(warehouse):
    results = warehouse / "results" / "q" / "bindings"
    vacuum(warehouse, 0)
    assert len(files_on_disk(results)) == 1 and files_on_disk(warehouse / "streams" / "s") == {
        next(iter(files_on_disk(warehouse / "streams" / "s")))}
    assert not (warehouse / "streams" / "s" / "part-orphan.parquet").exists()
    assert DeltaTable(str(results)).to_pyarrow_table().column("x").to_pylist() == [4, 5]
    assert DeltaTable(str(warehouse / "streams" / "s")).to_pyarrow_table().column("y").to_pylist() == ["a"]
    assert (warehouse / "landing" / "input.nq").exists()


def test_files_removed_within_the_retention_stay(warehouse):
    assert all(not t.files for t in vacuum(warehouse, 168))
    assert len(files_on_disk(warehouse / "results" / "q" / "bindings")) == 2


def run_cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


def test_the_command_reports_per_table_and_refuses_unsafe_retentions(warehouse, capsys):
    base = ["vacuum", "--warehouse", str(warehouse)]
    code, _, err = run_cli(capsys, *base, "--retain", "0h")
    assert code == 2 and "under 1h" in err and "--force" in err
    code, _, err = run_cli(capsys, *base, "--retain", "90m")
    assert code == 2 and "whole hours" in err
    code, _, err = run_cli(capsys, *base, "--retain", "soon")
    assert code == 2 and "--retain 'soon'" in err
    assert (warehouse / "streams" / "s" / "part-orphan.parquet").exists()  # nothing deleted by a refusal
    code, out, _ = run_cli(capsys, *base, "--retain", "0h", "--force", "--dry-run")
    assert code == 0 and "streams/s: would delete 1 file(s)" in out and "would delete 2 file(s)" in out
    code, out, _ = run_cli(capsys, *base, "--retain", "0h", "--force")
    assert code == 0 and "2 table(s)" in out and "deleted 2 file(s)" in out
    assert not (warehouse / "streams" / "s" / "part-orphan.parquet").exists()
    code, _, err = run_cli(capsys, "vacuum", "--warehouse", str(warehouse / "missing"))
    assert code == 1 and "no warehouse" in err


def test_a_second_vacuum_deletes_nothing_and_says_so(warehouse, capsys):
    """The log keeps recording removed files after a vacuum deleted them: they are not counted again."""
    base = ["vacuum", "--warehouse", str(warehouse), "--retain", "0h", "--force"]
    code, out, _ = run_cli(capsys, *base)
    assert code == 0 and "deleted 2 file(s)" in out
    code, out, _ = run_cli(capsys, *base, "--dry-run")
    assert code == 0 and out.strip().endswith("would delete 0 file(s), 0.0 MB (retention 0h)"), out
    code, out, _ = run_cli(capsys, *base)
    assert code == 0 and out.strip().endswith("deleted 0 file(s), 0.0 MB (retention 0h)"), out


def test_a_write_in_progress_keeps_its_files_through_a_forced_vacuum(tmp_path, capsys):
    """A writer that wrote its file and has not committed it yet (as every commit of a runs row does) commits
    a file that is still there, so the table stays readable."""
    from csparql.storage import delta, schema
    from csparql.storage.warehouse import Warehouse

    warehouse = Warehouse(tmp_path / "warehouse")
    delta.ensure(warehouse.runs, schema.RUNS)
    written = warehouse.runs / "part-00000-in-progress.snappy.parquet"
    pa.parquet.write_table(schema.RUNS.empty_table(), written)
    code, out, _ = run_cli(capsys, "vacuum", "--warehouse", str(warehouse.root), "--retain", "0h", "--force")
    assert code == 0 and "deleted 0 file(s)" in out and written.exists()
    delta.commit_files(warehouse.runs, [(str(written), {})], schema.RUNS, None, timestamp_column=None)
    assert DeltaTable(str(warehouse.runs)).to_pyarrow_table().num_rows == 0


def test_a_forced_vacuum_waits_for_a_running_evaluation_but_not_for_one_whose_process_ended(warehouse, capsys):
    """The lease an evaluation keeps while it runs (``csparql.storage.running``, what ``Engine.evaluate`` holds)
    refuses a retention under 1h; a lease left by a process that ended (killed) does not, and is removed."""
    import subprocess
    import sys

    from csparql.storage.running import leases_folder, running
    from csparql.storage.warehouse import Warehouse

    base = ["vacuum", "--warehouse", str(warehouse), "--retain", "0h", "--force"]
    with running(Warehouse(warehouse), "a-run", "passages", 0):
        code, _, err = run_cli(capsys, *base)
        assert code == 1 and "refused: 1 evaluation(s) recorded as running, passages at" in err
        assert "(nothing was deleted)" in err and (warehouse / "streams" / "s" / "part-orphan.parquet").exists()
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    lease = leases_folder(Warehouse(warehouse)) / "killed.json"
    lease.write_text(json.dumps({"run_id": "killed", "query": "passages", "at": 0, "started_at": 0,
                                 "pid": ended.pid, "host": socket.gethostname()}))
    code, out, _ = run_cli(capsys, *base)
    assert code == 0 and "deleted 2 file(s)" in out and not lease.exists()

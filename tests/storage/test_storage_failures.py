"""Failures of the machine and of stored data, through the command line on real tables and a real Spark: a disk
that fills up (a small tmpfs mounted over a table's folder) during an evaluation's result write and during an
ingest, and a corrupt Delta log entry of a stream, a result table and the runs table. Each is one line naming the
table and the cause, without a traceback or a Java or Rust stack, and the runs table tells what was committed."""

from __future__ import annotations

import re
import subprocess
from contextlib import contextmanager
from pathlib import Path

import pytest
from deltalake import DeltaTable
from rdflib import Literal, URIRef

from csparql.cli import main
from csparql.storage import delta
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import parse_instant
from storage.helpers import write_stream

STREAM = "http://example.org/full/stream"
P = "http://example.org/full/p"
T0 = parse_instant("2010-03-22T10:30:00Z")
AT = "2010-03-22T11:00:00Z"
QUERY = f"REGISTER QUERY Full AS SELECT ?s ?o FROM STREAM <{STREAM}> [RANGE 1h STEP 1h] WHERE {{ ?s <{P}> ?o }}\n"
STACK_MARKS = ("Traceback", "Py4J", "java.", "at org.", "panicked", "stack backtrace", "internal error")


def triples(count: int, offset: int = 0):
    return [(URIRef(f"http://example.org/full/s{i}"), URIRef(P), Literal(f"the value of subject number {i}"),
             T0 + i) for i in range(offset, offset + count)]


@contextmanager
def full_disk(folder: Path, size: str = "16k"):
    """``folder`` on a filesystem of ``size`` bytes: room for a Delta log, not for the data."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)], check=True)
    try:
        yield folder
    finally:
        subprocess.run(["umount", str(folder)], check=True)


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.split("\n") if line.strip()]
    assert len(lines) == 1, err
    assert not any(mark in err for mark in STACK_MARKS), err
    return lines[0]


def runs_rows(warehouse: Warehouse) -> list[dict]:
    return DeltaTable(str(warehouse.runs)).to_pyarrow_table().to_pylist()


@pytest.fixture
def fresh_snapshots(monkeypatch):
    """Each test reads and writes the tables as a new process would, not through what another test kept open."""
    monkeypatch.setattr(delta, "SNAPSHOTS", delta.TableSnapshots())
    monkeypatch.setattr(delta, "WRITERS", delta.WriterTables())


def test_a_full_disk_during_a_result_write_is_one_line_and_the_failed_run_wrote_no_rows(
        spark, tmp_path, capsys, fresh_snapshots):
    warehouse = Warehouse(tmp_path / "warehouse")
    write_stream(warehouse, STREAM, triples(3_000))
    query = tmp_path / "full.rq"
    query.write_text(QUERY)
    results = warehouse.results("Full", "bindings")
    with full_disk(results):
        assert main(["run", str(query), "--at", AT, "--warehouse", str(warehouse.root)]) == 1
        assert DeltaTable(str(results)).to_pyarrow_table().num_rows == 0  # nothing committed
    cause = f"writing to the Delta table at {results} failed: no space left on device"
    assert one_line(capsys) == f"csparql: Full: the evaluation of the window ending {AT} failed: {cause}"
    [run] = runs_rows(warehouse)
    assert (run["status"], run["rows_written"], run["error"], run["result_version"]) == ("failed", 0, cause, None)


def test_a_full_disk_during_an_ingest_is_one_line_and_commits_nothing(spark, tmp_path, capsys, fresh_snapshots):
    warehouse = Warehouse(tmp_path / "warehouse")
    data = tmp_path / "s.nt"
    data.write_text("".join(f"<{s}> <{p}> \"{o}\" .\n" for s, p, o, _ in triples(3_000)))
    table = warehouse.stream(STREAM)
    with full_disk(table):
        code = main(["ingest", "--warehouse", str(warehouse.root), "--stream", STREAM,
                     "--timestamp", "2010-03-22T10:30:00Z", str(data)])
        committed = DeltaTable(str(table)).to_pyarrow_table().num_rows if delta.exists(table) else 0
    assert code != 0 and committed == 0
    assert one_line(capsys) == (f"csparql ingest: error: writing to the Delta table at {table} failed: no space "
                                "left on device; nothing was written")


def corrupt(table: Path, version: int) -> None:
    entry = table / "_delta_log" / f"{version:020d}.json"
    text = entry.read_text()
    entry.write_text(text[: len(text) // 2])


@pytest.mark.parametrize("which", ["stream", "result table", "runs table"])
def test_a_corrupt_log_entry_is_one_line_naming_the_table_and_the_version(
        which, spark, tmp_path, capsys, monkeypatch):
    warehouse = Warehouse(tmp_path / "warehouse")
    write_stream(warehouse, STREAM, triples(10))
    write_stream(warehouse, STREAM, triples(10, offset=10))
    query = tmp_path / "full.rq"
    query.write_text(QUERY)
    monkeypatch.setattr(delta, "SNAPSHOTS", delta.TableSnapshots())
    monkeypatch.setattr(delta, "WRITERS", delta.WriterTables())
    assert main(["run", str(query), "--at", AT, "--warehouse", str(warehouse.root)]) == 0
    capsys.readouterr()
    table = {"stream": warehouse.stream(STREAM), "result table": warehouse.results("Full", "bindings"),
             "runs table": warehouse.runs}[which]
    corrupt(table, 1)
    monkeypatch.setattr(delta, "SNAPSHOTS", delta.TableSnapshots())  # a new process: nothing read …
    monkeypatch.setattr(delta, "WRITERS", delta.WriterTables())  # … or written before
    assert main(["run", str(query), "--at", AT, "--warehouse", str(warehouse.root)]) == 1
    line = one_line(capsys)
    assert f"the Delta table at {table} has a corrupt Delta log entry at version 1 " in line
    assert re.search(r"\(_delta_log/00000000000000000001\.json: line \d+ is not JSON: .+\)$", line), line
    if which != "runs table":  # the failed run is recorded, naming the table
        assert line.startswith(f"csparql: Full: the evaluation of the window ending {AT} failed: the Delta table")
        failed = [run for run in runs_rows(warehouse) if run["status"] == "failed"]
        assert [(run["rows_written"], "corrupt Delta log entry at version 1" in run["error"]) for run in failed] == [
            (0, True)]
    else:
        assert line.startswith(f"csparql: the Delta table at {table} has a corrupt")


def test_the_failure_classifiers_read_each_runtime_s_words(tmp_path):
    import errno

    from csparql.storage.failures import corrupt_log_entry, no_space_left

    assert no_space_left(OSError(errno.ENOSPC, "No space left on device"))
    assert no_space_left(RuntimeError("Generic LocalFileSystem error: Unable to copy data to file: No space left "
                                      "on device (os error 28)"))
    try:
        try:
            raise OSError(errno.ENOSPC, "full")
        except OSError as inner:
            raise ValueError("while writing") from inner
    except ValueError as outer:
        assert no_space_left(outer)
    assert not no_space_left(ValueError("a space left on the line"))
    table = tmp_path / "t"
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / f"{0:020d}.json").write_text('{"commitInfo": {}}\n')
    assert corrupt_log_entry(table) is None
    (table / "_delta_log" / f"{1:020d}.json").write_text("")
    assert corrupt_log_entry(table) == (1, "it is empty")


def test_the_command_line_s_last_line_of_defence_names_a_full_disk_and_a_storage_failure():
    import errno

    from csparql.cli import failure_message
    from csparql.storage.failures import StorageError

    assert failure_message(OSError(errno.ENOSPC, "No space left on device", "/data/x.parquet")) == (
        "/data/x.parquet: no space left on device")
    try:
        try:
            raise StorageError("the Delta table at /w/t has a corrupt Delta log entry at version 3 (…)\n  0: frame")
        except StorageError as inner:
            raise RuntimeError("while recording the run") from inner
    except RuntimeError as outer:
        assert failure_message(outer) == "the Delta table at /w/t has a corrupt Delta log entry at version 3 (…)"
    assert failure_message(ValueError("a defect")) is None

"""Stored panes are a cache: whatever happens to them, a window combined from panes equals the
independent evaluator's, and its run succeeds.

Over real Delta tables and the shared SparkSession:

- ``csparql vacuum`` running between an evaluation's listing of its panes and its reading of them — with the
  default retention on a stream whose event times are years old, and with ``--retain 0h --force``, which
  deletes the files at once — never gives a window with rows missing;
- a pane file truncated or deleted, a pane log entry corrupted: later evaluations succeed with the right
  answer and a warning, and the cache is rebuilt.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest
from rdflib import Literal, URIRef

from csparql.cli import main
from csparql.engine import panes as pn
from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query
from csparql.core.panes import ALWAYS
from csparql.storage import delta
from csparql.storage.maintenance import delta_tables, prune_panes
from csparql.storage.running import leases_folder
from csparql.storage.warehouse import Warehouse

from conformance import reference
from conformance.compare import compare, from_engine
from storage.helpers import write_static, write_stream

EX = "http://example.org/"
STREAM = EX + "posts"
SECOND = 1_000_000
MINUTE = 60 * SECOND
HOUR = 60 * MINUTE
T0 = 1_600_000_000 * SECOND - 1_600_000_000 * SECOND % HOUR  # 2020-09-13T12:00Z: years before any vacuum
NAME = "topics"
QUERY = f"""PREFIX : <{EX}>
SELECT ?label (COUNT(*) AS ?posts) (MAX(?post) AS ?last)
FROM STREAM <{STREAM}> [RANGE 5m STEP 1m]
WHERE {{ ?post :topic ?topic . ?topic :label ?label }}
GROUP BY ?label
"""
LABELS = [(URIRef(f"{EX}t{i}"), URIRef(EX + "label"), Literal(f"topic {i}")) for i in range(3)]


def posts(minutes: range) -> list:
    """Three posts a minute on three topics, one on the minute's end (a pane's last instant), and one repeated
    from the minute before (a triple in two panes counts once in a window)."""
    triples = []
    for minute in minutes:
        for i in range(3):
            at = T0 + minute * MINUTE + (MINUTE if i == 0 else i * 7 * SECOND)
            triples.append((URIRef(f"{EX}post{minute}-{i}"), URIRef(EX + "topic"), URIRef(f"{EX}t{i % 3}"), at))
        triples.append((URIRef(f"{EX}post{minute - 1}-1"), URIRef(EX + "topic"), URIRef(f"{EX}t1"),
                        T0 + minute * MINUTE + 30 * SECOND))
    return triples


STREAM_TRIPLES = posts(range(0, 20))


@pytest.fixture
def warehouse(tmp_path):
    warehouse = Warehouse(tmp_path / "warehouse")
    write_static(warehouse, None, LABELS)
    write_stream(warehouse, STREAM, STREAM_TRIPLES)
    return warehouse


def assert_as_the_oracle(evaluation, query: str = QUERY, graphs: dict | None = None) -> None:
    """The window's result equals the independent evaluator's over the same triples."""
    end = evaluation.window.end
    expected = reference.evaluate(reference.Case(f"window ending {end}", query, {URIRef(STREAM): STREAM_TRIPLES},
                                                 {None: LABELS} if graphs is None else graphs, end))
    problems = compare(from_engine(evaluation.result), expected)
    assert not problems, f"window ending {(end - T0) // MINUTE} min after T0:\n" + "\n".join(problems)


def runs(warehouse: Warehouse) -> list[dict]:
    table = delta.open_table(warehouse.runs).to_pyarrow_table(columns=["query", "window_end", "status", "error"])
    return [row for row in table.to_pylist() if row["query"] == NAME]


def pane_table(warehouse: Warehouse) -> Path:
    (table,) = delta_tables(warehouse.panes(NAME))
    return table


def pane_warnings(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == pn.__name__ and r.levelno == logging.WARNING]


# --- vacuum racing an evaluation -------------------------------------------------------------------------

VACUUMS = {
    "the default retention": [],
    "--retain 0h --force": ["--retain", "0h", "--force"],
}


def unseen_by_vacuum(warehouse) -> None:
    """Remove the lease of the running evaluation (``csparql.storage.running``), as for an evaluation a vacuum
    cannot see (a lease of another host past its lifetime): a vacuum under 1h, refused while it sees one, then
    deletes files under the evaluation, which must survive that too."""
    for lease in leases_folder(warehouse).glob("*.json"):
        lease.unlink()


@pytest.mark.parametrize("vacuum", sorted(VACUUMS))
def test_vacuum_between_listing_and_reading_panes_never_loses_rows(vacuum, spark, warehouse, monkeypatch, caplog):
    """Each window's combination runs ``csparql vacuum`` (the command itself) once its panes are listed (the
    reader of the pane rows made) and before it reads them: the replay's every window equals the independent
    evaluator's, and every run succeeds."""
    make_reader = pn.PaneRowsReader.__init__
    vacuumed: set[int] = set()

    def then_vacuum(reader, *args, **kwargs):
        make_reader(reader, *args, **kwargs)
        if reader.window.end not in vacuumed:  # once a window
            vacuumed.add(reader.window.end)
            unseen_by_vacuum(warehouse)
            assert main(["vacuum", "--warehouse", str(warehouse.root), *VACUUMS[vacuum]]) == 0

    monkeypatch.setattr(pn.PaneRowsReader, "__init__", then_vacuum)
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    caplog.set_level(logging.WARNING)
    replayed = list(engine.replay(plan, T0 + 10 * MINUTE, T0 + 12 * MINUTE, NAME, panes=ALWAYS))
    assert len(replayed) == 3 and len(vacuumed) == 3
    for evaluation in replayed:
        assert evaluation.panes is not None
        assert_as_the_oracle(evaluation)
    assert [(r["status"], r["error"]) for r in runs(warehouse)] == [("succeeded", None)] * 3
    if vacuum == "--retain 0h --force":  # the files the evaluation listed were deleted under it: it says so
        assert any("could not be read" in message for message in pane_warnings(caplog)), pane_warnings(caplog)


def test_a_window_whose_panes_keep_disappearing_is_recomputed_from_its_streams(spark, warehouse, monkeypatch,
                                                                              caplog):
    """``csparql vacuum --retain 0h --force`` between every listing and reading of the window's panes: after
    ``PANE_ATTEMPTS`` tries the window is recomputed from its streams, with a warning, and is right."""
    make_reader = pn.PaneRowsReader.__init__
    readers = []

    def then_vacuum(reader, *args, **kwargs):
        make_reader(reader, *args, **kwargs)
        readers.append(reader)
        unseen_by_vacuum(warehouse)
        assert main(["vacuum", "--warehouse", str(warehouse.root), "--retain", "0h", "--force"]) == 0

    monkeypatch.setattr(pn.PaneRowsReader, "__init__", then_vacuum)
    caplog.set_level(logging.WARNING)
    evaluation = Engine(warehouse, spark).evaluate(compile_query(QUERY), T0 + 10 * MINUTE, NAME, panes=ALWAYS)
    assert_as_the_oracle(evaluation)
    assert [r["status"] for r in runs(warehouse)] == ["succeeded"]
    assert len(readers) == pn.PANE_ATTEMPTS and evaluation.panes is None
    assert any("recomputed from its streams" in r.getMessage() for r in caplog.records)


def test_vacuum_keeps_panes_written_within_the_retention_whatever_their_event_time(spark, warehouse):
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    assert engine.evaluate(plan, T0 + 10 * MINUTE, NAME, write=False, panes=ALWAYS).panes.computed == 5
    assert main(["vacuum", "--warehouse", str(warehouse.root)]) == 0
    assert main(["vacuum", "--warehouse", str(warehouse.root), "--retain", "1h"]) == 0
    again = engine.evaluate(plan, T0 + 10 * MINUTE, NAME, write=False, panes=ALWAYS)
    assert again.panes.computed == 0
    assert_as_the_oracle(again)


# --- unreadable panes ------------------------------------------------------------------------------------


def truncate_a_pane_file(table: Path) -> None:
    file = Path(delta.SNAPSHOTS.snapshot(table)[1][0].uri)
    data = file.read_bytes()
    file.write_bytes(data[: len(data) // 2])


def delete_a_pane_file(table: Path) -> None:
    os.remove(delta.SNAPSHOTS.snapshot(table)[1][0].uri)


def corrupt_the_latest_log_entry(table: Path) -> None:
    latest = sorted((table / "_delta_log").glob("*.json"))[-1]
    text = latest.read_text()
    latest.write_text(text[: len(text) // 2])


def corrupt_the_first_log_entry(table: Path) -> None:
    (table / "_delta_log" / f"{0:020d}.json").write_text("{not json\n")


DAMAGES = {
    "a truncated pane file": truncate_a_pane_file,
    "a deleted pane file": delete_a_pane_file,
    "a corrupt latest log entry": corrupt_the_latest_log_entry,
    "a corrupt first log entry": corrupt_the_first_log_entry,
}


@pytest.mark.parametrize("damage", sorted(DAMAGES))
def test_an_unreadable_pane_store_is_recomputed_with_a_warning(damage, spark, warehouse, caplog):
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    for minute in (8, 9):
        engine.evaluate(plan, T0 + minute * MINUTE, NAME, panes=ALWAYS)
    table = pane_table(warehouse)
    delta.SNAPSHOTS.snapshot(table)  # this process has read the table: it must not trust what it read
    DAMAGES[damage](table)
    caplog.set_level(logging.WARNING)
    later = [engine.evaluate(plan, T0 + minute * MINUTE, NAME, panes=ALWAYS) for minute in (9, 10, 11)]
    for evaluation in later:
        assert evaluation.panes is not None
        assert_as_the_oracle(evaluation)
    assert all(r["status"] == "succeeded" for r in runs(warehouse)), runs(warehouse)
    assert pane_warnings(caplog), "no warning that panes were recomputed"
    # the cache is whole again: a window of those panes reads them all, computing none
    caplog.clear()
    again = engine.evaluate(plan, T0 + 11 * MINUTE, NAME, write=False, panes=ALWAYS)
    assert again.panes.computed == 0 and not pane_warnings(caplog)
    assert_as_the_oracle(again)


LABELS_GRAPH = EX + "labels"
WITH_STATIC_SOLUTIONS = f"""PREFIX : <{EX}>
SELECT DISTINCT ?x
FROM STREAM <{STREAM}> [RANGE 5m STEP 1m]
FROM <{LABELS_GRAPH}>
WHERE {{ {{ ?x :topic ?t }} UNION {{ ?x :label ?l }} }}
"""


def test_a_deleted_file_of_static_solutions_is_computed_again(spark, warehouse, caplog):
    """The solutions made of static triples only (here the topics with a label) belong to every window and are
    stored apart from the panes: their file deleted, they are computed again, not left out."""
    write_static(warehouse, LABELS_GRAPH, LABELS)
    engine = Engine(warehouse, spark)
    plan = compile_query(WITH_STATIC_SOLUTIONS)
    graphs = {URIRef(LABELS_GRAPH): LABELS}
    assert_as_the_oracle(engine.evaluate(plan, T0 + 8 * MINUTE, NAME, write=False, panes=ALWAYS),
                         WITH_STATIC_SOLUTIONS, graphs)
    table = pane_table(warehouse)
    (static,) = [f for f in delta.SNAPSHOTS.snapshot(table)[1] if f.partition.get("bucket") is None]
    os.remove(static.uri)
    caplog.set_level(logging.WARNING)
    for minute in (8, 9):
        evaluation = engine.evaluate(plan, T0 + minute * MINUTE, NAME, write=False, panes=ALWAYS)
        assert evaluation.panes is not None
        assert_as_the_oracle(evaluation, WITH_STATIC_SOLUTIONS, graphs)
        assert any(str(URIRef(f"{EX}t2")) == str(row[0]) for row in evaluation.result.rows)
    assert pane_warnings(caplog)


def test_vacuum_discards_a_pane_table_whose_log_cannot_be_read(spark, warehouse, capsys):
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    engine.evaluate(plan, T0 + 8 * MINUTE, NAME, write=False, panes=ALWAYS)
    corrupt_the_first_log_entry(pane_table(warehouse))
    assert main(["vacuum", "--warehouse", str(warehouse.root)]) == 0
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "internal error" not in err
    assert "discarded" in out + err
    assert not delta_tables(warehouse.panes(NAME))
    evaluation = engine.evaluate(plan, T0 + 8 * MINUTE, NAME, write=False, panes=ALWAYS)
    assert evaluation.panes.computed == 5
    assert_as_the_oracle(evaluation)


def test_prune_removes_the_files_written_before_the_instant_it_is_given(spark, warehouse):
    engine = Engine(warehouse, spark)
    plan = compile_query(QUERY)
    engine.evaluate(plan, T0 + 8 * MINUTE, NAME, write=False, panes=ALWAYS)
    assert [p.files for p in prune_panes(warehouse.panes_root, T0 + 2 * HOUR)] == [0]  # event time is no age
    import time

    now = time.time_ns() // 1000 + SECOND
    assert [p.files > 0 for p in prune_panes(warehouse.panes_root, now, dry_run=True)] == [True]
    assert prune_panes(warehouse.panes_root, now)[0].files > 0
    assert not delta.SNAPSHOTS.snapshot(pane_table(warehouse))[1]
    evaluation = engine.evaluate(plan, T0 + 8 * MINUTE, NAME, write=False, panes=ALWAYS)
    assert evaluation.panes.computed == 5
    assert_as_the_oracle(evaluation)

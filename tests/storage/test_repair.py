"""A warehouse whose files vanish under it is never broken for good: a read that finds a referenced file missing
says which table, which files and that ``csparql repair`` repairs it; the other queries keep evaluating; the
repair makes every table readable again, records again the runs the result commits carry and marks the windows
a result table lost for re-evaluation; a forced vacuum is refused while evaluations run. Real Spark (the session
fixture), real Delta tables, the command line as users run it."""

from __future__ import annotations

import os
import threading

import pytest
from deltalake import DeltaTable

from csparql.cli import main
from csparql.engine.runner import Engine, EvaluationFailed
from csparql.core.frontend import compile_query
from csparql.storage import delta, schema
from csparql.storage import stale_windows as sw
from csparql.storage.instants import micros_of
from csparql.storage.repair import LOST_FILES
from csparql.storage.running import leases_folder
from csparql.storage.warehouse import Warehouse
from storage.helpers import iri, write_stream

EX = "http://example.org/"
STREAM = EX + "gates"
MINUTE = 60_000_000
T0 = 1_600_000_200_000_000 - 1_600_000_200_000_000 % (60 * MINUTE)
PASSAGES = f"""PREFIX ex: <{EX}>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <{STREAM}> [RANGE 1m STEP 1m]
WHERE {{ ?gate ex:registers ?car }}
GROUP BY ?gate
"""
TOTALS = f"""PREFIX ex: <{EX}>
SELECT (COUNT(?car) AS ?cars)
FROM STREAM <{STREAM}> [RANGE 1m STEP 1m]
WHERE {{ ?gate ex:registers ?car }}
"""


def cli(capsys, *argv) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return code, out, err


@pytest.fixture
def evaluated(spark, tmp_path):
    """A stream with a car a minute for ten minutes; passages evaluated over the windows ending T0+1m … T0+3m,
    totals over the one ending T0+1m."""
    warehouse = Warehouse(tmp_path / "warehouse")
    write_stream(warehouse, STREAM, [(iri(f"{EX}g{i % 2}"), iri(f"{EX}registers"), iri(f"{EX}car{i}"),
                                      T0 + i * MINUTE + 10_000_000) for i in range(10)])
    engine = Engine(warehouse, spark)
    passages, totals = compile_query(PASSAGES), compile_query(TOTALS)
    for minutes in (1, 2, 3):
        engine.evaluate(passages, T0 + minutes * MINUTE, "passages")
    engine.evaluate(totals, T0 + MINUTE, "totals")
    return warehouse, engine, passages, totals


def lose(table, choose) -> str:
    """Delete the live data file of ``table`` that ``choose`` picks among its add actions (as a vacuum that
    raced the commit adding it would have); returns its name."""
    actions = delta.add_actions(table).to_pylist()
    name = choose(actions)["path"]
    os.remove(table / name)
    return name


def test_lost_files_are_named_other_queries_evaluate_and_repair_makes_the_warehouse_whole(evaluated, capsys):
    warehouse, engine, passages, totals = evaluated
    root = str(warehouse.root)
    results = warehouse.results("passages", "bindings")
    lost_window = T0 + 2 * MINUTE
    lost_runs = lose(warehouse.runs, lambda actions: next(a for a in actions
                                                          if micros_of(a["min.window_end"]) == lost_window))
    lost_result = lose(results, lambda actions: next(a for a in actions
                                                     if micros_of(a["min.window_end"]) == lost_window))

    for table, lost in (("runs", lost_runs), ("passages", lost_result)):
        code, out, err = cli(capsys, "sql", "--warehouse", root, f"SELECT * FROM {table}")
        assert code == 1 and out == "" and len(err.strip().splitlines()) == 1, err
        assert f"cannot read the table {table}" in err and lost in err
        assert f"csparql repair --warehouse {warehouse.root}" in err
    code, _, err = cli(capsys, "results", "--warehouse", root, "passages")
    assert code == 1 and lost_result in err and "csparql repair" in err

    code, out, err = cli(capsys, "repair", "--warehouse", root, "--dry-run")
    lines = {line.split(": ", 1)[0]: line for line in out.splitlines()}
    assert code == 0 and "would drop 1 lost file(s)" in lines["_csparql/runs"]
    assert "would record 1 run(s) again" in lines["_csparql/runs"]  # passages' run of the lost window
    assert "would mark 1 window(s) of passages for re-evaluation" in lines["results/passages/bindings"]
    assert not (results / lost_result).exists() and delta.missing_files(DeltaTable(str(results)), results)

    # the shared runs table lost a file: the other query evaluates all the same
    assert len(engine.evaluate(totals, T0 + 2 * MINUTE, "totals").result) == 1
    # the window whose results are lost fails with a line that names them and the repair, in runs.error too
    with pytest.raises(EvaluationFailed, match="csparql repair"):
        engine.evaluate(passages, lost_window, "passages")

    code, out, err = cli(capsys, "repair", "--warehouse", root)
    assert code == 0, err
    lines = {line.split(": ", 1)[0]: line for line in out.splitlines()}
    assert "dropped 1 lost file(s)" in lines["_csparql/runs"]
    assert "marked 1 window(s) of passages for re-evaluation" in lines["results/passages/bindings"]
    assert lines["results/totals/bindings"].endswith("healthy")

    for table in ("runs", "passages", "stale_windows"):
        assert cli(capsys, "sql", "--warehouse", root, f"SELECT * FROM {table}")[0] == 0
    runs = delta.SNAPSHOTS.rows(warehouse.runs, schema.RUNS).to_pylist()
    succeeded = sorted(micros_of(r["window_end"]) for r in runs
                       if r["query"] == "passages" and r["status"] == "succeeded")
    assert succeeded == [T0 + MINUTE, lost_window, T0 + 3 * MINUTE]  # the lost run is recorded again
    failed = [r for r in runs if r["query"] == "passages" and r["status"] == "failed"]
    assert len(failed) == 1 and "csparql repair" in failed[0]["error"] and lost_result in failed[0]["error"]
    [marked] = sw.stale_windows(warehouse, "passages")
    assert (marked.window_end, marked.status, marked.reason) == (lost_window, sw.PENDING, LOST_FILES)

    # re-evaluated, the window has its results again; the warehouse is healthy
    engine.evaluate(passages, lost_window, "passages")
    code, out, _ = cli(capsys, "sql", "--warehouse", root, "--format", "csv",
                       "SELECT count(DISTINCT window_end) AS windows FROM passages")
    assert out.split() == ["windows", "3"]
    code, out, _ = cli(capsys, "repair", "--warehouse", root)
    assert code == 0 and all(line.endswith("healthy") for line in out.splitlines()[:-1]), out


def test_a_lost_compacted_file_is_restored_from_the_files_it_merged(tmp_path, capsys):
    warehouse = Warehouse(tmp_path / "warehouse")
    rows = [{"query": "q", "window_end": T0 + i * MINUTE, "stream": STREAM, "stream_version": i,
             "committed_at": T0, "reason": "late triples", "late_triples": 1, "detected_at": T0 + i,
             "within_horizon": True, "status": sw.PENDING} for i in range(3)]
    for row in rows:
        sw.append_stale_windows(warehouse, [sw.StaleWindow(**{**row, "window_start": None,
                                                               "lateness_p50_ms": None, "lateness_max_ms": None})])
    assert delta.compact_record_table(warehouse.stale_windows, threshold=3)
    [compacted] = delta.action_column(delta.add_actions(warehouse.stale_windows), "path")
    os.remove(warehouse.stale_windows / compacted)  # as a vacuum racing the compaction's commit would

    code, out, _ = cli(capsys, "repair", "--warehouse", str(warehouse.root))
    assert code == 0 and "restored the 3 file(s) a lost compaction merged (no row lost)" in out
    assert "drop" not in out
    code, out, _ = cli(capsys, "sql", "--warehouse", str(warehouse.root), "--format", "csv",
                       "SELECT count(*) AS n FROM stale_windows")
    assert out.split() == ["n", "3"]


def test_a_forced_vacuum_is_refused_while_evaluations_run_and_the_warehouse_stays_whole(evaluated, capsys):
    """The issue's reproduction: ``vacuum --retain 0h --force`` in a loop while a replay runs."""
    warehouse, engine, passages, _ = evaluated
    root = str(warehouse.root)
    replayed: list = []
    replay = threading.Thread(target=lambda: replayed.extend(
        engine.replay(passages, T0 + MINUTE, T0 + 8 * MINUTE, "passages")))
    replay.start()
    refusals = vacuums = 0
    while replay.is_alive():
        if not any(leases_folder(warehouse).glob("*.json")):
            continue
        code, _, err = cli(capsys, "vacuum", "--warehouse", root, "--retain", "0h", "--force")
        vacuums += 1
        assert code in (0, 1), err
        if code == 1:
            assert "refused: 1 evaluation(s) recorded as running, passages at" in err and "--retain 1h" in err
            refusals += 1
    replay.join()
    assert len(replayed) == 8 and refusals >= 1, (vacuums, refusals)
    assert not any(leases_folder(warehouse).glob("*.json"))  # every lease ends with its evaluation
    assert cli(capsys, "vacuum", "--warehouse", root, "--retain", "0h", "--force")[0] == 0
    code, out, _ = cli(capsys, "repair", "--warehouse", root)
    assert code == 0 and all(line.endswith("healthy") for line in out.splitlines()[:-1]), out
    code, out, _ = cli(capsys, "sql", "--warehouse", root, "--format", "csv",
                       "SELECT count(DISTINCT window_end) AS windows FROM passages")
    assert out.split() == ["windows", "8"]


def test_every_table_sql_shows_is_there_and_empty_on_a_fresh_warehouse(tmp_path, capsys):
    root = str(tmp_path / "warehouse")
    for table, columns in (("runs", schema.RUNS), ("stale_windows", schema.STALE_WINDOWS),
                           ("statistics", schema.STATISTICS)):
        code, out, err = cli(capsys, "sql", "--warehouse", root, "--format", "csv", f"SELECT * FROM {table}")
        assert code == 0, err
        assert out.split() == [",".join(columns.names)]
    assert not (tmp_path / "warehouse").exists()  # reading writes nothing


def test_a_lost_stream_file_fails_the_window_with_the_repair_and_the_repair_says_what_to_ingest_again(
        spark, tmp_path, capsys):
    warehouse = Warehouse(tmp_path / "warehouse")
    gate, registers = iri(f"{EX}g1"), iri(f"{EX}registers")
    write_stream(warehouse, STREAM, [(gate, registers, iri(f"{EX}early"), T0 + 10_000_000)])
    write_stream(warehouse, STREAM, [(gate, registers, iri(f"{EX}later"), T0 + MINUTE + 10_000_000)])
    stream = warehouse.stream(STREAM)
    lost = lose(stream, lambda actions: next(a for a in actions if micros_of(a["min.ts"]) == T0 + 10_000_000))
    engine, passages = Engine(warehouse, spark), compile_query(PASSAGES)

    with pytest.raises(EvaluationFailed, match="csparql repair") as failure:
        engine.evaluate(passages, T0 + MINUTE, "passages")
    assert f"the Delta table at {stream} references 1 data file(s) that are missing" in str(failure.value)
    assert lost.rsplit("/", 1)[-1] in str(failure.value)
    [run] = delta.SNAPSHOTS.rows(warehouse.runs, schema.RUNS).to_pylist()
    assert run["status"] == "failed" and "csparql repair" in run["error"]

    code, out, _ = cli(capsys, "repair", "--warehouse", str(warehouse.root))
    line = next(line for line in out.splitlines() if line.startswith("streams/"))
    assert code == 0 and "dropped 1 lost file(s) from the table, 1 row(s)" in line
    assert "the triples timestamped 2020-09-13T12:00:10Z … 2020-09-13T12:00:10Z are lost: ingest them again" in line
    assert len(engine.evaluate(passages, T0 + 2 * MINUTE, "passages").result) == 1  # the rest reads

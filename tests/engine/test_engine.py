"""The engine over real Delta tables and a real SparkSession: which files a window reads, result tables,
re-evaluation, failure atomicity, output streams, the protocol guard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from rdflib import Literal, URIRef

from csparql.engine.runner import Engine
from csparql.storage.stored import StoredResults
from csparql.core.frontend import compile_query
from csparql.storage import delta
from csparql.storage.statistics import read_table
from csparql.storage.warehouse import Warehouse, output_stream_iri
from csparql.core.windows import from_micros, parse_instant
from storage.helpers import kill_when_signalled, write_static, write_stream

C = "http://linkedurbandata.org/city#"
T = "http://linkedurbandata.org/traffic#"
STREAM = "http://streams.org/tollgates"
HOUR = 3_600_000_000
MINUTE = 60_000_000
DAY = 24 * HOUR
T_END = parse_instant("2010-03-30T12:00:00Z")

PER_STREET = f"""
REGISTER QUERY PerStreet COMPUTED EVERY 1h AS
PREFIX c: <{C}>
PREFIX t: <{T}>
SELECT ?street ?passages
FROM STREAM <{STREAM}> [RANGE 1h STEP 1h]
WHERE {{ ?tollgate t:registers ?car . ?tollgate c:placedIn ?street . }}
AGGREGATE {{ (?passages, COUNT, {{?street}}) }}
"""


def registrations(start: int, end: int, every: int = 5 * MINUTE, offset: int = 0):
    """One registration per tollgate every ``every`` microseconds in (start, end]."""
    triples = []
    tick = start + every
    index = offset
    while tick <= end:
        gate = URIRef(f"{C}T-{index % 3}")
        triples.append((gate, URIRef(T + "registers"), URIRef(f"{C}car{index}"), tick))
        tick += every
        index += 1
    return triples


CITY = [(URIRef(f"{C}T-{i}"), URIRef(C + "placedIn"), Literal(f"street {i % 2}")) for i in range(3)]


def warehouse_with_history(root: Path, days: int) -> Warehouse:
    """A warehouse whose stream holds ``days`` days of registrations ending at T_END (the same last day)."""
    warehouse = Warehouse(root)
    write_static(warehouse, None, CITY)
    for day in range(days, 0, -1):
        day_start = T_END - day * DAY
        write_stream(warehouse, STREAM, registrations(day_start, day_start + DAY), first_arrival=day * 10_000)
    return warehouse


def test_the_same_hour_reads_the_same_files_with_one_day_or_thirty_days_of_history(spark, tmp_path):
    plan = compile_query(PER_STREET)
    short = warehouse_with_history(tmp_path / "one-day", 1)
    long = warehouse_with_history(tmp_path / "thirty-days", 30)
    outcomes = []
    for warehouse in (short, long):
        evaluation = Engine(warehouse, spark).evaluate(plan, T_END - 3 * HOUR, "PerStreet")
        outcomes.append(evaluation)
    a, b = outcomes
    assert a.result.rows and sorted(a.result.rows) == sorted(b.result.rows)
    scan_a, scan_b = a.scans[URIRef(STREAM)], b.scans[URIRef(STREAM)]
    assert scan_a.files == scan_b.files and scan_a.rows == scan_b.rows
    buckets = lambda scan: sorted(Path(uri).parent.name for uri in scan.file_uris)  # noqa: E731
    assert buckets(scan_a) == buckets(scan_b) == ["bucket=20100330T08", "bucket=20100330T09"]
    # the runs table says the same
    for warehouse in (short, long):
        run = read_table(warehouse.runs).to_pylist()[-1]
        assert json.loads(run["files_read"]) == {STREAM: 2}
        assert run["status"] == "succeeded"
    files = lambda w: len(delta.live_files(delta.open_table(w.stream(STREAM)), w.stream(STREAM)))  # noqa: E731
    assert files(long) >= 30 * 24 and files(short) <= 25  # thirty times the history, the same two files read


def test_evaluating_a_window_twice_leaves_one_copy_with_typed_columns(spark, tmp_path):
    warehouse = warehouse_with_history(tmp_path / "w", 1)
    engine = Engine(warehouse, spark)
    plan = compile_query(PER_STREET)
    first = engine.evaluate(plan, T_END, "PerStreet")
    second = engine.evaluate(plan, T_END, "PerStreet")
    assert first.rows_written == second.rows_written > 0
    table = read_table(warehouse.results("PerStreet", "bindings"))
    assert table.num_rows == first.rows_written
    assert table.schema.field("passages").type == pa.int64()
    assert table.schema.field("street").type == pa.string()
    stored = list(StoredResults(warehouse, "PerStreet").windows())
    assert len(stored) == 1
    _, window_end, result = stored[0]
    assert window_end == T_END
    assert sorted(result.rows) == sorted(first.result.rows)
    runs = read_table(warehouse.runs).to_pylist()
    assert [r["status"] for r in runs] == ["succeeded", "succeeded"]


def test_an_evaluation_optimizes_its_plan_and_decides_its_panes_once_and_the_next_over_the_same_statistics_reuses_them(
        spark, tmp_path, monkeypatch):
    from csparql.engine import evaluate, runner

    warehouse = warehouse_with_history(tmp_path / "w", 1)
    engine = Engine(warehouse, spark)
    plan = compile_query(PER_STREET)
    optimized, decided = [], []
    optimize, pane_plan = runner.optimize, runner.pane_plan
    for module in (runner, evaluate):  # the engine's, and compile_plan's when it is handed a plan not optimized
        monkeypatch.setattr(module, "optimize", lambda *args: optimized.append(1) or optimize(*args))
    monkeypatch.setattr(runner, "pane_plan", lambda *args: decided.append(1) or pane_plan(*args))
    first = engine.evaluate(plan, T_END, "PerStreet", write=False)  # asks for panes (refused), then compiles
    assert len(optimized) == 1 and len(decided) == 1
    second = engine.evaluate(plan, T_END, "PerStreet", write=False)
    assert len(optimized) == 1 and len(decided) == 1 and sorted(second.result.rows) == sorted(first.result.rows)
    write_stream(warehouse, STREAM, [(URIRef("urn:x"), URIRef("urn:p"), Literal(1), T_END)])  # new statistics
    engine.evaluate(plan, T_END, "PerStreet", write=False)
    assert len(optimized) == 2


KILLER = textwrap.dedent(
    """
    import os, sys, time
    from csparql.engine.runner import Engine
    from csparql.core.frontend import compile_query
    from csparql.storage import delta
    from csparql.storage.warehouse import Warehouse

    signal_file = sys.argv[2]

    def hang(*args, **kwargs):
        open(signal_file, "w").close()  # the results are computed; the commit would come next
        time.sleep(600)

    delta.write_on_version = hang
    plan = compile_query(open(sys.argv[3]).read())
    Engine(Warehouse(sys.argv[1]), master="local[1]").evaluate(plan, int(sys.argv[4]), "PerStreet")
    """
)


def test_killing_an_evaluation_before_its_commit_keeps_the_earlier_results(spark, tmp_path):
    warehouse = warehouse_with_history(tmp_path / "w", 1)
    engine = Engine(warehouse, spark)
    plan = compile_query(PER_STREET)
    before = engine.evaluate(plan, T_END, "PerStreet")
    version_before = DeltaTable(str(warehouse.results("PerStreet", "bindings"))).version()
    # More data arrives for the window, and a new evaluation is killed just before it commits.
    write_stream(warehouse, STREAM, registrations(T_END - HOUR, T_END, every=7 * MINUTE, offset=900), first_arrival=99_000)
    script, signal_file, query_file = tmp_path / "kill.py", tmp_path / "ready", tmp_path / "q.rq"
    script.write_text(KILLER)
    query_file.write_text(PER_STREET)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "plugins")}
    child = subprocess.Popen(
        [sys.executable, str(script), str(warehouse.root), str(signal_file), str(query_file), str(T_END)],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )
    try:
        kill_when_signalled(child, signal_file, "its commit")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert DeltaTable(str(warehouse.results("PerStreet", "bindings"))).version() == version_before
    _, _, stored = next(StoredResults(warehouse, "PerStreet").windows())
    assert sorted(stored.rows) == sorted(before.result.rows)
    # the next run succeeds and sees the new data
    after = engine.evaluate(plan, T_END, "PerStreet")
    assert sorted(after.result.rows) != sorted(before.result.rows)
    _, _, stored = next(StoredResults(warehouse, "PerStreet").windows())
    assert sorted(stored.rows) == sorted(after.result.rows)


BUSY_GATES = f"""REGISTER STREAM BusyGates COMPUTED EVERY 1h AS
PREFIX t: <{T}>
CONSTRUCT {{ ?tollgate t:busy ?passages }}
FROM STREAM <{STREAM}> [RANGE 1h STEP 1h]
WHERE {{ ?tollgate t:registers ?car }}
AGGREGATE {{ (?passages, COUNT, {{?tollgate}}) }}"""

KILLED_AFTER_RESULTS = textwrap.dedent(
    """
    import sys, time
    from csparql.engine import runner
    from csparql.engine.catalog import Catalog
    from csparql.core.frontend import compile_query
    from csparql.storage.warehouse import Warehouse

    warehouse, signal_file, query_file, at, name, point = sys.argv[1:]

    def hang(*args, **kwargs):
        open(signal_file, "w").close()  # the results are committed; what comes next never happens
        time.sleep(600)

    if point == "statistics":
        Catalog.record_statistics = hang
    elif point == "watermark":
        runner.advance_watermark = hang
    else:
        runner.Engine._append_runs = hang
    plan = compile_query(open(query_file).read())
    runner.Engine(Warehouse(warehouse), master="local[1]").evaluate(plan, int(at), name)
    """
)

KILL_POINTS = [("PerStreet", PER_STREET, "runs"), ("BusyGates", BUSY_GATES, "statistics"),
               ("BusyGates", BUSY_GATES, "watermark"), ("BusyGates", BUSY_GATES, "runs")]


def test_a_run_killed_after_its_result_commit_is_recorded_by_the_next_evaluation(spark, tmp_path):
    """Killed at each point after the result commit (before the runs commit; for an output stream also before
    its statistics and its watermark), an evaluation's results are live; the query's next evaluation records
    the lost run, and what an output stream's readers need (statistics, watermark)."""
    script = tmp_path / "kill.py"
    script.write_text(KILLED_AFTER_RESULTS)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "plugins")}
    children = []
    try:
        for index, (name, text, point) in enumerate(KILL_POINTS):  # killed in parallel: one JVM start for all
            folder = tmp_path / f"{name}-{point}"
            warehouse = warehouse_with_history(folder / "w", 1)
            (folder / "q.rq").write_text(text)
            signal_file = folder / "ready"
            child = subprocess.Popen(
                [sys.executable, str(script), str(warehouse.root), str(signal_file), str(folder / "q.rq"), str(T_END),
                 name, point],
                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
            )
            children.append((name, text, point, warehouse, signal_file, child))
        deadline = time.time() + 300
        for name, _, point, _, signal_file, child in children:
            while not signal_file.exists():
                assert child.poll() is None, f"{name} ({point}) ended before its result commit"
                assert time.time() < deadline, f"{name} ({point}) never reached its result commit"
                time.sleep(0.2)
            os.killpg(child.pid, signal.SIGKILL)
            child.wait(30)
    finally:
        for *_, child in children:
            if child.poll() is None:
                os.killpg(child.pid, signal.SIGKILL)
    for name, text, point, warehouse, _, _ in children:
        plan = compile_query(text)
        stream = str(output_stream_iri(name))
        results = warehouse.stream(stream) if name == "BusyGates" else warehouse.results(name, "bindings")
        live = read_table(results).num_rows
        assert live > 0, f"{name} ({point}): the killed evaluation's results are live"
        runs = read_table(warehouse.runs).to_pylist() if delta.exists(warehouse.runs) else []
        assert not [r for r in runs if r["query"] == name], f"{name} ({point}): killed before its runs commit"
        # the next evaluation (of another window) records the killed one's run first
        Engine(warehouse, spark).evaluate(plan, T_END - HOUR, name)
        runs = [r for r in read_table(warehouse.runs).to_pylist() if r["query"] == name]
        killed = [r for r in runs if r["window_end"] == from_micros(T_END)]
        assert len(killed) == 1, f"{name} ({point}): {runs}"
        assert killed[0]["status"] == "succeeded" and killed[0]["rows_written"] == live
        assert json.loads(killed[0]["files_read"]) == {STREAM: 2}
        assert len(runs) == 2
        if name == "BusyGates":
            from csparql.storage.statistics import read_statistics
            from csparql.storage.watermarks import watermark

            assert watermark(warehouse, stream) == T_END, point
            assert read_statistics(warehouse).predicate_counts.get(URIRef(stream), {}).get(URIRef(T + "busy")), point
        # and recording it again adds nothing
        Engine(warehouse, spark).evaluate(plan, T_END - HOUR, name)
        assert len([r for r in read_table(warehouse.runs).to_pylist() if r["query"] == name]) == 3


def test_a_register_stream_query_feeds_another_query(spark, tmp_path):
    warehouse = warehouse_with_history(tmp_path / "w", 1)
    engine = Engine(warehouse, spark)
    producer = compile_query(
        f"""REGISTER STREAM BusyGates COMPUTED EVERY 1h AS
        PREFIX t: <{T}>
        CONSTRUCT {{ ?tollgate t:busy ?passages }}
        FROM STREAM <{STREAM}> [RANGE 1h STEP 1h]
        WHERE {{ ?tollgate t:registers ?car }}
        AGGREGATE {{ (?passages, COUNT, {{?tollgate}}) }}"""
    )
    produced = engine.evaluate(producer, T_END, "BusyGates")
    assert produced.rows_written == 3
    engine.evaluate(producer, T_END, "BusyGates")  # again: still one copy in the output stream
    output = output_stream_iri("BusyGates")
    stream_rows = read_table(warehouse.stream(str(output))).to_pylist()
    assert len(stream_rows) == 3
    assert {r["ts"] for r in stream_rows} == {from_micros(T_END)}  # every output triple carries t_f
    consumer = compile_query(
        f"""REGISTER QUERY Busiest AS
        PREFIX t: <{T}>
        SELECT ?tollgate ?n FROM STREAM <{output}> [RANGE 1h STEP 1h]
        WHERE {{ ?tollgate t:busy ?n FILTER(?n >= 4) }}"""
    )
    consumed = engine.evaluate(consumer, T_END, "Busiest")
    assert consumed.result.rows and all(int(n) >= 4 for _, n in consumed.result.rows)
    counts = {str(gate): int(n) for gate, _, n in produced.result.triples}
    assert {str(gate): int(n) for gate, n in consumed.result.rows} == {g: n for g, n in counts.items() if n >= 4}


def test_tables_with_deletion_vectors_or_column_mapping_are_refused(tmp_path):
    data = pa.table({"x": [1, 2]})
    for name, configuration, feature in (
        ("dv", {"delta.enableDeletionVectors": "true"}, "deletionVectors"),
        ("cm", {"delta.columnMapping.mode": "name"}, "columnMapping"),
    ):
        path = tmp_path / name
        write_deltalake(str(path), data, configuration=configuration)
        with pytest.raises(delta.TableFeatureError) as caught:
            delta.open_table(path)
        assert feature in str(caught.value) and str(path) in str(caught.value)
    plain = tmp_path / "plain"
    write_deltalake(str(plain), data)
    assert delta.open_table(plain).version() == 0


OLD_RUNS = pa.schema([f for f in __import__("csparql.storage.schema", fromlist=["RUNS"]).RUNS if f.name != "query_version"])
OLD_ANSWERS = pa.schema([f for f in __import__("csparql.storage.schema", fromlist=["ANSWERS"]).ANSWERS
                         if f.name != "query_version"])


def test_tables_written_before_query_versions_gain_the_column_and_keep_their_rows(spark, tmp_path):
    """Schema evolution: a runs table and result tables made by an older csparql (no ``query_version``)."""
    warehouse = warehouse_with_history(tmp_path / "old", 1)
    plan = compile_query(PER_STREET)
    old_at = T_END - 2 * HOUR
    Engine(warehouse, spark).evaluate(plan, old_at, "PerStreet")
    # Rewrite what that evaluation wrote as an older csparql would have: without the query_version column.
    for path in (warehouse.runs, warehouse.results("PerStreet", "bindings")):
        table = read_table(path).drop_columns(["query_version"])
        write_deltalake(str(path), table, mode="overwrite", schema_mode="overwrite")
        assert "query_version" not in DeltaTable(str(path)).schema().to_arrow().names
    ask = compile_query(f"REGISTER QUERY Busy AS ASK FROM STREAM <{STREAM}> [RANGE 1h STEP 1h] WHERE {{ ?s ?p ?o }}")
    old_answer = pa.Table.from_pylist([{"window_start": from_micros(old_at - HOUR), "window_end": from_micros(old_at),
                                        "answer": False}], schema=OLD_ANSWERS)
    delta.append(warehouse.results("Busy", "answers"), old_answer, OLD_ANSWERS)

    engine = Engine(warehouse, spark)
    engine.evaluate(plan, T_END - HOUR, "PerStreet", version="v-new")
    engine.evaluate(ask, T_END - HOUR, "Busy", version="v-ask")

    runs = read_table(warehouse.runs).sort_by("started_at").to_pylist()
    assert [(r["query"], r["query_version"]) for r in runs] == [("PerStreet", None), ("PerStreet", "v-new"), ("Busy", "v-ask")]
    bindings = read_table(warehouse.results("PerStreet", "bindings")).to_pylist()
    versions = {(r["window_end"], r["query_version"]) for r in bindings}
    assert versions == {(from_micros(old_at), None), (from_micros(T_END - HOUR), "v-new")}
    stored = [(end, len(result.rows)) for _, end, result in StoredResults(warehouse, "PerStreet").windows()]
    assert [end for end, _ in stored] == [old_at, T_END - HOUR]
    assert stored[0][1] == stored[1][1] > 0  # the same traffic every hour
    answers = read_table(warehouse.results("Busy", "answers")).sort_by("window_end").to_pylist()
    assert [(a["answer"], a["query_version"]) for a in answers] == [(False, None), (True, "v-ask")]


def test_optimized_plans_keep_a_pane_decision_while_other_statistics_optimize_to_the_same_plan(monkeypatch):
    """Other statistics that optimize a query to the same plan keep its pane decision (decided once); statistics
    that optimize it to another plan decide again, on that plan."""
    from rdflib import URIRef as IRI

    from csparql.core.optimizer.statistics import SourceStatistics
    from csparql.engine import runner

    decided = []
    pane_plan = runner.pane_plan
    monkeypatch.setattr(runner, "pane_plan", lambda optimized: decided.append(optimized) or pane_plan(optimized))
    plan = compile_query(PER_STREET)
    stream = IRI(STREAM)
    counts = [SourceStatistics({stream: {IRI(f"{T}registers"): n, IRI(f"{C}placedIn"): n}}) for n in (10, 20)]
    plans = runner.OptimizedPlans()
    first = plans.optimized(plan, counts[0])
    decision = plans.pane_decision(plan, first)
    second = plans.optimized(plan, counts[1])
    assert second is first and plans.pane_decision(plan, second) is decision and len(decided) == 1
    empty = SourceStatistics({stream: {}})  # no pattern can match: another plan
    third = plans.optimized(plan, empty)
    assert third != first
    assert plans.pane_decision(plan, third) == pane_plan(third) and decided[-1] is third and len(decided) == 2

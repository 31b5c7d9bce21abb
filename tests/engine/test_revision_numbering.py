"""Revisions are unique per (query, window) and every one is readable: a run recovered after its process was
killed between its result commit and its runs commit can be read with ``csparql results --revision``, and two
processes replaying one query at the same time number their evaluations of a window 0 and 1 and leave one copy
of its rows. Real child processes, each with its own Spark, over one warehouse of real Delta tables."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

from deltalake import DeltaTable

import csparql
from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query
from csparql.ingest.ingest import ingest_stream
from csparql.storage.statistics import read_table
from csparql.storage.tables import RUN_METADATA
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import format_instant
from storage.helpers import kill_when_signalled, wait_until_ready
from engine.test_revisions import EX, MINUTE, QUERY, STREAM, T0, cars, nquads

CHILD_ENVIRONMENT = {**os.environ, "PYTHONPATH": str(Path(csparql.__file__).resolve().parents[1])}
"""The children import the csparql this test imports."""

KILLED_BEFORE_ITS_RUNS_COMMIT = textwrap.dedent(
    """
    import sys, time
    from csparql.engine import runner
    from csparql.core.frontend import compile_query
    from csparql.storage.warehouse import Warehouse

    warehouse, signal_file, query_file, at = sys.argv[1:]

    def hang(*args, **kwargs):
        open(signal_file, "w").close()  # the results are committed; the runs commit never happens
        time.sleep(600)

    runner.Engine._append_runs = hang
    plan = compile_query(open(query_file).read())
    runner.Engine(Warehouse(warehouse), master="local[1]").evaluate(plan, int(at), "passages")
    """
)

REPLAYER = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from csparql.engine.runner import Engine
    from csparql.core.frontend import compile_query
    from csparql.runtime.session import spark_session
    from csparql.storage.warehouse import Warehouse

    warehouse, query_file, start, end, go = sys.argv[1:]
    engine = Engine(Warehouse(warehouse), spark_session("local[1]"))
    engine.spark.range(1).count()
    plan = compile_query(open(query_file).read())
    print("ready", flush=True)
    while not Path(go).exists():
        time.sleep(0.02)
    for _ in engine.replay(plan, int(start), int(end), "passages"):
        pass
    print("done", flush=True)
    os._exit(0)  # no interpreter teardown: the work is done (see test_revision_concurrency)
    """
)


def landed(spark, tmp_path) -> Warehouse:
    """A warehouse with one stream: a car at each of three gates, in the windows ending T0+1m, T0+2m, T0+3m."""
    warehouse = Warehouse(tmp_path / "warehouse")
    nquads(tmp_path / "cars.nq", [("g1", "c1", T0 + 10_000_000), ("g1", "c2", T0 + MINUTE + 10_000_000),
                                  ("g2", "c3", T0 + 2 * MINUTE + 10_000_000)])
    ingest_stream(spark, warehouse, STREAM, [tmp_path / "cars.nq"])
    (tmp_path / "passages.rq").write_text(QUERY, encoding="utf-8")
    return warehouse


def results_command(warehouse: Warehouse, *options: str) -> list[dict]:
    """The windows ``csparql results passages --format json`` prints with ``options``."""
    done = subprocess.run([str(Path(sys.executable).with_name("csparql")), "results", "passages", "--format", "json",
                           "--warehouse", str(warehouse.root), *options],
                          capture_output=True, text=True, timeout=120, env=CHILD_ENVIRONMENT)
    assert done.returncode == 0, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def shown_cars(windows: list[dict]) -> dict[str, dict[str, str]]:
    return {w["window_end"]: {b["gate"]["value"]: b["cars"]["value"] for b in w["results"]["results"]["bindings"]}
            for w in windows}


def test_a_run_recovered_after_a_kill_between_its_two_commits_is_readable_as_its_revision(spark, tmp_path):
    warehouse = landed(spark, tmp_path)
    killed = T0 + 2 * MINUTE
    (tmp_path / "kill.py").write_text(KILLED_BEFORE_ITS_RUNS_COMMIT, encoding="utf-8")
    signal_file = tmp_path / "committed"
    child = subprocess.Popen([sys.executable, str(tmp_path / "kill.py"), str(warehouse.root), str(signal_file),
                              str(tmp_path / "passages.rq"), str(killed)], env=CHILD_ENVIRONMENT,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
    try:
        kill_when_signalled(child, signal_file, "its result commit")
    finally:
        if child.poll() is None:
            os.killpg(child.pid, signal.SIGKILL)
    assert read_table(warehouse.results("passages", "bindings")).num_rows == 1  # the killed run's results are live

    # the next evaluation, of another window, records the killed run
    Engine(warehouse, spark).evaluate(compile_query(QUERY), T0 + MINUTE, "passages")
    recovered = [r for r in read_table(warehouse.runs).to_pylist() if r["window_end"].minute == 2]
    assert len(recovered) == 1
    recovered = recovered[0]
    history = DeltaTable(str(warehouse.results("passages", "bindings"))).history()
    carrying = [c["version"] for c in history if recovered["run_id"] in c.get(RUN_METADATA, "")]
    assert (recovered["revision"], recovered["result_version"]) == (0, carrying[0])

    expected = {format_instant(T0 + MINUTE): {EX + "g1": "1"}, format_instant(killed): {EX + "g1": "1"}}
    assert shown_cars(results_command(warehouse, "--revision", "0")) == expected
    assert shown_cars(results_command(warehouse)) == expected


def test_two_processes_replaying_one_query_at_once_number_its_windows_0_and_1_both_readable(spark, tmp_path):
    warehouse = landed(spark, tmp_path)
    start, end = T0 + MINUTE, T0 + 3 * MINUTE
    go = tmp_path / "go"
    replayers = [subprocess.Popen([sys.executable, "-c", REPLAYER, str(warehouse.root), str(tmp_path / "passages.rq"),
                                   str(start), str(end), str(go)], env=CHILD_ENVIRONMENT,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for _ in range(2)]
    try:
        for replayer in replayers:
            wait_until_ready(replayer)
        go.touch()
        for replayer in replayers:
            out, err = replayer.communicate(timeout=300)
            assert replayer.returncode == 0 and "done" in out, f"{out}\n{err}"
    finally:
        for replayer in replayers:
            replayer.kill()

    runs = read_table(warehouse.runs).to_pylist()
    assert len({r["run_id"] for r in runs}) == len(runs) == 6  # each run recorded once
    by_window = Counter((r["window_end"].minute, r["revision"]) for r in runs if r["status"] == "succeeded")
    assert by_window == Counter({(minute, revision): 1 for minute in (1, 2, 3) for revision in (0, 1)})
    assert all(r["result_version"] is not None for r in runs)
    rows = read_table(warehouse.results("passages", "bindings")).to_pylist()
    assert sorted((r["window_end"].minute, r["revision"]) for r in rows) == [(1, 1), (2, 1), (3, 1)]  # one copy

    expected = {T0 + MINUTE: Counter({(EX + "g1", 1): 1}), T0 + 2 * MINUTE: Counter({(EX + "g1", 1): 1}),
                end: Counter({(EX + "g2", 1): 1})}
    assert cars(warehouse, "passages", revision=0) == cars(warehouse, "passages", revision=1) == expected
    assert cars(warehouse, "passages") == expected
    assert shown_cars(results_command(warehouse, "--revision", "0")) == shown_cars(
        results_command(warehouse, "--revision", "1")) == {
        format_instant(e): {gate: str(n) for (gate, n) in counts} for e, counts in expected.items()}

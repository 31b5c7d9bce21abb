"""Late triples landing while their window is being evaluated, or revised, in another process: whatever the
order in which the two finish, the window ends up stale (found by the ingest's check or by the evaluation's own)
and, once revised, holds one copy of the right results. Two real processes, each with its own Spark, over one
warehouse of real Delta tables; the evaluating process does what a query's ``evaluate_window`` task and a
revision DAG's ``revise_stale_windows`` task do (``csparql.orchestration``), without Airflow."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from collections import Counter

import pytest

from csparql.deploy.plan import deployment_of
from csparql.deploy.registration import register_text
from csparql.deploy.revisions import detect_after_commits, mark_revised, pending_windows
from csparql.ingest.ingest import ingest_stream
from csparql.engine.runner import Engine
from csparql.storage import revisions as rv
from csparql.storage.statistics import read_table
from engine.test_revisions import EX, MINUTE, QUERY, STREAM, T0, cars, nquads, settings_for
from storage.helpers import wait_until_ready

WORKER = textwrap.dedent('''
    import sys, time
    from pathlib import Path
    from csparql.deploy.plan import deployment_of
    from csparql.deploy.revisions import check_evaluation, mark_revised, pending_windows
    from csparql.deploy.settings import Settings
    from csparql.engine.runner import Engine
    from csparql.runtime.session import spark_session
    from csparql.storage import revisions as rv

    mode, registry, warehouse, at, go = sys.argv[1:]
    settings = Settings.from_environment({"CSPARQL_REGISTRY": registry, "CSPARQL_WAREHOUSE": warehouse,
                                          "CSPARQL_REVISION_HORIZON": "3650d"})
    deployment = deployment_of(Path(registry) / "passages.rq", settings)
    engine = Engine(settings.warehouse, spark_session("local[1]"))
    engine.spark.range(1).count()
    print("ready", flush=True)
    while not Path(go).exists():
        time.sleep(0.05)
    started = time.time_ns() // 1000
    pending = pending_windows(settings, "passages") if mode == "revise" else []
    engine.evaluate(deployment.plan, int(at), "passages", version=deployment.version)
    if pending:
        revision = rv.evaluated_windows(settings.warehouse, {"passages"})["passages"][int(at)].revision
        mark_revised(settings, pending[0].stale, revision)
    check_evaluation(settings, deployment, int(at), started)
    print("done", flush=True)
    # Ends without the interpreter's teardown: once in several runs on a loaded machine, a native thread
    # aborted the process there ("terminate called without an active exception") after the work was done.
    import os
    os._exit(0)
''')


@pytest.mark.parametrize("mode", ["evaluate", "revise"])
def test_late_triples_landing_while_their_window_is_evaluated_end_in_one_copy_of_the_right_results(
        mode, spark, tmp_path):
    settings = settings_for(tmp_path, CSPARQL_REVISION_HORIZON="3650d")
    (tmp_path / "registry").mkdir()
    register_text(QUERY, settings, name="passages")
    deployment = deployment_of(settings.registry / "passages.rq", settings)
    window = T0 + 2 * MINUTE
    nquads(tmp_path / "on-time.nq", [("g1", "c1", window - 50_000_000), ("g2", "c2", window - 40_000_000)])
    ingest_stream(spark, settings.warehouse, STREAM, [tmp_path / "on-time.nq"])
    engine = Engine(settings.warehouse, spark)
    engine.evaluate(deployment.plan, window, "passages", version=deployment.version)
    if mode == "revise":  # a first late triple: the window is pending when the worker revises it
        before = rv.table_version(settings.warehouse.stream(STREAM))
        nquads(tmp_path / "late0.nq", [("g2", "late0", window - 30_000_000)])
        ingest_stream(spark, settings.warehouse, STREAM, [tmp_path / "late0.nq"])
        assert [p.window_end for p in (detect_after_commits(settings, STREAM, before) and
                                       pending_windows(settings, "passages"))] == [window]

    go = tmp_path / "go"
    worker = subprocess.Popen([sys.executable, "-c", WORKER, mode, str(settings.registry), str(settings.warehouse.root),
                               str(window), str(go)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_ready(worker)
        before = rv.table_version(settings.warehouse.stream(STREAM))
        nquads(tmp_path / "late.nq", [("g1", "late1", window - 20_000_000), ("g3", "late2", window - 10_000_000)])
        go.touch()
        time.sleep(0.5)  # the worker has started its evaluation
        ingest_stream(spark, settings.warehouse, STREAM, [tmp_path / "late.nq"])
        detect_after_commits(settings, STREAM, before)
        out, err = worker.communicate(timeout=300)
        assert worker.returncode == 0 and "done" in out, f"{out}\n{err}"
    finally:
        worker.kill()

    # the revision the revision DAG would run now
    for pending in pending_windows(settings, "passages"):
        engine.evaluate(deployment.plan, pending.window_end, "passages", version=deployment.version)
        revision = rv.evaluated_windows(settings.warehouse, {"passages"})["passages"][pending.window_end].revision
        mark_revised(settings, pending.stale, revision)
    assert pending_windows(settings, "passages") == []
    expected = Counter({(EX + "g1", 2): 1, (EX + "g2", 2 if mode == "revise" else 1): 1, (EX + "g3", 1): 1})
    assert cars(settings.warehouse, "passages") == {window: expected}
    rows = read_table(settings.warehouse.results("passages", "bindings")).to_pylist()
    assert len(rows) == 3 and len({r["revision"] for r in rows}) == 1  # one copy, from one evaluation

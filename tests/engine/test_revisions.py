"""Late triples: which evaluated windows a stream commit makes stale, the revision horizon, and revisions
numbered in the runs and result tables with the earlier ones readable through Delta time travel (real Spark,
real Delta tables, the registry and the detection of ``csparql.deploy.revisions``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from csparql.deploy.plan import deployment_of
from csparql.deploy.registration import register_text
from csparql.deploy.revisions import check_evaluation, detect_after_commits, mark_revised, pending_windows
from csparql.deploy.settings import Settings
from csparql.ingest.ingest import ingest_stream
from csparql.engine.runner import Engine
from csparql.storage.stored import StoredResults
from csparql.storage import revisions as rv
from csparql.storage import stale_windows as sw
from csparql.storage.statistics import read_table
from csparql.core.windows import format_instant

EX = "http://example.org/"
STREAM = EX + "gates"
MINUTE = 60_000_000
T0 = 1_600_000_200_000_000 - 1_600_000_200_000_000 % (60 * MINUTE)
QUERY = f"""REGISTER QUERY Passages AS
PREFIX ex: <{EX}>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <{STREAM}> [RANGE 1m STEP 1m]
WHERE {{ ?gate ex:registers ?car }}
GROUP BY ?gate
"""


def nquads(path, triples) -> None:
    """Write (gate, car, µs) triples as timestamped N-Quads."""
    path.write_text("".join(
        f'<{EX}{g}> <{EX}registers> <{EX}{c}> "{format_instant(ts)}"^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n'
        for g, c, ts in triples), encoding="utf-8")


def settings_for(root, **environment) -> Settings:
    return Settings.from_environment({"CSPARQL_REGISTRY": str(root / "registry"),
                                      "CSPARQL_WAREHOUSE": str(root / "warehouse"), **environment})


def cars(warehouse, name: str, revision: int | None = None) -> dict[int, Counter]:
    return {end: Counter((str(row[0]), int(row[1])) for row in result.rows)
            for _, end, result in StoredResults(warehouse, name).windows(revision=revision)}


@pytest.fixture
def evaluated(spark, tmp_path):
    """A registered query and three of its windows, (T0, T0+1m] … (T0+2m, T0+3m], evaluated."""
    settings = settings_for(tmp_path, CSPARQL_REVISION_HORIZON="2m")
    (tmp_path / "registry").mkdir()
    register_text(QUERY, settings, name="passages")
    deployment = deployment_of(settings.registry / "passages.rq", settings)
    nquads(tmp_path / "on-time.nq", [("g1", "c1", T0 + 10_000_000), ("g1", "c2", T0 + MINUTE + 10_000_000),
                                     ("g2", "c3", T0 + 2 * MINUTE + 10_000_000)])
    ingest_stream(spark, settings.warehouse, STREAM, [tmp_path / "on-time.nq"])
    engine = Engine(settings.warehouse, spark)
    for minutes in (1, 2, 3):
        engine.evaluate(deployment.plan, T0 + minutes * MINUTE, "passages", version=deployment.version)
    return settings, deployment, engine


def test_a_commit_makes_the_evaluated_windows_its_triples_fall_in_stale_inside_or_beyond_the_horizon(
        evaluated, spark, tmp_path):
    settings, deployment, engine = evaluated
    before = rv.table_version(settings.warehouse.stream(STREAM))
    nquads(tmp_path / "late.nq", [("g1", "late1", T0 + 30_000_000), ("g2", "late2", T0 + 2 * MINUTE + 20_000_000),
                                  ("g2", "late3", T0 + 2 * MINUTE + 40_000_000),
                                  ("g3", "future", T0 + 9 * MINUTE)])  # no window evaluated there yet
    report = ingest_stream(spark, settings.warehouse, STREAM, [tmp_path / "late.nq"])
    now = T0 + 3 * MINUTE + 90_000_000  # 2.5 minutes after the first window's end, 1.5 after the third's

    stale = detect_after_commits(settings, STREAM, before, now=now)

    assert [(w.window_end, w.late_triples, w.within_horizon, w.status) for w in stale] == [
        (T0 + MINUTE, 1, False, sw.BEYOND_HORIZON), (T0 + 3 * MINUTE, 2, True, sw.PENDING)]
    third = stale[1]
    committed = sw.stream_commits(settings.warehouse.stream(STREAM), before)[0]
    assert (third.query, third.stream, third.stream_version, third.reason) == (
        "passages", STREAM, report.version, sw.LATE_TRIPLES)
    # how late: the commit's time minus each triple's event time, p50 and max (ms)
    assert (third.lateness_p50_ms, third.lateness_max_ms) == (
        (committed.committed_at - T0 - 2 * MINUTE - 40_000_000) // 1000,
        (committed.committed_at - T0 - 2 * MINUTE - 20_000_000) // 1000)
    assert sw.stale_windows(settings.warehouse, "passages") == stale  # recorded
    assert detect_after_commits(settings, STREAM, before, now=now) == []  # once

    # only the window inside the horizon is revised: its evaluation is revision 1, the others stay revision 0
    old = cars(settings.warehouse, "passages")
    pending = pending_windows(settings, "passages")
    assert [p.window_end for p in pending] == [T0 + 3 * MINUTE]
    evaluation = engine.evaluate(deployment.plan, T0 + 3 * MINUTE, "passages", version=deployment.version)
    revision = rv.evaluated_windows(settings.warehouse, {"passages"})["passages"][T0 + 3 * MINUTE].revision
    assert evaluation.revision == revision  # the evaluation says which revision it wrote, as its run records
    assert evaluation.output_version == rv.table_version(settings.warehouse.results("passages", "bindings"))
    mark_revised(settings, pending[0].stale, revision)
    assert revision == 1 and pending_windows(settings, "passages") == []
    assert [w.status for w in sw.stale_windows(settings.warehouse, "passages")] == [sw.BEYOND_HORIZON, sw.REVISED]

    current = cars(settings.warehouse, "passages")
    assert current == {**old, T0 + 3 * MINUTE: Counter({(EX + "g2", 3): 1})}  # one copy per window
    results = read_table(settings.warehouse.results("passages", "bindings")).to_pylist()
    assert sorted((r["window_end"].minute, r["revision"]) for r in results) == [(1, 0), (2, 0), (3, 1)]
    runs = read_table(settings.warehouse.runs).to_pylist()
    assert sorted((r["window_end"].minute, r["revision"]) for r in runs) == [(1, 0), (2, 0), (3, 0), (3, 1)]
    assert all(r["result_version"] is not None for r in runs)
    # the earlier revision, through Delta time travel
    assert cars(settings.warehouse, "passages", revision=0) == old
    assert cars(settings.warehouse, "passages", revision=1) == {T0 + 3 * MINUTE: Counter({(EX + "g2", 3): 1})}
    # and on the command line
    command = [str(Path(sys.executable).with_name("csparql")), "results", "passages", "--format", "json",
               "--warehouse", str(settings.warehouse.root)]
    shown = {tuple(rev): subprocess.run(command + rev, capture_output=True, text=True, timeout=120) for rev in
             ([], ["--revision", "0"], ["--revision", "-1"])}
    windows = {key: [json.loads(line) for line in done.stdout.splitlines()] for key, done in
               (("current", shown[()]), ("0", shown[("--revision", "0")]))}
    third = format_instant(T0 + 3 * MINUTE)
    def third_cars(key: str) -> list[str]:
        return [b["cars"]["value"] for w in windows[key] if w["window_end"] == third for b in w["results"]["results"]["bindings"]]

    assert (third_cars("current"), third_cars("0")) == (["3"], ["1"])
    refused = shown[("--revision", "-1")]
    assert refused.returncode == 1 and refused.stderr.strip() == (
        "csparql: --revision -1: a revision is 0 (the first evaluation) or more")


def test_a_query_sets_its_own_revision_horizon(evaluated, spark, tmp_path):
    settings, deployment, _ = evaluated
    register_text("# csparql revision-horizon 1h\n" + QUERY, settings, name="passages", replace=True)
    before = rv.table_version(settings.warehouse.stream(STREAM))
    nquads(tmp_path / "late.nq", [("g1", "late1", T0 + 30_000_000)])
    ingest_stream(spark, settings.warehouse, STREAM, [tmp_path / "late.nq"])

    stale = detect_after_commits(settings, STREAM, before, now=T0 + 30 * MINUTE)

    assert [(w.window_end, w.status) for w in stale] == [(T0 + MINUTE, sw.PENDING)]


def test_an_evaluation_finds_its_window_stale_when_triples_of_it_landed_while_it_ran(evaluated, spark, tmp_path):
    """The ingest's check missed the window (its run was not recorded yet): the evaluation's own check finds it."""
    settings, deployment, engine = evaluated
    started = rv.evaluated_windows(settings.warehouse, {"passages"})["passages"][T0 + 2 * MINUTE].started_at
    nquads(tmp_path / "late.nq", [("g1", "late1", T0 + MINUTE + 30_000_000)])
    ingest_stream(spark, settings.warehouse, STREAM, [tmp_path / "late.nq"])

    stale = check_evaluation(settings, deployment, T0 + 2 * MINUTE, started, now=T0 + 3 * MINUTE)

    assert [(w.window_end, w.late_triples, w.status) for w in stale] == [(T0 + 2 * MINUTE, 1, sw.PENDING)]
    assert check_evaluation(settings, deployment, T0 + 2 * MINUTE, started, now=T0 + 3 * MINUTE) == []


def test_a_revision_horizon_that_is_not_a_duration_is_refused_with_its_line(evaluated):
    from csparql.deploy.registry import RegistrationError

    settings = evaluated[0]
    with pytest.raises(RegistrationError, match=r"line 2: the revision horizon 'soon' is not a duration"):
        register_text("# a comment\n# csparql revision-horizon soon\n" + QUERY, settings, name="other")


def test_tables_written_before_revisions_gain_the_columns_and_their_windows_count_as_revision_0(evaluated):
    from deltalake import DeltaTable, write_deltalake

    settings, deployment, engine = evaluated
    for path in (settings.warehouse.runs, settings.warehouse.results("passages", "bindings")):
        table = read_table(path)
        table = table.drop_columns([c for c in ("revision", "result_version", "inputs_complete_at")
                                    if c in table.column_names])
        write_deltalake(str(path), table, mode="overwrite", schema_mode="overwrite")
        assert "revision" not in DeltaTable(str(path)).schema().to_arrow().names

    engine.evaluate(deployment.plan, T0 + 2 * MINUTE, "passages", version=deployment.version)

    runs = read_table(settings.warehouse.runs).to_pylist()
    assert sorted(((r["window_end"].minute, r["revision"]) for r in runs), key=str) == [
        (1, None), (2, 1), (2, None), (3, None)]
    assert "inputs_complete_at" in DeltaTable(str(settings.warehouse.runs)).schema().to_arrow().names
    rows = read_table(settings.warehouse.results("passages", "bindings")).to_pylist()
    assert sorted(((r["window_end"].minute, r["revision"]) for r in rows), key=str) == [(1, None), (2, 1), (3, None)]
    assert cars(settings.warehouse, "passages", revision=1) == {T0 + 2 * MINUTE: Counter({(EX + "g1", 1): 1})}


def test_after_a_run_of_an_unregistered_query_ingest_succeeds_and_finds_its_stale_windows(
        spark, tmp_path, capsys, monkeypatch):
    """Before the fix, a run of a query nobody registered, then an ingest into another stream, exited 3 (the
    runs table was filtered with an empty set of queries); late triples of the stream that query read made
    none of its windows stale."""
    from csparql.cli import main

    settings = settings_for(tmp_path, CSPARQL_REVISION_HORIZON="1h")
    (tmp_path / "registry").mkdir()
    monkeypatch.setenv("CSPARQL_REGISTRY", str(settings.registry))
    monkeypatch.setenv("CSPARQL_REVISION_HORIZON", "1h")
    base = ["--warehouse", str(settings.warehouse.root), "--master", "local[2]"]
    nquads(tmp_path / "on-time.nq", [("g1", "c1", T0 + 10_000_000), ("g1", "c2", T0 + MINUTE + 10_000_000)])
    query = tmp_path / "passages.rq"
    query.write_text(QUERY.replace("REGISTER QUERY Passages AS\n", ""), encoding="utf-8")

    assert main(["ingest", *base, "--stream", STREAM, str(tmp_path / "on-time.nq")]) == 0
    for minutes in (1, 2):
        assert main(["run", str(query), "--at", format_instant(T0 + minutes * MINUTE), *base]) == 0
    capsys.readouterr()

    other = EX + "elsewhere"
    nquads(tmp_path / "other.nq", [("g9", "c9", T0 + 30_000_000)])
    code = main(["ingest", *base, "--stream", other, str(tmp_path / "other.nq")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "error" not in err and "warning" not in err
    assert sw.stale_windows(settings.warehouse) == []

    nquads(tmp_path / "late.nq", [("g1", "late1", T0 + MINUTE + 30_000_000)])
    code = main(["ingest", *base, "--stream", STREAM, str(tmp_path / "late.nq")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert "1 window evaluated before these triples landed are stale (0 within the revision horizon" in out
    [stale] = sw.stale_windows(settings.warehouse)
    assert (stale.query, stale.window_start, stale.window_end, stale.stream, stale.late_triples) == (
        "passages", T0 + MINUTE, T0 + 2 * MINUTE, STREAM, 1)
    assert stale.status == sw.BEYOND_HORIZON  # it ended in 2020, long before the one-hour horizon

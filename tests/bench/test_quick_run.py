"""The quick mode of the benchmarks runs (as ``./bench.sh --quick`` does) and its run folder holds every
figure: each system at each point of each sweep, ingest, the Airflow end-to-end trials, the targets, the
table and the plots — and every answer agrees with the reference's. No timing is asserted.

The run is a separate process (it starts its own SparkSession, Spark Connect server and Airflow stack)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from benchmarks import report
from benchmarks.capacity import query_text as capacity_query
from benchmarks.profiles import QUICK, SYSTEMS
from benchmarks.run import SRBENCH_SYSTEMS
from benchmarks.cli import ROOT

pytestmark = [pytest.mark.airflow, pytest.mark.spark]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("bench-quick") / "run"
    finished = subprocess.run([sys.executable, "-m", "benchmarks", "--quick", "--out", str(out)], cwd=ROOT,
                              capture_output=True, text=True, timeout=1800, stdin=subprocess.DEVNULL)
    assert (out / "results.json").exists(), f"no results.json:\n{finished.stdout[-3000:]}\n{finished.stderr[-5000:]}"
    result = json.loads((out / "results.json").read_text(encoding="utf-8"))
    return {"out": out, "result": result, "finished": finished}


def _figure(measurement: dict) -> bool:
    """A measured median with its repetitions and memory, or a reason why it was not run."""
    if measurement["status"] == "ok":
        return (measurement["median_seconds"] is not None and measurement["repetitions"] >= 1
                and measurement["peak_rss_bytes"] and measurement["answer_rows"] is not None)
    return measurement["status"] == "not run" and bool(measurement["reason"])


def test_the_quick_run_completes(run):
    finished = run["finished"]
    assert finished.returncode == 0, f"{finished.stdout[-4000:]}\n{finished.stderr[-6000:]}"
    result = run["result"]
    assert result["mode"] == "quick" and result["seed"] == QUICK.seed
    assert result["machine"]["logical_cores"] and result["versions"]["pyspark"]
    assert result["parameters"]["window_sizes"] == list(QUICK.window_sizes)


def test_every_system_has_a_figure_at_every_window_size(run):
    result = run["result"]
    for size in QUICK.window_sizes:
        for system in SYSTEMS:
            m = report.find(result, "window", system, size)
            assert m is not None and _figure(m), (system, size, m and m["reason"])
    # the cold system ran where the quick mode asks for it, every other system everywhere
    assert report.find(result, "window", "csparql_cold", QUICK.window_sizes[0])["status"] == "ok"
    for system in ("csparql_warm", "spark_hand", "duckdb", "pyoxigraph", "rdflib"):
        assert all(report.find(result, "window", system, n)["status"] == "ok" for n in QUICK.window_sizes)


def test_every_workload_and_sweep_has_its_figures(run):
    result = run["result"]
    for workload in QUICK.workloads:
        for size in QUICK.workload_sizes:
            for system in SYSTEMS:
                m = report.find(result, "workload", system, size, workload=workload)
                assert m is not None and _figure(m), (workload, system, size)
    for history in QUICK.histories:
        for system in ("csparql_warm", "csparql_filter", "spark_hand", "duckdb"):
            m = report.find(result, "history", system, history=history)
            assert m is not None and m["status"] == "ok" and _figure(m), (history, system)
    for workload in QUICK.ratio_workloads:
        for ratio in QUICK.ratios:
            for system in ("csparql_warm", "spark_hand", "duckdb"):
                m = report.find(result, "ratio", system, ratio_=ratio, workload=workload)
                assert m is not None and m["status"] == "ok" and m["seconds_per_stream_minute"] > 0, (
                    workload, ratio, system)
    assert result["ingest"] and all(i["triples"] > 0 and i["triples_per_second"] > 0 for i in result["ingest"])
    side_by_side = {i["format"]: i for i in result["ingest"] if i["path"] == "in-process"}
    assert set(side_by_side) == {"timestamped N-Quads", "TriG timestamped graphs"}
    assert side_by_side["TriG timestamped graphs"]["triples"] == side_by_side["timestamped N-Quads"]["triples"]


@pytest.mark.parametrize("workload", QUICK.ratio_workloads)
def test_the_sliding_sweep_has_the_pane_path_live_and_replayed_beside_the_recompute(run, workload):
    result = run["result"]

    def find(system, ratio):
        return report.find(result, "ratio", system, ratio_=ratio, workload=workload)

    for ratio in (r for r in QUICK.ratios if r > 1):
        for system in ("csparql_panes", "csparql_panes_replay"):
            m = find(system, ratio)
            assert m is not None and _figure(m) and m["seconds_per_stream_minute"] > 0, (ratio, system)
            # every window of the schedule computed from panes, each equal to the recompute's
            assert m["windows_checked"] == QUICK.pane_windows + 1 and m["windows_differing_from_recompute"] == []
            assert not m.get("pane_note") and m["agrees_with_reference"] is True and m["reference"] == "duckdb"
            assert m["pane_partials_keyed"] is (workload == "topic_count")
        live = [r for r in find("csparql_panes", ratio)["runs"]]
        # a fresh pane store each repetition: the first window computes all its panes, each later one one
        assert all(r["panes_computed"] == [ratio] + [1] * QUICK.pane_windows for r in live)
        replay = find("csparql_panes_replay", ratio)["runs"]
        assert all(r["panes_job_seconds"] > 0 and r["windows"] == QUICK.pane_windows + 1 for r in replay)
    # a tumbling window: the planner declines, so the live path recomputes (said so) and no replay figure is made up
    live, replay = (find(s, 1) for s in ("csparql_panes", "csparql_panes_replay"))
    assert live["status"] == "ok" and "tumbling" in live["pane_note"] and live["runs"][0]["panes_used"] is False
    assert replay["status"] == "not run" and "tumbling" in replay["reason"] and replay["median_seconds"] is None
    targets = {t["id"]: t for t in result["targets"]}
    assert targets["panes_tumbling"]["met"] in (True, False) and targets["panes_tumbling"]["measured"] != "–"
    assert targets["graph_ingest"]["met"] in (True, False) and targets["graph_ingest"]["measured"] != "–"
    table = (run["out"] / "table.md").read_text(encoding="utf-8")
    assert "csparql panes (live) per window" in table and "replay ÷ recompute" in table
    assert f"## Sliding ratio: {report.RATIO_TITLES[workload]}" in table


def test_every_answer_agrees_with_the_reference(run):
    checked = [m for m in run["result"]["measurements"] if m["status"] == "ok"]
    assert checked and all(m["agrees_with_reference"] is True for m in checked), [
        (m["system"], m["workload"], m["size"], m.get("disagreement"))
        for m in checked if not m["agrees_with_reference"]]
    # pyoxigraph (the independent SPARQL evaluator) wherever it runs; DuckDB in the history and sliding sweeps,
    # whose query the workload sweep checks against pyoxigraph
    assert {m["reference"] for m in checked if m["sweep"] in ("window", "workload")} == {"pyoxigraph"}
    assert {m["reference"] for m in checked if m["sweep"] in ("history", "ratio")} == {"duckdb"}
    assert {m["reference"] for m in checked if m["sweep"] == "srbench"} == {"pyoxigraph"}


def test_every_srbench_query_has_its_figures(run):
    result = run["result"]
    measured = [m for m in result["measurements"] if m["sweep"] == "srbench"]
    for number in QUICK.srbench_queries:
        for stations in QUICK.srbench_stations:
            for system in SRBENCH_SYSTEMS:
                m = next((m for m in measured if m["workload"] == f"srbench_q{number:02d}"
                          and m["stations"] == stations and m["system"] == system), None)
                assert m is not None and m["status"] == "ok" and _figure(m), (number, stations, system)
                assert m["window_triples"] > 0 and m["answer_rows"] > 0, (number, m["window_triples"])
    assert "## SRBench" in (run["out"] / "table.md").read_text(encoding="utf-8")


def test_the_airflow_figures_are_there_for_each_mode(run):
    airflow = run["result"]["airflow"]
    assert airflow["status"] == "ok", airflow.get("reason")
    modes = {trial["mode"] for trial in airflow["trials"]}
    assert modes == set(QUICK.airflow_modes)
    for trial in airflow["trials"]:
        assert trial["windows_evaluated"] >= 1 and trial["commit_latency_seconds"], trial
        # no lag sample when no window was committed while observed (it did not keep up then)
        assert isinstance(trial["keeps_up"], bool) and isinstance(trial["lag_samples"], list)
        assert trial["lag_samples"] or not trial["keeps_up"]
    assert set(airflow["shortest_period_kept_up"]) == set(QUICK.airflow_modes)


def test_the_targets_table_and_plots_are_written(run):
    result, out = run["result"], run["out"]
    assert {t["id"] for t in result["targets"]} == {"compiled_overhead", "versus_sparql_stores", "history",
                                                   "ten_million", "ingest", "graph_ingest", "panes_sliding",
                                                   "panes_tumbling"}
    assert all(t["met"] in (True, False, None) and t["measured"] for t in result["targets"])
    assert all(t["why"] for t in result["targets"] if t["met"] is not True)
    table = (out / "table.md").read_text(encoding="utf-8")
    assert "## Targets" in table and "## End to end through Airflow" in table
    for plot in report.PLOTS:
        assert (out / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list((out / "plans").glob("district_count-*-csparql_warm.txt"))


def test_the_capacity_sweep_ran_registered_queries_on_the_stack(run):
    capacity = run["result"]["airflow"]["capacity"]
    assert capacity["status"] == "ok", capacity.get("reason")
    assert [p["queries"] for p in capacity["points"]] == list(QUICK.capacity_queries)[:len(capacity["points"])]
    first = capacity["points"][0]
    assert first["windows_due"] >= 1 and first["windows_evaluated"] >= 1, first
    assert first["windows_missed"] == first["windows_due"] - first["windows_evaluated"]
    assert first["commit_latency_p50_seconds"] is not None and first["cpu_busy_percent"] is not None
    # the queries went through the registry as csparql register puts them there: a query file and its loader
    assert sorted(t["dag"] for t in first["trials"]) == [capacity_query(i, QUICK.capacity_period)[0] for i in range(2)]
    assert "### Capacity" in (run["out"] / "table.md").read_text(encoding="utf-8")

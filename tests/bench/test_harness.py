"""The benchmark harness's own pieces, without Spark: statistics, parameters, seeded generators, the target
logic and the report. (Speed is never asserted: these check the arithmetic and the bookkeeping.)"""

from __future__ import annotations

import math
import re
from collections import Counter

import pytest

from benchmarks import data, report
from benchmarks.measure import extrapolate, fit_power, linear_slope, median, ratio
from benchmarks.profiles import FULL, QUICK
from benchmarks.workloads import (
    SRBENCH_QUERIES,
    agree,
    answer_of_rows,
    answer_of_triples,
    canonical_value,
    srbench,
    srbench_sparql,
)
from csparql.core.windows import parse_instant

# --- statistics -------------------------------------------------------------------------------------------


def test_median_of_odd_and_even_counts_and_of_nothing():
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([]) is None


def test_ratio_refuses_missing_or_non_positive_denominators():
    assert ratio(3.0, 1.5) == 2.0
    assert ratio(None, 1.0) is None and ratio(1.0, None) is None and ratio(1.0, 0.0) is None


def test_power_fit_recovers_an_exact_power_law():
    a, b = fit_power([(10, 2 * 10**1.5), (100, 2 * 100**1.5), (1000, 2 * 1000**1.5)])
    assert math.isclose(a, 2, rel_tol=1e-9) and math.isclose(b, 1.5, rel_tol=1e-9)


def test_extrapolation_follows_the_fit_and_never_grows_slower_than_linearly():
    quadratic = [(10, 1.0), (100, 100.0)]
    assert math.isclose(extrapolate(quadratic, 1000), 10_000.0, rel_tol=1e-9)
    flat = [(10, 5.0), (100, 5.0)]  # a fixed cost: loading ten times more still takes ten times longer
    assert math.isclose(extrapolate(flat, 1000), 50.0, rel_tol=1e-9)
    assert math.isclose(extrapolate([(100, 2.0)], 1000), 20.0, rel_tol=1e-9)
    assert extrapolate([], 10) is None


def test_linear_slope():
    assert math.isclose(linear_slope([(0, 1), (1, 3), (2, 5)]), 2.0)
    assert linear_slope([(1, 1)]) is None and linear_slope([(1, 1), (1, 2)]) is None


# --- parameters -------------------------------------------------------------------------------------------


def test_profile_overrides_parse_each_field_type():
    profile = QUICK.override(["window_sizes=1000,5_000", "repetitions=3", "airflow=false", "slow_limit_seconds=2.5",
                              "airflow_periods=30s,10s"])
    assert profile.window_sizes == (1000, 5000) and profile.repetitions == 3 and profile.airflow is False
    assert profile.slow_limit_seconds == 2.5 and profile.airflow_periods == ("30s", "10s")
    assert QUICK.override(["ratio_workloads=topic_set"]).ratio_workloads == ("topic_set",)
    assert QUICK.window_sizes != profile.window_sizes  # profiles are immutable


@pytest.mark.parametrize("assignment", ["no_such_field=1", "repetitions", "airflow=maybe", "repetitions=many",
                                        "ratio_workloads=topic_count,topics"])
def test_bad_overrides_name_the_problem(assignment):
    with pytest.raises(ValueError, match="--set"):
        QUICK.override([assignment])


def test_full_mode_has_the_sizes_of_the_issue():
    assert FULL.window_sizes[0] == 10_000 and FULL.window_sizes[-1] == 10_000_000
    assert FULL.histories[0] == 1 and FULL.histories[-1] == 100
    assert FULL.ratios[0] == 1 and FULL.ratios[-1] == 30
    assert FULL.repetitions >= 5 and FULL.warmups >= 1 and FULL.cold_repetitions >= 5
    assert FULL.airflow_observe_seconds >= 600


# --- generators ---------------------------------------------------------------------------------------------

_TIMESTAMP = re.compile(r'"([^"]+)"\^\^<http://www.w3.org/2001/XMLSchema#dateTime> \.$')


def _instants(path) -> list[int]:
    return [parse_instant(_TIMESTAMP.search(line).group(1)) for line in path.read_text().splitlines()]


@pytest.mark.parametrize("kind", ["urban", "topics", "two_streams"])
def test_generators_are_seeded(tmp_path, kind):
    first = data.generate(kind, tmp_path / "a", 600, 2, seed=7)
    again = data.generate(kind, tmp_path / "b", 600, 2, seed=7)
    other = data.generate(kind, tmp_path / "c", 600, 2, seed=8)
    for iri in first[0]:
        assert first[0][iri].read_bytes() == again[0][iri].read_bytes()
        assert first[0][iri].read_bytes() != other[0][iri].read_bytes()
    assert first[1].read_bytes() == again[1].read_bytes()


@pytest.mark.parametrize("kind,size,history", [("urban", 3000, 1), ("urban", 1000, 4), ("topics", 2999, 3)])
def test_generators_give_the_window_size_asked_for(tmp_path, kind, size, history):
    streams, _, counts, span = data.generate(kind, tmp_path, size, history, seed=1)
    (iri, path), = streams.items()
    instants = _instants(path)
    expected = size * history
    assert len(instants) == counts[iri]
    assert all(data.AT - history * span < t <= data.AT for t in instants)
    assert instants == sorted(instants)
    in_window = sum(1 for t in instants if data.AT - span < t <= data.AT)
    assert abs(in_window - size) <= 3, (in_window, size)  # topics come three triples to a post
    assert abs(len(instants) - expected) <= 3


def test_two_streams_hold_about_the_window_size_between_them_with_their_placements(tmp_path):
    streams, static, counts, span = data.generate("two_streams", tmp_path, 4000, 1, seed=3)
    assert set(streams) == {data.CITY_TOLLGATES, data.CITY_CAMERAS}
    assert abs(sum(counts.values()) - 4000) <= 2
    gates = streams[data.CITY_TOLLGATES].read_text()
    cameras = streams[data.CITY_CAMERAS].read_text()
    assert "placedIn" in gates and "registers" in gates
    assert "placedAt" in cameras and "crossing" in cameras and "registers" in cameras
    assert "hasCapacity" in static.read_text()


# --- canonical answers ------------------------------------------------------------------------------------


def test_canonical_values_make_every_system_comparable():
    from rdflib import Literal, URIRef
    from rdflib.namespace import XSD

    assert canonical_value(URIRef("http://x/a")) == "<http://x/a>"
    assert canonical_value(Literal("12", datatype=XSD.integer)) == "12"
    assert canonical_value(12) == "12" and canonical_value(12.0) == "12"
    assert canonical_value({"kind": 1, "value": "http://x/a", "datatype": None, "language": None}) == "<http://x/a>"
    assert answer_of_rows([(URIRef("http://x/a"), 2), (URIRef("http://x/a"), 2)]) == Counter({("<http://x/a>", "2"): 2})
    assert answer_of_triples([("a", "b", 1), ("a", "b", 1)]) == Counter({("a", "b", "1"): 1})  # a graph is a set


# --- targets and report -----------------------------------------------------------------------------------


def _m(sweep, system, size, seconds, history=1, ratio_=None, status="ok", estimated=None, **extra):
    return {"sweep": sweep, "workload": "w", "system": system, "size": size, "history": history, "ratio": ratio_,
            "status": status, "reason": None, "median_seconds": seconds if status == "ok" else None,
            "estimated_seconds": estimated, "peak_rss_bytes": 2**30, "rss_increase_bytes": 2**20,
            "jvm_heap_peak_bytes": extra.pop("heap", 2**28), "agrees_with_reference": True, "runs": [], **extra}


def _result(measurements, ingest_rate=200_000.0):
    return {"measurements": measurements, "ingest": [
        {"dataset": "urban", "size": 10, "history": 1, "stream": "s", "triples": 2_000_000, "bytes": 1,
         "seconds": 2_000_000 / ingest_rate, "triples_per_second": ingest_rate}], "airflow": {"status": "not run"}}


def _target(result, name):
    return next(t for t in report.targets(result) if t["id"] == name)


def test_answers_agree_within_a_tolerance_only_on_numbers_and_only_when_asked():
    reference = Counter({("<s1>", "40.52667"): 1, ("<s2>", "72.98"): 2})
    close = Counter({("<s1>", "40.5266685"): 1, ("<s2>", "72.9800034"): 2})
    assert not agree(close, reference)
    assert agree(close, reference, 1e-5)
    assert not agree(Counter({("<s1>", "40.6"): 1, ("<s2>", "72.98"): 2}), reference, 1e-5)  # too far
    assert not agree(Counter({("<s1>", "40.52667"): 1, ("<s2>", "72.98"): 1}), reference, 1e-5)  # one row short
    assert not agree(Counter({("<s3>", "40.52667"): 1, ("<s2>", "72.98"): 2}), reference, 1e-5)  # not a number
    assert not agree(Counter({("<s2>", "40.52667"): 1, ("<s1>", "72.98"): 2}), reference, 1e-5)  # rows swapped


def test_srbench_queries_in_sparql_lose_only_their_registration_and_from_clauses():
    cquery = ("REGISTER QUERY Q COMPUTED EVERY 1h AS\nPREFIX ex: <http://example.org/>\nSELECT ?s\n"
              "FROM STREAM <http://s> [RANGE 1h STEP 1h]\nFROM <http://g>\nWHERE { ?s ex:p ?o }\n")
    assert srbench_sparql(cquery) == "PREFIX ex: <http://example.org/>\nSELECT ?s\nWHERE { ?s ex:p ?o }\n"
    for number in SRBENCH_QUERIES:
        workload = srbench(number)
        lines = [line.lstrip().upper() for line in workload.sparql.splitlines()]
        assert not any(line.startswith(("REGISTER", "FROM")) for line in lines)
        assert workload.cquery.startswith("REGISTER QUERY SRBench_Q")


def test_compiled_overhead_target_is_judged_only_at_the_sizes_it_names():
    quick = _result([_m("window", "csparql_warm", 2000, 3.0), _m("window", "spark_hand", 2000, 1.0)])
    assert _target(quick, "compiled_overhead")["met"] is None
    met = _result([_m("window", "csparql_warm", n, 1.1 * n / 1e5) for n in (100_000, 1_000_000)]
                  + [_m("window", "spark_hand", n, n / 1e5) for n in (100_000, 1_000_000)])
    assert _target(met, "compiled_overhead")["met"] is True
    plan = {"shuffles": 3, "broadcasts": 1}
    missed = _result([_m("window", "csparql_warm", 100_000, 2.0, plan=plan),
                      _m("window", "spark_hand", 100_000, 1.0, plan={"shuffles": 1, "broadcasts": 1})])
    target = _target(missed, "compiled_overhead")
    assert target["met"] is False and "shuffles 3 vs 1" in target["why"]


def test_versus_stores_target_uses_extrapolated_times_of_systems_not_run():
    result = _result([_m("window", "csparql_warm", 1_000_000, 2.0),
                      _m("window", "pyoxigraph", 1_000_000, None, status="not run", estimated=200.0),
                      _m("window", "rdflib", 1_000_000, 100.0)])
    target = _target(result, "versus_sparql_stores")
    assert target["met"] is True and "extrapolated" in target["measured"]
    slow = _result([_m("window", "csparql_warm", 1_000_000, 2.0), _m("window", "pyoxigraph", 1_000_000, 20.0),
                    _m("window", "rdflib", 1_000_000, 100.0)])
    assert _target(slow, "versus_sparql_stores")["met"] is False


def test_history_target_needs_a_flat_window_and_a_growing_filter():
    def run(window_100, filter_100):
        return _result([_m("history", "csparql_warm", 10, 1.0, history=1),
                        _m("history", "csparql_warm", 10, window_100, history=100),
                        _m("history", "csparql_filter", 10, 1.0, history=1),
                        _m("history", "csparql_filter", 10, filter_100, history=100)])

    assert _target(run(1.1, 5.0), "history")["met"] is True
    assert _target(run(1.5, 5.0), "history")["met"] is False
    assert _target(run(1.1, 1.1), "history")["met"] is False


def test_ten_million_and_ingest_targets():
    result = _result([_m("window", "csparql_warm", 100_000, 1.0, heap=2**28),
                      _m("window", "csparql_warm", 10_000_000, 12.0, heap=2**28 + 2**20)])
    assert _target(result, "ten_million")["met"] is True
    grown = _result([_m("window", "csparql_warm", 100_000, 1.0, heap=2**28),
                     _m("window", "csparql_warm", 10_000_000, 12.0, heap=2**30)])
    assert _target(grown, "ten_million")["met"] is False
    assert _target(_result([]), "ten_million")["met"] is None
    assert _target(_result([], ingest_rate=200_000.0), "ingest")["met"] is True
    slow = _target(_result([], ingest_rate=50_000.0), "ingest")
    assert slow["met"] is False and slow["why"]


def _pane_sweep(warm_minute, live_minute, replay_minute, live_at_1, warm_runs_at_1, workload="topic_count"):
    step = {1: 180, 30: 6}
    measurements = [_m("ratio", "csparql_warm", 1000, warm_runs_at_1[len(warm_runs_at_1) // 2], ratio_=1,
                       step_seconds=180, seconds_per_stream_minute=1.0, workload=workload,
                       runs=[{"seconds": s, "warmup": False} for s in warm_runs_at_1]),
                    _m("ratio", "csparql_panes", 1000, live_at_1, ratio_=1, step_seconds=180, workload=workload,
                       seconds_per_stream_minute=live_at_1 / 3, pane_note="panes not used (tumbling: ...)")]
    for system, minute in (("csparql_warm", warm_minute), ("csparql_panes", live_minute),
                           ("csparql_panes_replay", replay_minute)):
        measurements.append(_m("ratio", system, 1000, minute * step[30] / 60, ratio_=30, step_seconds=6,
                               seconds_per_stream_minute=minute, workload=workload,
                               runs=[{"seconds": minute / 10, "warmup": False,
                                      "median_phases_ms": {"spark": 300.0, "panes": 200.0}}]))
    return _result(measurements)


def test_the_pane_targets_of_issue_18_compare_the_pane_path_with_the_recompute():
    met = _pane_sweep(warm_minute=10.0, live_minute=1.9, replay_minute=1.0, live_at_1=0.5, warm_runs_at_1=[0.45, 0.5, 0.52])
    sliding, tumbling = _target(met, "panes_sliding"), _target(met, "panes_tumbling")
    assert sliding["met"] is True and "0.19×" in sliding["measured"] and "replay" in sliding["measured"]
    assert tumbling["met"] is True and tumbling["why"] is None
    missed = _pane_sweep(warm_minute=10.0, live_minute=3.0, replay_minute=1.0, live_at_1=0.6, warm_runs_at_1=[0.45, 0.5, 0.52])
    sliding, tumbling = _target(missed, "panes_sliding"), _target(missed, "panes_tumbling")
    assert sliding["met"] is False and "spark 300 ms" in sliding["why"] and "panes 200 ms" in sliding["why"]
    assert tumbling["met"] is False and "1.20×" in tumbling["measured"]
    assert _target(_result([]), "panes_sliding")["met"] is None
    # the targets are judged on the topic count: another workload of the sliding sweep does not stand in for it
    other = _pane_sweep(warm_minute=10.0, live_minute=1.0, replay_minute=1.0, live_at_1=0.5,
                        warm_runs_at_1=[0.45, 0.5, 0.52], workload="topic_set")
    assert _target(other, "panes_sliding")["met"] is None and _target(other, "panes_tumbling")["met"] is None
    both = _result(missed["measurements"] + other["measurements"])
    assert _target(both, "panes_sliding")["met"] is False
    assert _target(_result([]), "panes_tumbling")["met"] is None
    table = report.markdown({**missed, "mode": "quick", "seed": 1, "started_at": "2026-01-01T00:00:00Z",
                             "duration_seconds": 60, "versions": {}, "notes": [], "targets": report.targets(missed),
                             "parameters": {"repetitions": 1, "warmups": 1, "cold_repetitions": 1, "pane_windows": 12},
                             "machine": {"cpu": "cpu", "logical_cores": 2, "memory_bytes": 2**34, "os": "linux",
                                         "python": "3.11", "java": "17", "spark_master": "local[2]"}})
    assert "| live ÷ recompute | replay ÷ recompute |" in table and "| 0.30× | 0.10× |" in table
    assert "RANGE/STEP = 30: compute per stream minute ≤ 1/5 of full recompute" in table


def test_markdown_and_plots_from_a_result(tmp_path):
    measurements = [_m("window", s, n, 0.01 * n / 1000) for s in ("csparql_warm", "spark_hand", "duckdb", "pyoxigraph",
                                                                     "rdflib", "csparql_cold") for n in (1000, 10_000)]
    measurements += [_m("history", s, 1000, 0.5 * h, history=h)
                     for s in ("csparql_warm", "csparql_filter") for h in (1, 10)]
    measurements += [_m("ratio", "csparql_warm", 1000, 0.5, ratio_=r, step_seconds=180 // r,
                        seconds_per_stream_minute=0.5 * r / 3) for r in (1, 6)]
    result = {**_result(measurements), "mode": "quick", "seed": 1, "started_at": "2026-01-01T00:00:00Z",
              "duration_seconds": 60, "versions": {"pyspark": "4"}, "notes": [],
              "parameters": {"repetitions": 2, "warmups": 1, "cold_repetitions": 1},
              "machine": {"cpu": "cpu", "logical_cores": 2, "memory_bytes": 2**34, "os": "linux", "python": "3.11",
                          "java": "17", "spark_master": "local[2]"}}
    result["targets"] = report.targets(result)
    report.write(result, tmp_path)
    table = (tmp_path / "table.md").read_text()
    for heading in ("## Targets", "## Window size", "## Stored history", "## Sliding ratio", "## Memory", "## Ingest",
                    "## End to end through Airflow", "## Answers"):
        assert heading in table
    for plot in report.PLOTS:
        assert (tmp_path / plot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_capacity_query_registers_and_the_kinds_take_turns(tmp_path):
    from benchmarks.capacity import TEMPLATES, query_text, register_queries
    from csparql.deploy.settings import Settings
    from csparql.storage.warehouse import Warehouse

    settings = Settings(registry=tmp_path / "registry", warehouse=Warehouse(tmp_path / "warehouse"),
                        landing=tmp_path / "landing")
    count = len(TEMPLATES) + 2
    dags = register_queries(settings, count, "1m")
    assert dags == [query_text(i, "1m")[0] for i in range(count)] and len(set(dags)) == count
    assert all((settings.registry / f"{name}.rq").exists() and (settings.registry / f"{name}.py").exists()
               for name in dags)
    assert dags[len(TEMPLATES)].endswith(TEMPLATES[0][0])


def _trial(name, expected, evaluated, failed=0, slope=0.0, lag=((1.0, 5.0),)):
    return {"dag": name, "windows_expected": expected, "windows_evaluated": evaluated, "failed_runs": failed,
            "lag_slope": slope, "lag_samples": list(lag), "lag_at_end_seconds": lag[-1][1] if lag else None,
            "commit_latency_seconds": [4.0, 6.0, 50.0], "commit_latency_unpaused_seconds": [4.0, 6.0],
            "evaluation_seconds": [1.5]}


@pytest.mark.parametrize("trials, kept_up", [
    ([_trial("a", 10, 10), _trial("b", 10, 10)], True),
    ([_trial("a", 10, 10), _trial("b", 10, 9)], False),  # one window missed
    ([_trial("a", 10, 10), _trial("b", 10, 10, failed=1)], False),
    ([_trial("a", 10, 10), _trial("b", 10, 10, slope=0.5)], False),  # the lag grows
    ([_trial("a", 10, 10), _trial("b", 10, 0, lag=())], False),  # never committed
])
def test_capacity_kept_up_needs_every_window_no_failure_and_a_flat_lag(trials, kept_up):
    from benchmarks.capacity import summarize

    point = summarize(len(trials), trials, 50.0, 1.0)
    assert point["kept_up"] is kept_up
    assert point["windows_missed"] == point["windows_due"] - point["windows_evaluated"]
    assert point["commit_latency_p50_seconds"] == 6.0 and point["commit_latency_p95_seconds"] == 50.0
    assert point["commit_latency_unpaused_p50_seconds"] == 4.0 and point["commit_latency_unpaused_p95_seconds"] == 6.0


def test_a_window_s_latency_is_split_where_its_last_input_was_committed_and_reported_per_count():
    from datetime import datetime, timezone

    from benchmarks.capacity import summarize
    from benchmarks.observation import _split_at_inputs
    from benchmarks.report import _capacity_lines

    def at(seconds):
        return datetime.fromtimestamp(1_800_000_000 + seconds, tz=timezone.utc)

    runs = [  # window end 0 s: data complete at 3 s, started at 4 s, 1.5 s of evaluation
        {"window_end": at(0), "inputs_complete_at": at(3), "started_at": at(4), "duration_ms": 1500},
        {"window_end": at(60), "inputs_complete_at": at(61), "started_at": at(61.5), "duration_ms": 500},
        {"window_end": at(120), "inputs_complete_at": None, "started_at": at(130), "duration_ms": 700},
    ]
    waited, after = _split_at_inputs(runs)
    assert waited == [1.0, 3.0] and after == [1.0, 2.5]  # the incomplete window has no split

    trials = [dict(_trial("a", 3, 3), inputs_wait_seconds=waited, after_inputs_seconds=after),
              _trial("b", 3, 3)]  # a trial of a runs table without the column
    point = summarize(2, trials, 50.0, 1.0)
    assert point["inputs_wait_p50_seconds"] == 1.0
    assert point["after_inputs_p50_seconds"] == 1.0 and point["after_inputs_p95_seconds"] == 2.5
    header, rule, row = [line for line in _capacity_lines(
        {"status": "ok", "period": "1m", "points": [point], "capacity": 2}) if line.startswith("|")]
    assert header.count("|") == rule.count("|") == row.count("|")
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    names = [cell.strip() for cell in header.strip("|").split("|")]
    assert cells[names.index("of which waiting for the data: p50")] == _fmt(1.0)
    assert cells[names.index("inputs complete → committed: p50")] == _fmt(1.0)


def _fmt(seconds):
    from benchmarks.report import _fmt_s

    return _fmt_s(seconds)


@pytest.mark.parametrize("kind", ["urban", "topics", "two_streams"])
def test_the_trig_of_a_data_set_lands_the_events_its_line_file_lands(tmp_path, kind):
    from csparql.storage import delta
    from csparql.storage.warehouse import Warehouse

    files, _, counts, _ = data.generate(kind, tmp_path / "input", 300, 2, seed=5)
    iri = max(files, key=lambda stream: counts[stream])
    measured = data.formats_side_by_side(iri, files[iri], tmp_path / "formats")
    assert [(m.format, m.path) for m in measured] == [("timestamped N-Quads", "in-process"),
                                                      ("TriG timestamped graphs", "in-process")]
    assert measured[0].triples == measured[1].triples == counts[iri]

    def landed(suffix: str) -> Counter:
        path = Warehouse(tmp_path / "formats" / f"warehouse-{suffix}").stream(iri)
        rows = delta.read_files(path, [f.uri for f in delta.live_files(delta.open_table(path), path)])
        terms = [[tuple(term.values()) for term in rows.column(c).to_pylist()] for c in ("s", "p", "o")]
        return Counter(zip(*terms, rows.column("ts").to_pylist()))

    assert landed("trig") == landed(files[iri].suffix[1:])


def test_the_graph_ingest_target_is_judged_on_the_in_process_trig_figure():
    lines = {"dataset": "tollgates", "size": 1, "history": 1, "stream": "s", "triples": 1000, "bytes": 1,
             "seconds": 0.01, "triples_per_second": 100_000.0, "format": "timestamped N-Quads", "path": "in-process"}
    graphs = {**lines, "format": "TriG timestamped graphs", "triples_per_second": 50_000.0, "seconds": 0.02}
    missed = _target({**_result([]), "ingest": [lines, graphs]}, "graph_ingest")
    assert missed["met"] is False and missed["why"] and "100,000 triples/s" in missed["measured"]
    met = _target({**_result([]), "ingest": [lines, {**graphs, "triples_per_second": 120_000.0}]}, "graph_ingest")
    assert met["met"] is True
    assert _target(_result([]), "graph_ingest")["met"] is None
    # with several data sets, the largest file's figure (an ingest's fixed cost counts least there), beside the
    # line format's for the same file
    small = {**graphs, "size": 1, "triples": 1000, "triples_per_second": 20_000.0}
    large = {**graphs, "size": 9, "triples": 400_000, "triples_per_second": 130_000.0, "seconds": 3.08}
    large_lines = {**lines, "size": 9, "triples": 400_000, "triples_per_second": 170_000.0}
    judged = _target({**_result([]), "ingest": [lines, small, large_lines, large]}, "graph_ingest")
    assert judged["met"] is True and "400,000 triples" in judged["measured"] and "170,000" in judged["measured"]


# --- the soak's bookkeeping (the soak itself runs for hours: ./bench.sh --soak, never in the tests) -------------


def test_soak_overrides_take_the_plan_s_fields_and_refuse_others(capsys):
    from benchmarks.cli import main

    assert main(["--soak", "--set", "soak_nothing=1"]) == 2
    assert "not 'soak_nothing'" in capsys.readouterr().out
    assert main(["--soak", "--set", "soak_hours=two"]) == 2
    assert "--set soak_hours=two: not a float" in capsys.readouterr().out


def test_soak_memory_compares_the_first_and_the_last_samples_of_each_component():
    from benchmarks.soak import memory_summary

    samples = [{"minute": i, "triggerer": 100 if i < 6 else 150, "scheduler": 200} for i in range(8)]
    assert memory_summary(samples) == {
        "scheduler": {"first_mb": 200, "last_mb": 200, "ratio": 1.0},
        "triggerer": {"first_mb": 100, "last_mb": 150, "ratio": 1.5},
    }
    assert memory_summary(samples[:3]) == {}  # too few samples to tell


def test_soak_queries_register_and_their_reference_forms_are_sparql():
    import pyoxigraph as ox

    from benchmarks.soak import QUERIES, REFERENCE_SPARQL
    from csparql.core.frontend import compile_query

    assert QUERIES.keys() == REFERENCE_SPARQL.keys()
    for name, text in QUERIES.items():
        assert compile_query(text, f"{name}.rq").registration.name == name
        ox.Store().query(REFERENCE_SPARQL[name])  # parses and runs on an empty store


def test_the_wake_measurement_refuses_a_number_of_trials_that_is_not_one():
    from benchmarks.cli import main

    assert main(["--wake", "--set", "trials=two"]) == 2
    assert main(["--wake", "--set", "trials=0"]) == 2


def test_the_due_together_measurement_refuses_counts_that_are_not_whole_numbers(capsys):
    from benchmarks.cli import main

    assert main(["--together", "--set", "queries=many"]) == 2
    assert "--set queries=many: give a whole number, at least 1" in capsys.readouterr().out
    assert main(["--together", "--set", "trials=0"]) == 2
    assert "--set trials=0: give a whole number, at least 1" in capsys.readouterr().out


# What the rsp-rs harness (benchmarks/rsp_rs) printed for a window holding a typed count, a language-tagged
# literal with quotes, a simple literal with a non-ASCII letter and a blank node.
RSP_RS_PRINTED = [
    '{Variable { name: "district" }: NamedNode(NamedNode { iri: "http://e/d1" }), Variable { name: "passages" }: '
    'Literal(Literal(TypedLiteral { value: "2", datatype: NamedNode { iri: '
    '"http://www.w3.org/2001/XMLSchema#integer" } }))}',
    '{Variable { name: "g" }: NamedNode(NamedNode { iri: "http://e/g2" }), Variable { name: "car" }: Literal(Literal(LanguageTaggedString { value: "car \\"3\\"", language: "en" }))}',
    '{Variable { name: "g" }: NamedNode(NamedNode { iri: "http://e/g1" }), Variable { name: "car" }: Literal(Literal(String("plain é")))}',
    '{Variable { name: "g" }: BlankNode(BlankNode(Anonymous { id: [177, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0], str: IdStr([98, 49, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]) })), Variable { name: "car" }: NamedNode(NamedNode { iri: "http://e/c" })}',
]


def test_rsp_rs_bindings_are_read_as_the_terms_they_print():
    from rdflib import BNode, Literal, URIRef
    from rdflib.namespace import XSD

    from benchmarks.rsp_rs_peer import answer_of_bindings, parse_bindings

    rows = parse_bindings(RSP_RS_PRINTED)
    assert rows[0] == {"district": URIRef("http://e/d1"), "passages": Literal("2", datatype=XSD.integer)}
    assert rows[1] == {"g": URIRef("http://e/g2"), "car": Literal('car "3"', lang="en")}
    assert rows[2] == {"g": URIRef("http://e/g1"), "car": Literal("plain \u00e9")}
    assert isinstance(rows[3]["g"], BNode) and rows[3]["car"] == URIRef("http://e/c")
    assert sum(answer_of_bindings(RSP_RS_PRINTED[:1], ("district", "passages")).values()) == 1


def test_rsp_rs_is_reported_as_not_run_with_the_reason_without_cargo(monkeypatch, tmp_path):
    from benchmarks import rsp_rs_peer, workloads

    rsp_rs_peer.harness_binary.cache_clear()
    monkeypatch.setattr(rsp_rs_peer.shutil, "which", lambda name: None)
    assert rsp_rs_peer.measure(workloads.district_count(), None, tmp_path, 1) == {
        "rsp_rs_reason": "cargo is not on the PATH"}
    assert rsp_rs_peer.measure(workloads.topic_count(), None, tmp_path, 1) == {
        "rsp_rs_reason": "no RSP-QL form of this workload"}
    rsp_rs_peer.harness_binary.cache_clear()


# The end of what `cargo build` printed on a machine without libclang (shortened)
CARGO_WITHOUT_LIBCLANG = """   Compiling librocksdb-sys v0.17.1+9.9.3
error: failed to run custom build command for `librocksdb-sys v0.17.1+9.9.3`

Caused by:
  process didn't exit successfully: `/x/target/release/build/librocksdb-sys-1/build-script-build` (exit status: 101)
  --- stderr
  thread 'main' panicked at bindgen-0.72.0/lib.rs:616:27:
  Unable to find libclang: "couldn't find any valid shared libraries matching: ['libclang.so']"
  stack backtrace:
     0: rust_begin_unwind
     5: std::sync::once_lock::OnceLock<T>::get_or_init::{{closure}}
"""


def test_a_failed_rsp_rs_build_is_reported_in_one_line_with_what_to_install():
    from benchmarks.rsp_rs_peer import build_failure

    reason = build_failure(CARGO_WITHOUT_LIBCLANG)
    assert "\n" not in reason and "backtrace" not in reason and "OnceLock" not in reason
    assert reason.startswith("error: failed to run custom build command for `librocksdb-sys")
    assert reason.endswith("(it needs libclang: on Debian, apt-get install libclang-dev)")
    assert build_failure("error: could not compile `x`\nmore") == "error: could not compile `x`"


def test_the_profile_refuses_counts_that_are_not_whole_numbers_before_starting_spark(capsys):
    from benchmarks.cli import main

    assert main(["--profile", "--set", "warmups=some"]) == 2
    assert "--set warmups=some: give a whole number" in capsys.readouterr().out
    assert main(["--profile", "--set", "repetitions=0"]) == 2
    assert "--set repetitions=0: give a whole number" in capsys.readouterr().out


def test_the_profile_table_gives_the_jit_time_after_the_phases_and_says_how_many_warm_ups_came_first():
    from benchmarks.window_profile import table

    point = {"title": "cars per district (04)", "triples_read": 10_000, "total_ms": 300.0, "jobs": 1, "stages": 1,
             "phases_ms": {"jit": 95.0, "plan": 110.0, "spark": 150.0}, "pyoxigraph_ms": 50.0, "same_answer": True,
             "rsp_rs_reason": "cargo is not on the PATH"}
    result = {"master": "local[2]", "warmups": 200, "repetitions": 25, "points": [point],
              "versions": {"commit": "abc1234", "engine": "plugins/csparql"}}
    lines = table(result).splitlines()
    assert "medians of 25 (after 200 warm-ups)" in lines[0] and "compiling just in time" in lines[0]
    header = [cell.strip() for cell in lines[2].strip("|").split("|")]
    assert header[2:6] == ["total", "plan", "spark", "jit"]
    row = [cell.strip() for cell in lines[4].strip("|").split("|")]
    assert row[2:6] == ["300", "110", "150", "95"] and row[8:11] == ["50", "6.0×", "yes"]


class _ApiServer:
    """The REST calls the drain makes, answered from a list of runs in memory (the real api-server is what the
    quick benchmark run's Airflow trials drain through): listings page by page, pauses and run states."""

    def __init__(self, runs: list[dict], finish_after: int):
        self.runs, self.finish_after, self.calls, self.paused = runs, finish_after, [], set()

    def api(self, method, path, body=None, allow=(), attempts=5):
        self.calls.append((method, path))
        if method == "GET":
            listings = sum(1 for m, p in self.calls if m == "GET")
            if listings > self.finish_after:  # the observed windows' runs have finished by now
                for run in self.runs:
                    if run["observed"]:
                        run["state"] = "success"
            query = dict(part.split("=") for part in path.split("?")[1].split("&") if not part.startswith("state"))
            unfinished = [r for r in self.runs if r["state"] in ("queued", "running")]
            offset, limit = int(query["offset"]), int(query["limit"])
            return {"dag_runs": unfinished[offset:offset + limit], "total_entries": len(unfinished)}
        dag = path.split("/")[1]
        if path.count("/") == 1:
            assert not [r for r in self.runs if r["observed"] and r["state"] != "success"], "paused too soon"
            self.paused.add(dag)
        else:
            [run] = [r for r in self.runs if r["dag_run_id"] == path.rsplit("/", 1)[1]]
            run["state"] = body["state"]
        return {}


def test_the_drain_pauses_every_dag_at_once_after_the_observed_runs_and_fails_the_later_ones(monkeypatch):
    from benchmarks import observation

    monkeypatch.setattr(observation.time, "sleep", lambda seconds: None)
    ended = parse_instant("2026-12-07T12:00:00Z")
    dags = [f"capacity_{n:03d}" for n in range(150)]
    runs = [{"dag_id": dag, "dag_run_id": f"{dag}-{when}", "state": "running", "observed": when == "11:59",
             "data_interval_end": f"2026-12-07T{when}:00Z"} for dag in dags for when in ("11:59", "12:01")]
    runs.append({"dag_id": "ingest_tollgates", "dag_run_id": "ingest-1", "state": "running", "observed": False,
                 "data_interval_end": "2026-12-07T11:58:00Z"})
    server = _ApiServer(runs, finish_after=3)
    observation._drain(server, dags, ended, timeout=60)
    assert server.paused == set(dags)
    assert {r["state"] for r in runs if r["dag_id"] in dags and not r["observed"]} == {"failed"}
    assert [r["state"] for r in runs if r["dag_id"] == "ingest_tollgates"] == ["running"]  # not the trial's
    patches = [i for i, (method, _) in enumerate(server.calls) if method == "PATCH"]
    listings_before_the_pauses = sum(1 for method, _ in server.calls[:patches[0]] if method == "GET")
    assert listings_before_the_pauses <= 3 * 4  # whole listings of 300 runs, 100 a page: not one DAG at a time


def test_a_process_s_cpu_counts_its_children_but_not_a_named_one_and_a_window_s_share_is_per_window():
    import os
    import signal
    import subprocess
    import sys

    from benchmarks.capacity import component_cpu_seconds, cpu_per_window

    spin = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\n"
    spin_and_stay = spin + "import os\nprint(os.getpid(), flush=True)\ntime.sleep(30)\n"
    parent_script = (f"import subprocess, sys, time\n"
                     f"subprocess.run([sys.executable, '-c', {spin!r}])\n"  # a child that ended, waited for
                     f"subprocess.Popen([sys.executable, '-c', {spin_and_stay!r}])\n"  # one still running
                     "time.sleep(30)\n")
    parent = subprocess.Popen([sys.executable, "-c", parent_script], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    try:
        child = int(parent.stdout.readline())  # it has spun
        used = component_cpu_seconds({"parent": parent.pid, "gone": 2**22 + 12345})
        apart = component_cpu_seconds({"parent": parent.pid, "child": child})
    finally:
        os.killpg(parent.pid, signal.SIGKILL)  # the parent and the child still running
        parent.wait()
    assert used["parent"] >= 1.1 and used["gone"] == 0.0
    assert apart["child"] >= 0.55 and apart["parent"] <= used["parent"] - 0.55  # a named child counts as itself
    assert cpu_per_window({"a": 1.0, "b": 5.0}, {"a": 3.0, "b": 1.0}, 4) == {"a": 500.0, "b": None}
    assert cpu_per_window({"a": 1.0}, {"a": 3.0}, 0) == {"a": None}


def test_the_capacity_report_gives_each_process_s_cpu_per_window_beside_the_sweep_s_table():
    capacity = {"status": "ok", "period": "1m", "capacity": 20, "description": "", "points": [
        {"queries": 20, "windows_due": 100, "windows_evaluated": 100, "windows_missed": 0, "failed_runs": 0,
         "kept_up": True, "cpu_ms_per_window": {"triggerer": 150.0, "Spark Connect server": 400.0, "scheduler": 90.5}},
        {"queries": 100, "windows_due": 500, "windows_evaluated": 480, "windows_missed": 20, "failed_runs": 0,
         "kept_up": False,
         "cpu_ms_per_window": {"triggerer": 140.0, "Spark Connect server": 300.0, "scheduler": None}}]}
    lines = report._capacity_lines(capacity)
    start = next(i for i, line in enumerate(lines) if line.startswith("CPU milliseconds per window"))
    assert lines[start + 2] == "| queries | Spark Connect server | triggerer | scheduler | all |"
    assert lines[start + 4] == "| 20 | 400 | 150 | 90 | 640 |"  # 90.5 rounds to even
    assert lines[start + 5] == "| 100 | 300 | 140 | – | – |"


def test_a_query_that_keeps_up_has_flat_latencies_though_its_sampled_lag_is_a_sawtooth_that_can_seem_to_grow():
    from benchmarks.observation import KEEP_UP_SLOPE, lag_growth

    def observed(latencies: list[float]) -> tuple[list[tuple[int, float]], list[tuple[float, float]]]:
        """(window end µs, latency) of windows a minute apart, the first closed 8 s before the unpause at 0, and
        the lag the sweep samples every 2 s for 300 s: now − the end of the latest committed window."""
        ends = [-8 + 60 * k for k in range(len(latencies))]
        commits = [end + latency for end, latency in zip(ends, latencies)]
        lag = [(t, t - max(e for e, c in zip(ends, commits) if c <= t)) for t in range(0, 302, 2)
               if any(c <= t for c in commits)]
        return [(end * 1_000_000, latency) for end, latency in zip(ends, latencies)], lag

    # a query of the 20-query sweep (its latencies as measured): its last window 7 s later than the others, and
    # the observation ending just before the next commit, at the top of a tooth
    kept_up, sawtooth = observed([28.0, 5.3, 5.3, 5.5, 12.9])
    assert lag_growth([], 0, sawtooth) > KEEP_UP_SLOPE  # how the sweep judged it before: not kept up
    assert lag_growth(kept_up, 0, sawtooth) < 0.05
    behind, lag = observed([28.0, 10.0, 40.0, 70.0, 100.0])  # every window half a minute later
    assert lag_growth(behind, 0, lag) == pytest.approx(0.5)

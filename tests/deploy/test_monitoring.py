"""What the monitoring pages show, computed from real Delta tables without Spark, Airflow or a browser:
recent windows from the runs table, lag behind watermarks, stream and static-graph statistics from the logs,
the latest results, and the windows merged with Airflow's runs. Each page reads only the files it needs:
tests make the other files unreadable and still get their answer."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pyarrow as pa
from rdflib import Literal, URIRef, Variable

from csparql.deploy import monitoring
from csparql.deploy.monitoring import AirflowRun, WindowRun
from csparql.deploy.plan import deployment_of_text
from csparql.deploy.settings import Settings
from csparql.storage import result_rows as rt
from csparql.storage import delta, schema
from csparql.storage.instants import bucket_of, micros_of
from csparql.storage.terms import term_array
from csparql.storage.watermarks import advance_watermark, read_watermarks
from csparql.core.windows import from_micros, parse_instant
from storage.helpers import write_static, write_stream

MINUTE = 60_000_000
HOUR = 60 * MINUTE
T0 = parse_instant("2010-03-22T08:00:00Z")
STREAM = "http://streams.org/milantollgates.trdf"
QUERY = f"""REGISTER QUERY Tollgates COMPUTED EVERY 5m AS
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <{STREAM}> [RANGE 10m STEP 5m]
WHERE {{ ?gate <http://linkedurbandata.org/traffic#registers> ?car . }}
GROUP BY ?gate
"""


def run_row(query: str, end: int, started: int, status: str = "succeeded", complete: bool | None = True,
            rows: int = 3, version: str | None = "abc", triples: dict | None = None) -> dict:
    return {
        "run_id": f"{query}-{end}-{started}", "query": query, "window_start": from_micros(end - 10 * MINUTE),
        "window_end": from_micros(end), "started_at": from_micros(started), "status": status,
        "error": "ValueError: boom" if status == "failed" else None,
        "triples_read": json.dumps(triples if triples is not None else {STREAM: 10}),
        "files_read": json.dumps({STREAM: 1}), "rows_written": rows if status == "succeeded" else 0,
        "duration_ms": 100 + rows, "complete": complete, "query_version": version,
    }


def append_runs(settings: Settings, rows: list[dict]) -> None:
    """One commit (one file) per row, as the engine appends them."""
    for row in rows:
        delta.append(settings.warehouse.runs, pa.Table.from_pylist([row], schema=schema.RUNS), schema.RUNS)


def unreadable(path: Path) -> None:
    path.write_bytes(b"not parquet any more")


# --- recent windows --------------------------------------------------------------------------------------


def test_recent_windows_keep_the_latest_run_of_each_window_with_its_state(settings):
    ends = [T0 + i * 5 * MINUTE for i in range(1, 7)]
    rows = [
        run_row("Tollgates", ends[0], T0 + 1, complete=True),
        run_row("Tollgates", ends[1], T0 + 2, complete=False),                   # evaluated late
        run_row("Tollgates", ends[2], T0 + 3, status="failed"),
        run_row("Tollgates", ends[3], T0 + 4, complete=None),                     # csparql run: unchecked
        run_row("Tollgates", ends[4], T0 + 5, status="failed"),
        run_row("Tollgates", ends[4], T0 + 6, complete=True, rows=7, version="def"),  # re-run: it wins
        run_row("Other", ends[5], T0 + 7),
    ]
    append_runs(settings, rows)
    windows = monitoring.recent_windows(settings.warehouse, "Tollgates", limit=10)
    assert [(w.window_end, w.state) for w in windows] == [
        (ends[4], "complete"), (ends[3], "evaluated"), (ends[2], "failed"), (ends[1], "late"), (ends[0], "complete")]
    latest = windows[0]
    assert (latest.rows_written, latest.version, latest.evaluations, latest.total_triples_read) == (7, "def", 2, 10)
    assert windows[2].error == "ValueError: boom"


def test_recent_windows_read_only_the_files_of_the_latest_windows(settings):
    ends = [T0 + i * 5 * MINUTE for i in range(1, 31)]
    order = list(range(30))
    random.Random(7).shuffle(order)  # evaluations need not arrive in window order (backfills)
    append_runs(settings, [run_row("Tollgates", ends[i], T0 + n) for n, i in enumerate(order)])
    # Every file holding one of the 26 oldest windows becomes unreadable: the 3 latest are still found.
    actions = pa.table(delta.open_table(settings.warehouse.runs).get_add_actions(flatten=True))
    for relative, high in zip(actions["path"].to_pylist(), actions["max.window_end"].to_pylist(), strict=True):
        if micros_of(high) < ends[-4]:
            unreadable(settings.warehouse.runs / relative)
    windows = monitoring.recent_windows(settings.warehouse, "Tollgates", limit=3)
    assert [w.window_end for w in windows] == ends[-1:-4:-1]


def test_a_runs_table_without_query_versions_reads_as_unversioned(settings):
    old = pa.schema([f for f in schema.RUNS if f.name != "query_version"])
    row = {k: v for k, v in run_row("Tollgates", T0 + 5 * MINUTE, T0).items() if k != "query_version"}
    delta.append(settings.warehouse.runs, pa.Table.from_pylist([row], schema=old), old)
    new = run_row("Tollgates", T0 + 10 * MINUTE, T0 + 1, version="v2")
    delta.append(settings.warehouse.runs, pa.Table.from_pylist([new], schema=schema.RUNS), schema.RUNS, merge_schema=True)
    windows = monitoring.recent_windows(settings.warehouse, "Tollgates")
    assert [(w.window_end, w.version) for w in windows] == [(T0 + 10 * MINUTE, "v2"), (T0 + 5 * MINUTE, None)]


# --- lag -------------------------------------------------------------------------------------------------


def test_lag_is_how_far_the_latest_evaluated_window_is_behind_the_watermark_less_the_lateness(settings):
    deployment = deployment_of_text(QUERY, "Tollgates", settings)
    evaluated = [WindowRun(T0 - 5 * MINUTE, T0 + 5 * MINUTE, "complete", T0, {}, {}, 1, 1, None, None, "r1")]
    advance_watermark(settings.warehouse, STREAM, T0 + 33 * MINUTE, "test")
    lag, = monitoring.stream_lags(deployment, read_watermarks(settings.warehouse), evaluated)
    assert lag.watermark == T0 + 33 * MINUTE
    assert lag.ready_until == T0 + 31 * MINUTE  # minus the allowed lateness of 2m
    assert lag.lag == 26 * MINUTE
    # windows ending 10, 15, 20, 25, 30 (every 5 minutes) are covered by the watermark and not evaluated
    assert lag.windows_behind == 5
    assert monitoring.stream_lags(deployment, {}, evaluated)[0].lag is None  # no watermark yet


# --- streams and static graphs -----------------------------------------------------------------------------


def test_stream_statistics_come_from_the_log_and_match_the_triples_written(settings):
    gate, registers = URIRef("http://example.org/gate"), URIRef("http://linkedurbandata.org/traffic#registers")
    times = [T0 + 7 * MINUTE * i for i in range(40)]  # about 4.7 hours
    triples = [(gate, registers, URIRef(f"http://example.org/car{i}"), t) for i, t in enumerate(times)]
    write_stream(settings.warehouse, STREAM, triples[:25])
    write_stream(settings.warehouse, STREAM, triples[25:], first_arrival=25)
    write_static(settings.warehouse, None, [(gate, URIRef("http://example.org/in"), Literal("street"))] * 3)
    advance_watermark(settings.warehouse, STREAM, times[-1], "test")
    expected = Counter(bucket_of(t) for t in times)
    # the files are never opened: make every data file unreadable
    for folder in settings.warehouse.stream_folders():
        for file in folder.rglob("*.parquet"):
            unreadable(file)
    stream, = monitoring.stream_statistics(settings.warehouse)
    assert stream.iri == STREAM and stream.watermark == times[-1]
    assert stream.size.triples == 40 and stream.size.files >= 2 and stream.size.bytes > 0
    assert {from_micros(h).strftime("%Y%m%dT%H"): n for h, n in stream.per_hour.items()} == dict(expected)
    series = monitoring.hourly_series(stream.per_hour, 48)
    assert [n for _, n in series] == [expected[bucket_of(h)] for h, _ in series] and len(series) == len(expected)
    assert len(monitoring.hourly_series(stream.per_hour, 2)) == 2
    graph, = monitoring.static_graphs(settings.warehouse)
    assert graph.iri is None and graph.size.triples == 3


# --- latest results --------------------------------------------------------------------------------------


def write_bindings(settings: Settings, end: int, rows: list[tuple], version: str) -> None:
    vars_ = (Variable("gate"), Variable("cars"))
    path = settings.warehouse.results("Tollgates", "bindings")
    delta.ensure(path, pa.schema(list(schema.WINDOW_COLUMNS)),
                 properties={"csparql.variables": json.dumps(["gate", "cars"])})
    existing = pa.schema(delta.open_table(path).schema().to_arrow())
    terms = pa.table([term_array([row[i] for row in rows]) for i in range(len(vars_))], names=["gate", "cars"])
    table = rt.bindings_table(vars_, terms, end - 10 * MINUTE, end, existing, version)
    rt.write_window(path, table, existing, end, merge_schema=True)


def test_latest_results_are_the_rows_of_the_last_window_read_from_its_files_only(settings):
    first = [(URIRef("http://example.org/g1"), Literal(3)), (URIRef("http://example.org/g2"), None)]
    second = [(URIRef(f"http://example.org/g{i}"), Literal(i)) for i in range(5)]
    write_bindings(settings, T0 + 5 * MINUTE, first, "v1")
    path = settings.warehouse.results("Tollgates", "bindings")
    old_files = {f.uri for f in delta.live_files(delta.open_table(path), path)}
    write_bindings(settings, T0 + 10 * MINUTE, second, "v2")
    window = monitoring.latest_results(settings.warehouse, "Tollgates", limit=3)
    assert (window.kind, window.window_end, window.total, window.version) == ("bindings", T0 + 10 * MINUTE, 5, "v2")
    assert window.columns == ("gate", "cars")
    assert window.rows == tuple((f"<http://example.org/g{i}>", f'"{i}"^^<http://www.w3.org/2001/XMLSchema#integer>')
                                for i in range(3))
    earlier = monitoring.latest_results(settings.warehouse, "Tollgates", window_end=T0 + 5 * MINUTE)
    assert earlier.rows == (("<http://example.org/g1>", '"3"^^<http://www.w3.org/2001/XMLSchema#integer>'),
                            ("<http://example.org/g2>", None))
    for uri in old_files:
        unreadable(Path(uri))
    assert monitoring.latest_results(settings.warehouse, "Tollgates").window_end == T0 + 10 * MINUTE
    assert monitoring.latest_results(settings.warehouse, "Nothing") is None


# --- windows with Airflow's runs ---------------------------------------------------------------------------


def test_a_window_being_evaluated_again_shows_as_running_and_new_windows_appear_while_their_run_waits(settings):
    schedule = deployment_of_text(QUERY, "Tollgates", settings).schedule
    done = WindowRun(T0 + 5 * MINUTE, T0 + 15 * MINUTE, "complete", T0 + HOUR, {}, {}, 4, 120, None, "v1", "r1")
    failed = WindowRun(T0, T0 + 10 * MINUTE, "failed", T0 + HOUR, {}, {}, 0, 50, "boom", "v1", "r2")
    runs = [
        AirflowRun("old", "success", T0 + 15 * MINUTE, "backfill", T0 + HOUR - 10),
        AirflowRun("again", "running", T0 + 15 * MINUTE, "manual", T0 + 2 * HOUR,
                   {"await_window": "success", "evaluate_window": "running"}),
        AirflowRun("waiting", "running", T0 + 20 * MINUTE, "scheduled", T0 + 2 * HOUR,
                   {"await_window": "deferred", "evaluate_window": None}),
        AirflowRun("broken", "failed", T0 + 25 * MINUTE, "scheduled", T0 + 2 * HOUR, {"await_window": "failed"}),
        AirflowRun("retry-of-failed", "success", T0 + 10 * MINUTE, "scheduled", T0 + HOUR - 5),
    ]
    views = monitoring.window_views([done, failed], runs, schedule=schedule)
    assert [(v.window_end, v.state, v.detail) for v in views] == [
        (T0 + 25 * MINUTE, "failed", "the Airflow run failed before evaluating: see its log"),
        (T0 + 20 * MINUTE, "running", "waiting for its inputs to land"),
        (T0 + 15 * MINUTE, "running", "evaluating"),
        (T0 + 10 * MINUTE, "failed", None),  # its evaluation's error is shown once, from the evaluation
    ]
    assert views[3].evaluation.error == "boom"
    assert views[1].window_start == T0 + 10 * MINUTE and views[1].evaluation is None
    assert views[2].evaluation is done and views[2].dag_run.run_id == "again"
    assert views[3].dag_run.run_id == "retry-of-failed"


def test_a_run_of_one_task_shows_waiting_while_its_task_is_deferred_and_evaluating_once_it_resumes(settings):
    # A run is one task, evaluate_window: deferred on the triggerer while it waits, then in a worker. (The
    # test above has runs of the two tasks await_window → evaluate_window that earlier versions made.)
    schedule = deployment_of_text(QUERY, "Tollgates", settings).schedule
    runs = [
        AirflowRun("waiting", "running", T0 + 30 * MINUTE, "scheduled", T0 + 2 * HOUR, {"evaluate_window": "deferred"}),
        AirflowRun("resumed", "running", T0 + 25 * MINUTE, "backfill", T0 + 2 * HOUR, {"evaluate_window": "scheduled"}),
        AirflowRun("evaluating", "running", T0 + 20 * MINUTE, "manual", T0 + 2 * HOUR, {"evaluate_window": "running"}),
        AirflowRun("retrying", "running", T0 + 15 * MINUTE, "scheduled", T0 + 2 * HOUR,
                   {"evaluate_window": "up_for_retry"}),
        AirflowRun("broken", "failed", T0 + 10 * MINUTE, "scheduled", T0 + 2 * HOUR, {"evaluate_window": "failed"}),
    ]
    views = monitoring.window_views([], runs, schedule=schedule)
    assert [(v.window_end, v.state, v.detail, v.dag_run.run_id) for v in views] == [
        (T0 + 30 * MINUTE, "running", "waiting for its inputs to land", "waiting"),
        (T0 + 25 * MINUTE, "running", "evaluating", "resumed"),
        (T0 + 20 * MINUTE, "running", "evaluating", "evaluating"),
        (T0 + 15 * MINUTE, "running", "failed once, will retry", "retrying"),
        (T0 + 10 * MINUTE, "failed", "the Airflow run failed before evaluating: see its log", "broken"),
    ]
    assert views[0].window_start == T0 + 20 * MINUTE and views[0].evaluation is None


def test_the_page_signature_changes_when_a_committed_windows_airflow_run_finishes():
    # The evaluation commits its results, then the scheduler marks the run done: the page rendered in
    # between shows the window complete without its run; it must see that it is out of date once the run is done.
    done = WindowRun(T0 + 5 * MINUTE, T0 + 15 * MINUTE, "complete", T0 + HOUR, {}, {}, 4, 120, None, "v1", "r1")
    finishing = AirflowRun("manual-1", "running", T0 + 15 * MINUTE, "manual", T0 + HOUR - 30,
                           {"await_window": "success", "evaluate_window": "success"})
    before = monitoring.window_views([done], [finishing])
    assert before[0].state == "complete" and before[0].dag_run is None
    after = monitoring.window_views([done], [AirflowRun("manual-1", "success", T0 + 15 * MINUTE, "manual",
                                                        T0 + HOUR - 30)])
    assert after[0].dag_run.run_id == "manual-1"
    assert monitoring.page_signature("active", False, before) != monitoring.page_signature("active", False, after)


# --- late triples and stale windows ----------------------------------------------------------------------


def test_stale_windows_show_per_window_and_late_triples_per_stream(settings):
    from csparql.storage import stale_windows as sw

    def stale(query: str, end: int, version: int, late: int, p50: int, high: int, status: str, detected: int,
              stream: str = STREAM) -> sw.StaleWindow:
        return sw.StaleWindow(query, end - 10 * MINUTE, end, stream, version, T0 + HOUR, sw.LATE_TRIPLES, late, p50,
                              high, detected, status != sw.BEYOND_HORIZON, status)

    pending = stale("Tollgates", T0 + 10 * MINUTE, 4, 2, 1_000, 3_000, sw.PENDING, T0 + HOUR)
    sw.append_stale_windows(settings.warehouse, [
        pending,
        stale("Tollgates", T0 + 15 * MINUTE, 4, 3, 2_000, 5_000, sw.PENDING, T0 + HOUR),  # overlaps: shares triples
        stale("Tollgates", T0 - HOUR, 4, 1, 9_000, 9_000, sw.BEYOND_HORIZON, T0 + HOUR),
        stale("Other", T0 + 10 * MINUTE, 7, 4, 500, 700, sw.PENDING, T0 + 2 * HOUR),
    ])
    sw.append_stale_windows(settings.warehouse, [
        sw.StaleWindow(**{**pending.__dict__, "status": sw.REVISED, "revision": 1, "detected_at": T0 + 2 * HOUR})])

    windows = monitoring.window_staleness(settings.warehouse, "Tollgates")

    assert {end: w.status for end, w in windows.items()} == {
        T0 + 10 * MINUTE: sw.REVISED, T0 + 15 * MINUTE: sw.PENDING, T0 - HOUR: sw.BEYOND_HORIZON}
    assert windows[T0 + 10 * MINUTE].reasons == (f"late triples on <{STREAM}>",)
    late = monitoring.late_triples_by_stream(settings.warehouse)
    # no stream table here to read the commits' event times from: what the windows recorded (commit 4 reached
    # three windows, overlapping: 3 late triples at most; commit 7 four)
    assert late[STREAM] == monitoring.LateTriples(3 + 4, 1_000, 9_000, 4)  # the median of 10 weighted medians

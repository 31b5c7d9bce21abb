"""Observing registered queries' DAGs on a running Airflow stack: unpaused together for a while, their lag behind
the stream sampled from the runs table, then paused once the observed windows' runs finished; each DAG's trial
figures (windows evaluated and expected, lag samples, how fast the lag grows, commit latencies). The Airflow end-to-end
measurement (``benchmarks/airflow_e2e.py``) and the capacity sweep (``benchmarks/capacity.py``) both observe
through it."""

from __future__ import annotations

import logging
import time

from benchmarks.measure import linear_slope
from csparql.stack.airflow_stack import ServerError
from csparql.storage.instants import micros_of
from csparql.core.windows import parse_duration

log = logging.getLogger("benchmarks.airflow")
KEEP_UP_SLOPE = 0.1
"""A DAG keeps up when its lag grows by less than this many seconds per second of observation (``lag_growth``)."""
SAMPLE_SECONDS = 2.0

DRAIN_ATTEMPTS = 15
"""Tries of each call that ends a trial (2 s apart): a SQLite database kept busy by a stack that fell behind
answers "database is locked" for longer than an ordinary call's five tries."""
DRAIN_REQUESTS = 8  # requests in flight at once while the DAGs are paused
RUNS_PAGE = 100  # the api-server's largest page by default


def _runs(warehouse) -> list[dict]:
    from csparql.storage import delta
    from csparql.storage.statistics import read_table

    if not delta.exists(warehouse.runs):
        return []
    return read_table(warehouse.runs).to_pylist()


def observe(stack, warehouse, names: list[str], period: str, seconds: float, drain: float = 300) -> list[dict]:
    """Unpause the DAGs ``names`` together for ``seconds``, sampling their lags; pause them, let their runs
    finish; each DAG's trial figures (see the module docstring)."""
    period_micros = parse_duration(period)
    started = time.time_ns() // 1000
    for name in names:
        stack.unpause(name)
    samples: dict[str, list] = {name: [] for name in names}
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(SAMPLE_SECONDS)
        now = time.time_ns() // 1000
        runs = _runs(warehouse)
        for name in names:
            ends = [micros_of(r["window_end"]) for r in runs if r["query"] == name and r["status"] == "succeeded"]
            if ends:
                samples[name].append(((now - started) / 1e6, (now - max(ends)) / 1e6))
    ended = time.time_ns() // 1000
    _drain(stack, names, ended, drain)
    trials = []
    runs = _runs(warehouse)
    # The windows of the observation: from the one the first run evaluates (the latest closed when the DAG was
    # unpaused) to the last that closed a full period before the observation ended.
    first = started - started % period_micros
    last = (ended - period_micros) - (ended - period_micros) % period_micros
    expected = max(0, (last - first) // period_micros + 1)
    for name in names:
        mine = [r for r in runs if r["query"] == name and first <= micros_of(r["window_end"]) <= last]
        succeeded = [r for r in mine if r["status"] == "succeeded"]
        before_end = sorted({micros_of(r["window_end"]) for r in succeeded})
        # (window end, its end → committed in seconds); the first window closed before the DAG was unpaused, so
        # its latency includes the time it was paused
        latencies = [(micros_of(r["window_end"]),
                      (micros_of(r["started_at"]) + r["duration_ms"] * 1000 - micros_of(r["window_end"])) / 1e6)
                     for r in succeeded]
        latency = sorted(seconds for _, seconds in latencies)
        latency_while_on = sorted(seconds for end, seconds in latencies if end > started)
        waited, after_data = _split_at_inputs(r for r in succeeded if micros_of(r["window_end"]) > started)
        lag = samples[name]
        slope = lag_growth(latencies, started, lag)
        # no lag sample at all means no window was committed while observed: it did not keep up
        keeps_up = bool(lag) and (slope is None or slope < KEEP_UP_SLOPE) and len(before_end) >= expected - 1
        trials.append({
            "dag": name,
            "period": period,
            "period_seconds": period_micros / 1e6,
            "observed_seconds": (ended - started) / 1e6,
            "windows_evaluated": len(before_end),
            "windows_expected": expected,
            "failed_runs": len([r for r in mine if r["status"] == "failed"]),
            "lag_samples": lag,
            "lag_slope": slope,
            "lag_at_end_seconds": lag[-1][1] if lag else None,
            "commit_latency_seconds": latency,
            "commit_latency_unpaused_seconds": latency_while_on,
            "inputs_wait_seconds": waited,
            "after_inputs_seconds": after_data,
            "evaluation_seconds": sorted(r["duration_ms"] / 1000 for r in succeeded),
            "keeps_up": keeps_up,
        })
    return trials


def lag_growth(latencies: list[tuple[int, float]], started: int, lag: list[tuple[float, float]]) -> float | None:
    """How fast a query falls behind, in seconds per second: the slope of its windows' end → committed
    latencies over their window ends (µs), for the windows that closed after it was unpaused at ``started``,
    when there are at least three of them; else the slope of its sampled lag (``lag``: (seconds since the
    unpause, lag) pairs) over the last two thirds of the observation. A query that keeps up has latencies
    that stay flat; its sampled lag is a sawtooth (it grows by a second every second until the next window's
    commit, then falls by a period), whose slope over a few periods depends on where they start and end, up to
    more than 0.1 s/s for a query that keeps up."""
    after_unpause = [(end / 1e6, seconds) for end, seconds in latencies if end > started]
    if len(after_unpause) >= 3:
        return linear_slope(sorted(after_unpause))
    return linear_slope(lag[len(lag) // 3:]) if len(lag) >= 6 else linear_slope(lag)


def _split_at_inputs(runs) -> tuple[list[float], list[float]]:
    """Each run's window end → committed, split where its last input was committed (the runs table's
    ``inputs_complete_at``): the time waiting for the stream's data (window end → inputs complete), then the
    time after it (inputs complete → committed: the wake, the queue for an evaluation place, the evaluation).
    Runs without ``inputs_complete_at`` (an incomplete window, a runs table older than the column) are left
    out; both lists are sorted."""
    waited, after = [], []
    for run in runs:
        complete = run.get("inputs_complete_at")
        if complete is None:
            continue
        committed = micros_of(run["started_at"]) + run["duration_ms"] * 1000
        waited.append((micros_of(complete) - micros_of(run["window_end"])) / 1e6)
        after.append((committed - micros_of(complete)) / 1e6)
    return sorted(waited), sorted(after)


def _drain(stack, dags: list[str], ended: int, timeout: float = 300) -> None:
    """Let the runs of the windows that closed before ``ended`` (µs) finish, those of all ``dags`` within one
    ``timeout``; then pause every DAG and mark its unfinished runs failed, so that nothing of this trial runs
    during the next one. The unfinished runs are listed for all DAGs at once, and the DAGs paused and their runs
    failed ``DRAIN_REQUESTS`` requests at a time, once none of the observed runs is pending: DAG by DAG, a wait
    and a pause each took over 17 s a DAG at 300 queries on a stack that had fallen behind. (A paused DAG's
    running runs are not scheduled further, so pausing a DAG before its observed runs end would strand them.)"""
    from concurrent.futures import ThreadPoolExecutor

    from csparql.core.windows import parse_instant

    deadline = time.monotonic() + timeout
    while True:
        pending = [r for r in unfinished_runs(stack, dags)
                   if r.get("data_interval_end") and parse_instant(r["data_interval_end"]) <= ended]
        if not pending:
            break
        if time.monotonic() >= deadline:
            log.warning("%d run(s) of the observed windows of %d DAG(s) still unfinished after the drain",
                        len(pending), len({r["dag_id"] for r in pending}))
            break
        time.sleep(2)
    with ThreadPoolExecutor(DRAIN_REQUESTS) as pool:
        list(pool.map(lambda dag: stack.api("PATCH", f"dags/{dag}", {"is_paused": True}, attempts=DRAIN_ATTEMPTS),
                      dags))
        list(pool.map(lambda run: _fail(stack, run), unfinished_runs(stack, dags)))


def unfinished_runs(stack, dags: list[str]) -> list[dict]:
    """The queued and running runs of the DAGs ``dags``, from one listing of every DAG's runs (page by page)."""
    wanted = set(dags)
    runs: list[dict] = []
    offset = 0
    while True:
        page = stack.api("GET", f"dags/~/dagRuns?state=queued&state=running&limit={RUNS_PAGE}&offset={offset}")
        listed = page.get("dag_runs", [])
        runs += [run for run in listed if run["dag_id"] in wanted]
        offset += len(listed)
        if not listed or offset >= page.get("total_entries", 0):
            return runs


def _fail(stack, run: dict) -> None:
    try:
        stack.api("PATCH", f"dags/{run['dag_id']}/dagRuns/{run['dag_run_id']}", {"state": "failed"},
                  allow=(404, 409), attempts=DRAIN_ATTEMPTS)
    except ServerError as error:  # the trial's figures are measured: keep them
        log.warning("%s: run %s was not marked failed and may still run during the next trial: %s",
                    run["dag_id"], run["dag_run_id"], error)

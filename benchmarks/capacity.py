"""Capacity: how many registered queries the embedded stack keeps up with at ``COMPUTED EVERY 1m``.

For each N of the profile's ``capacity_queries`` (20, 50, 100, 150 in the full mode), N queries are registered in
the stack's registry with the product's ``register_text`` (each gets its loader, and Airflow's DAG processor
its DAG, exactly as ``csparql register`` does) and observed together for ``capacity_observe_seconds`` while the
tollgate stream lands continuously at ``capacity_rate`` triples a second. The queries are a mix of the
examples over that stream — the per-tollgate count (02), the per-district count (04), the per-street count
(05), the two aggregates (06), the stream of district counts (07, ``REGISTER STREAM``) and the physical window
(16) — in that order, repeated, each with ``[RANGE 5m STEP p]`` (the physical window: ``[TRIPLES 1000]``) and
``COMPUTED EVERY p``. The sweep runs on the stack of ``benchmarks/airflow_e2e.py``: Airflow's four components
on loopback with SQLite and the LocalExecutor, and every evaluation a client of one Spark Connect server, as in
``csparql stack``.

The queries of a smaller N are the first of the larger: N = 10 unpauses the five of N = 5 again (their DAGs do
not catch up: only the latest window is run on unpausing) and five more. For each N:

- **due**: the windows that closed during the observation, for every query (see ``observation.observe``);
  **evaluated** those whose results were committed (the drain after the observation lets runs already under way
  finish); **missed** = due − evaluated; **failed** runs;
- **lag**: now − the end of each query's latest committed window, sampled every two seconds; how fast it grows
  (``observation.lag_growth``: the slope of the query's window latencies over their window ends, the largest
  over the queries) says whether the stack falls behind;
- **commit latency**: a window's end to its results committed (the run's end in the runs table), p50 and p95
  over every committed window of every query; and the same over the windows that closed after the queries
  were unpaused (the first window of each query closed before: its latency includes the time the query was
  paused, and all N first windows are due at once). Those windows' latency is also split where their last
  input was committed (the runs table's ``inputs_complete_at``): the wait for the stream's data (window end →
  inputs complete, p50), which the stream's landing cadence sets, and the rest (inputs complete → committed,
  p50 and p95: the wake, the queue for an evaluation place and the evaluation), which is csparql's;
- **CPU**: the machine's busy share of its cores over the observation (``psutil.cpu_times``), and the load;
  and each process's CPU per window evaluated (``component_cpu_seconds``): Airflow's components, the Spark
  Connect server, and the benchmark's own process (the feeder and the observation).

N is **kept up with** when no window is missed, no run failed and no query's lag grows (by less than
``observation.KEEP_UP_SLOPE`` seconds per second). The capacity is the largest N kept up with; the sweep stops
at the first N that is not (a larger N cannot be).
"""

from __future__ import annotations

import logging
import math
import os
import statistics
from pathlib import Path

from benchmarks import data
from benchmarks.observation import KEEP_UP_SLOPE, observe

log = logging.getLogger("benchmarks.capacity")

PREFIXES = """PREFIX c: <http://linkedurbandata.org/city#>
PREFIX t: <http://linkedurbandata.org/traffic#>
"""

TEMPLATES: tuple[tuple[str, str], ...] = (
    ("PerTollgate", """SELECT DISTINCT ?tollgate ?passages
FROM STREAM <{stream}> [RANGE 5m STEP {period}]
WHERE {{ ?tollgate t:registers ?car . }}
AGGREGATE {{ ( ?passages, COUNT, {{?tollgate}} ) }}"""),
    ("PerDistrict", """SELECT DISTINCT ?district ?passages
FROM STREAM <{stream}> [RANGE 5m STEP {period}]
WHERE {{ ?tollgate t:registers ?car .
        ?tollgate c:placedIn ?street .
        ?district c:contains ?street . }}
AGGREGATE {{ (?passages, COUNT, {{?district}}) }}"""),
    ("PerStreet", """SELECT ?tollgate ?car ?street ?passages
FROM STREAM <{stream}> [RANGE 5m STEP {period}]
WHERE {{ ?tollgate t:registers ?car .
        ?tollgate c:placedIn ?street . }}
AGGREGATE {{ (?passages, COUNT(?car), {{?street}}) }}"""),
    ("TwoAggregates", """SELECT DISTINCT ?street ?passages ?total-sensor
FROM STREAM <{stream}> [RANGE 5m STEP {period}]
WHERE {{ ?tollgate t:registers ?car .
        ?tollgate c:placedIn ?street .
        ?sensor c:placedIn ?street . }}
AGGREGATE {{ ( ?passages, COUNT(?car), {{?street}} ) }}
AGGREGATE {{ ( ?total-sensor, COUNT(?sensor), {{?street}} ) FILTER (?total-sensor >= 1) }}"""),
    ("DistrictStream", """CONSTRUCT {{ ?district t:has-entering-cars ?passages }}
FROM STREAM <{stream}> [RANGE 5m STEP {period}]
WHERE {{ ?tollgate t:registers ?car .
        ?district c:contains ?street .
        ?tollgate c:placedIn ?street . }}
AGGREGATE {{ ( ?passages, COUNT, {{?district}} ) }}"""),
    ("LastThousand", """SELECT ?tollgate (COUNT(?car) AS ?passages)
FROM STREAM <{stream}> [TRIPLES 1000]
WHERE {{ ?tollgate t:registers ?car . }}
GROUP BY ?tollgate"""),
)
"""The examples the sweep registers, in turn: (kind, the query after its REGISTER line and prefixes)."""


def query_text(index: int, period: str) -> tuple[str, str]:
    """The ``index``-th query of the sweep: its name and its text (see ``TEMPLATES``)."""
    kind, body = TEMPLATES[index % len(TEMPLATES)]
    name = f"Capacity{index:02d}{kind}"
    form = "STREAM" if body.startswith("CONSTRUCT") else "QUERY"
    text = (f"REGISTER {form} {name} COMPUTED EVERY {period} AS\n{PREFIXES}"
            + body.format(stream=data.MILAN_TOLLGATES, period=period) + "\n")
    return name, text


def register_queries(settings, count: int, period: str) -> list[str]:
    """Register the sweep's first ``count`` queries in ``settings.registry``; their DAG ids."""
    from csparql.deploy.plan import deployment_of
    from csparql.deploy.registration import register_text

    dag_ids = []
    for index in range(count):
        name, text = query_text(index, period)
        path = register_text(text, settings, name=name, replace=True, source_name=f"{name}.rq")
        dag_ids.append(deployment_of(path, settings).dag_id)
    return dag_ids


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank percentile of ``values`` (None for none)."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, min(len(ordered), math.ceil(share * len(ordered))))
    return ordered[rank - 1]


def summarize(count: int, trials: list[dict], cpu_busy: float | None, load: float | None) -> dict:
    """One N's figures from the per-query trials of ``observation.observe`` (see the module docstring)."""

    due = sum(t["windows_expected"] for t in trials)
    evaluated = sum(min(t["windows_evaluated"], t["windows_expected"]) for t in trials)
    failed = sum(t["failed_runs"] for t in trials)
    slopes = [t["lag_slope"] for t in trials if t["lag_slope"] is not None]
    latencies = [value for t in trials for value in t["commit_latency_seconds"]]
    latencies_unpaused = [value for t in trials for value in t.get("commit_latency_unpaused_seconds", ())]
    waited = [value for t in trials for value in t.get("inputs_wait_seconds", ())]
    after_inputs = [value for t in trials for value in t.get("after_inputs_seconds", ())]
    durations = [value for t in trials for value in t["evaluation_seconds"]]
    never_committed = [t["dag"] for t in trials if not t["lag_samples"]]
    worst_slope = max(slopes) if slopes else None
    kept_up = (due > 0 and evaluated == due and failed == 0 and not never_committed
               and (worst_slope is None or worst_slope < KEEP_UP_SLOPE))
    return {
        "queries": count,
        "windows_due": due,
        "windows_evaluated": evaluated,
        "windows_missed": due - evaluated,
        "failed_runs": failed,
        "queries_never_committed": never_committed,
        "lag_slope_max": worst_slope,
        "lag_at_end_max_seconds": max((t["lag_at_end_seconds"] or 0.0 for t in trials), default=None),
        "commit_latency_p50_seconds": percentile(latencies, 0.50),
        "commit_latency_p95_seconds": percentile(latencies, 0.95),
        "commit_latency_unpaused_p50_seconds": percentile(latencies_unpaused, 0.50),
        "commit_latency_unpaused_p95_seconds": percentile(latencies_unpaused, 0.95),
        "inputs_wait_p50_seconds": percentile(waited, 0.50),
        "after_inputs_p50_seconds": percentile(after_inputs, 0.50),
        "after_inputs_p95_seconds": percentile(after_inputs, 0.95),
        "evaluation_median_seconds": statistics.median(durations) if durations else None,
        "cpu_busy_percent": cpu_busy,
        "load_average": load,
        "kept_up": kept_up,
        "trials": trials,
    }


def _cpu_busy_percent(before, after) -> float | None:
    total = sum(after) - sum(before)
    idle = (after.idle - before.idle) + (getattr(after, "iowait", 0.0) - getattr(before, "iowait", 0.0))
    return None if total <= 0 else 100.0 * (total - idle) / total


def component_cpu_seconds(processes: dict[str, int]) -> dict[str, float]:
    """The CPU seconds (user and system) each named process has used so far: its own, that of the ended
    children it waited for, and that of its running descendants except those under another named process (the
    benchmark's process starts the stack's components: their CPU is theirs). A process that is gone counts 0."""
    import psutil

    named = set(processes.values())

    def used_by(process, waited: bool) -> float:
        times = process.cpu_times()
        return times.user + times.system + (times.children_user + times.children_system if waited else 0.0)

    def descendants(process) -> float:
        seconds = 0.0
        for child in process.children():
            if child.pid in named:
                continue
            try:
                seconds += used_by(child, waited=False) + descendants(child)
            except psutil.Error:
                pass
        return seconds

    used = {}
    for name, pid in processes.items():
        try:
            process = psutil.Process(pid)
            used[name] = used_by(process, waited=True) + descendants(process)
        except psutil.Error:
            used[name] = 0.0
    return used


def cpu_per_window(before: dict[str, float], after: dict[str, float], windows: int) -> dict[str, float | None]:
    """Each component's CPU milliseconds per window evaluated between two ``component_cpu_seconds``; a
    component whose count went down (restarted meanwhile) gives None."""
    return {name: None if not windows or after[name] < before.get(name, 0.0)
            else 1000 * (after[name] - before.get(name, 0.0)) / windows for name in after}


def stack_processes(stack, server=None) -> dict[str, int]:
    """The processes whose CPU the sweep reports: Airflow's components, the Spark Connect server (its launcher,
    whose child is the JVM) and this process (the feeder landing the stream, and the observation)."""
    processes = {name: process.pid for name, process in stack.processes.items()}
    if server is not None and server.process is not None:
        processes["Spark Connect server"] = server.process.pid
    processes["benchmark (feeder, observer)"] = os.getpid()
    return processes


def sweep(profile, stack, settings, warehouse, feeder, server=None) -> dict:
    """The capacity sweep (module docstring) on a running ``stack`` whose DAGs folder holds
    ``settings.registry``; ``feeder`` lands the stream, at the profile's rate during the sweep (start it at that
    rate, so that the first windows hold no more than later ones). Each count's point also gives, per window
    evaluated, the CPU each of the stack's processes used (``server``: the Spark Connect server the stack's
    queries run on)."""
    import psutil

    period = profile.capacity_period
    counts = sorted(profile.capacity_queries)
    result = {"status": "ok", "period": period, "rate": profile.capacity_rate,
              "observe_seconds": profile.capacity_observe_seconds, "points": [], "capacity": None}
    if not counts:
        return {**result, "status": "not run", "reason": "capacity_queries is empty in this run's parameters"}
    dag_ids = register_queries(settings, counts[-1], period)
    stack.wait_for_dags(dag_ids, timeout=max(180, 6 * len(dag_ids)))
    previous_rate = feeder.rate
    feeder.rate = profile.capacity_rate
    try:
        for count in counts:
            log.info("capacity: %d queries, COMPUTED EVERY %s, %d s", count, period, profile.capacity_observe_seconds)
            cpu_before = psutil.cpu_times()
            components_before = component_cpu_seconds(stack_processes(stack, server))
            trials = observe(stack, warehouse, dag_ids[:count], period, profile.capacity_observe_seconds,
                             profile.airflow_drain_seconds)
            components_after = component_cpu_seconds(stack_processes(stack, server))
            point = summarize(count, trials, _cpu_busy_percent(cpu_before, psutil.cpu_times()), os.getloadavg()[0])
            point["cpu_ms_per_window"] = cpu_per_window(components_before, components_after,
                                                        point["windows_evaluated"])
            result["points"].append(point)
            log.info("capacity: %d queries: %d/%d windows, %d failed, lag slope %s, p95 %s s, CPU %.0f%%: kept up: %s",
                     count, point["windows_evaluated"], point["windows_due"], point["failed_runs"],
                     point["lag_slope_max"], point["commit_latency_p95_seconds"], point["cpu_busy_percent"] or 0,
                     point["kept_up"])
            if not point["kept_up"]:
                break
            result["capacity"] = count
    finally:
        feeder.rate = previous_rate
    result["description"] = (
        f"N queries (a mix of examples 02, 04, 05, 06, 07 and 16 over the tollgate stream) registered at "
        f"`COMPUTED EVERY {period}`, observed together for {profile.capacity_observe_seconds} s each while the "
        f"stream lands at {profile.capacity_rate} triples/s; kept up = none of the windows due missed, no run "
        f"failed, no query's lag growing (slope < {KEEP_UP_SLOPE} s/s).")
    return result


def plot(capacity: dict, path: Path) -> Path:
    """``capacity_vs_queries.png``: commit latency p50/p95 (windows missed noted) and CPU against N; a figure
    that says so when the sweep did not run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = capacity.get("points") or []
    if not points:
        figure, axes = plt.subplots(figsize=(6, 2))
        axes.axis("off")
        axes.text(0.5, 0.5, f"capacity sweep {capacity.get('status', 'not run')}", ha="center", va="center")
        figure.savefig(path, dpi=110)
        plt.close(figure)
        return path
    counts = [p["queries"] for p in points]
    figure, (latency_axis, cpu_axis) = plt.subplots(1, 2, figsize=(11, 4))
    latency_axis.plot(counts, [p["commit_latency_p50_seconds"] for p in points], "o-", label="p50")
    latency_axis.plot(counts, [p["commit_latency_p95_seconds"] for p in points], "s--", label="p95")
    for p in points:
        if p["windows_missed"] or p["failed_runs"]:
            latency_axis.annotate(f"{p['windows_missed']} missed", (p["queries"], p["commit_latency_p95_seconds"] or 0),
                                  textcoords="offset points", xytext=(4, 6), fontsize=8, color="crimson")
    latency_axis.set_xlabel(f"queries at COMPUTED EVERY {capacity['period']}")
    latency_axis.set_ylabel("window end → results committed (s)")
    latency_axis.set_title(f"commit latency (capacity: {capacity.get('capacity') or 'none'})")
    latency_axis.legend()
    cpu_axis.bar([str(c) for c in counts], [p["cpu_busy_percent"] or 0 for p in points], color="slategray")
    cpu_axis.set_xlabel("queries")
    cpu_axis.set_ylabel("machine CPU busy (% of all cores)")
    cpu_axis.set_ylim(0, 100)
    cpu_axis.set_title("CPU over the observation")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path

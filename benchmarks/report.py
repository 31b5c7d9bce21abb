"""From the raw figures of a run to its report: the benchmark's targets (met or missed, and why), the Markdown
table and the plots. Everything here reads only the ``results.json`` dictionary, so a report can be written
again from a stored run (``python -m benchmarks report RUN_FOLDER``)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.measure import ratio

LABELS = {
    "csparql_warm": "csparql warm",
    "csparql_cold": "csparql cold (spark-submit)",
    "spark_hand": "hand-written Spark",
    "duckdb": "DuckDB",
    "pyoxigraph": "pyoxigraph",
    "rdflib": "rdflib",
    "csparql_filter": "FILTER over stored stream (social-data paper)",
    "csparql_panes": "csparql panes (live)",
    "csparql_panes_replay": "csparql panes (replay)",
}
TARGET_SIZES = (100_000, 1_000_000, 10_000_000)
COMPILED_WITHIN = 1.2
FASTER_THAN_SPARQL_STORES = 40.0
HISTORY_WITHIN = 1.2
TEN_MILLION = 10_000_000
TEN_MILLION_SECONDS = 15.0
MEMORY_GROWTH = 1.25
INGEST_RATE = 150_000
GRAPH_INGEST_RATE = 100_000
PANES_AT = 30
PANES_WORKLOAD = "topic_count"
"""The panes' targets are judged on the sliding sweep's topic count (the workload its figures came from)."""
PANES_FRACTION = 1 / 5
"""The panes' target: at RANGE/STEP = 30 the pane path costs at most this fraction of the recompute per stream minute."""
PLOTS = ("time_vs_window.png", "time_vs_history.png", "memory_vs_window.png", "cost_vs_sliding_ratio.png",
         "capacity_vs_queries.png")


def _index(result: dict) -> dict:
    return {(m["sweep"], m["workload"], m["system"], m["size"], m["history"], m["ratio"]): m
            for m in result["measurements"]}


def find(result: dict, sweep: str, system: str, size: int | None = None, history: int | None = None,
         ratio_: int | None = None, workload: str | None = None) -> dict | None:
    """The measurement of a system at one point of a sweep (None when the run has none)."""
    for m in result["measurements"]:
        if m["sweep"] != sweep or m["system"] != system:
            continue
        if size is not None and m["size"] != size:
            continue
        if history is not None and m["history"] != history:
            continue
        if ratio_ is not None and m["ratio"] != ratio_:
            continue
        if workload is not None and m["workload"] != workload:
            continue
        return m
    return None


def seconds(m: dict | None) -> float | None:
    """The median time of a measurement, or its extrapolated time when it was not run."""
    if m is None:
        return None
    return m["median_seconds"] if m["median_seconds"] is not None else m.get("estimated_seconds")


def _fmt_s(value: float | None) -> str:
    if value is None:
        return "–"
    if value >= 100:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value * 1000:.0f} ms"


def _fmt_x(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:.2g}×" if value < 0.1 else f"{value:.2f}×" if value < 10 else f"{value:.0f}×"


def _fmt_mb(value: int | None) -> str:
    return "–" if value is None else f"{value / 2**20:.0f} MB"


def _cell(m: dict | None) -> str:
    if m is None:
        return "–"
    if m["status"] == "not run":
        estimate = m.get("estimated_seconds")
        return f"not run (~{_fmt_s(estimate)})" if estimate else "not run"
    if m["status"] == "failed":
        return "failed"
    text = _fmt_s(m["median_seconds"])
    if m.get("agrees_with_reference") is False:
        text += " ≠"
    return text


# --- targets -----------------------------------------------------------------------------------------------


def targets(result: dict) -> list[dict]:
    """Each target of issues 6 and 18 with what this run measured: ``met`` is True, False, or None when the run
    did not measure it (e.g. quick mode's sizes); ``why`` explains a miss from measured facts."""
    return [_compiled_overhead(result), _versus_stores(result), _history(result), _ten_million(result),
            _ingest(result), _graph_ingest(result), _panes_sliding(result), _panes_tumbling(result)]


def _window_sizes(result: dict) -> list[int]:
    return sorted({m["size"] for m in result["measurements"] if m["sweep"] == "window"})


def _compiled_overhead(result: dict) -> dict:
    rows, misses = [], []
    for size in _window_sizes(result):
        warm, hand = find(result, "window", "csparql_warm", size), find(result, "window", "spark_hand", size)
        value = ratio(seconds(warm), seconds(hand))
        if value is None:
            continue
        rows.append(f"{size:,}: {value:.2f}×")
        if size in TARGET_SIZES and value > COMPILED_WITHIN:
            misses.append((size, warm, hand))
    judged = [s for s in _window_sizes(result) if s in TARGET_SIZES]
    target = {"id": "compiled_overhead", "target": f"compiled plan within {COMPILED_WITHIN}× of the hand-written "
              "Spark plan at 100k, 1M and 10M triples (warm)", "measured": "; ".join(rows) or "–"}
    if not judged:
        return {**target, "met": None, "why": "not measured at 100k/1M/10M in this run (sizes: "
                + ", ".join(f"{s:,}" for s in _window_sizes(result)) + ")"}
    if not misses:
        return {**target, "met": True, "why": None}
    reasons = []
    smallest = _window_sizes(result)[0]
    fixed = (seconds(find(result, "window", "csparql_warm", smallest)) or 0) - (
        seconds(find(result, "window", "spark_hand", smallest)) or 0)
    reasons.append(f"a fixed cost per evaluation of ~{_fmt_s(max(fixed, 0))} (warm − hand at {smallest:,} triples: "
                   "Delta log and statistics reads, optimizer, compiler, result conversion)")
    size, warm, hand = misses[-1]
    plan_w, plan_h = (warm or {}).get("plan"), (hand or {}).get("plan")
    if plan_w and plan_h:
        differences = [f"{k.replace('_', ' ')} {plan_w[k]} vs {plan_h[k]}"
                       for k in plan_w if plan_w[k] != plan_h.get(k)]
        if differences:
            reasons.append(f"at {size:,} the compiled plan has " + ", ".join(differences)
                           + " (compiled vs hand-written; plans/ holds both)")
        else:
            reasons.append(f"at {size:,} both plans have the same shape (plans/ holds both), and their "
                           f"repetitions spread over {_spread(warm)} (compiled) and {_spread(hand)} (hand-written): "
                           "the difference is within this run's noise")
    heap = (warm or {}).get("jvm_heap_peak_bytes")
    if heap:
        reasons.append(f"JVM heap peak {_fmt_mb(heap)} at {size:,}, with the driver's heap capped at "
                       "CSPARQL_DRIVER_MEMORY (2 GB by default)")
    return {**target, "met": False, "why": "; ".join(reasons)}


def _spread(m: dict | None) -> str:
    runs = [r["seconds"] for r in (m or {}).get("runs", []) if not r.get("warmup")]
    return f"{_fmt_s(min(runs))}–{_fmt_s(max(runs))}" if runs else "–"


def _versus_stores(result: dict) -> dict:
    size = 1_000_000
    warm = seconds(find(result, "window", "csparql_warm", size))
    parts, met = [], True
    for system in ("pyoxigraph", "rdflib"):
        m = find(result, "window", system, size)
        value = ratio(seconds(m), warm)
        if value is None:
            met = None if met is not False else met
            continue
        estimated = " (their time extrapolated)" if m and m["median_seconds"] is None else ""
        parts.append(f"{value:.0f}× faster than {system}{estimated}")
        if value < FASTER_THAN_SPARQL_STORES:
            met = False
    target = {"id": "versus_sparql_stores", "target": f"at 1M triples at least {FASTER_THAN_SPARQL_STORES:.0f}× "
              "faster than pyoxigraph and rdflib (load + query)", "measured": "; ".join(parts) or "–"}
    if warm is None:
        return {**target, "met": None, "why": "not measured at 1M triples in this run"}
    if met is False:
        stores = ", ".join(f"{system} {_fmt_s(seconds(find(result, 'window', system, size)))}"
                           for system in ("pyoxigraph", "rdflib"))
        return {**target, "met": False, "why": f"csparql warm took {_fmt_s(warm)} and {stores} (load + query, "
                "bulk-loaded in memory): the stores are faster at this size than the target assumed"}
    return {**target, "met": met, "why": None}


def _history(result: dict) -> dict:
    histories = sorted({m["history"] for m in result["measurements"] if m["sweep"] == "history"})
    target = {"id": "history", "target": f"time with 100× history within {HISTORY_WITHIN}× of 1× history, while the "
              "FILTER approach grows with history"}
    if len(histories) < 2:
        return {**target, "measured": "–", "met": None, "why": "no history sweep in this run"}
    low, high = histories[0], histories[-1]
    warm = ratio(seconds(find(result, "history", "csparql_warm", history=high)),
                 seconds(find(result, "history", "csparql_warm", history=low)))
    filtered = ratio(seconds(find(result, "history", "csparql_filter", history=high)),
                     seconds(find(result, "history", "csparql_filter", history=low)))
    measured = f"window: {_fmt_x(warm)} from {low}× to {high}× history; FILTER: {_fmt_x(filtered)}"
    if warm is None or filtered is None:
        return {**target, "measured": measured, "met": None, "why": "a history point failed"}
    met = warm <= HISTORY_WITHIN and filtered > HISTORY_WITHIN
    why = None
    if not met:
        why = []
        if warm > HISTORY_WITHIN:
            low_m, high_m = (find(result, "history", "csparql_warm", history=h) or {} for h in (low, high))
            why.append(
                f"the window's time grew {warm:.2f}×: its files held {low_m.get('window_file_triples', 0):,} triples "
                f"({low_m.get('window_files')} files) at {low}× and {high_m.get('window_file_triples', 0):,} "
                f"({high_m.get('window_files')} files) at {high}× — streams are partitioned by hour, and a file "
                "landed in one ingest spans its whole hour bucket, so a window shorter than an hour reads the "
                "bucket's other triples too")
        if filtered <= HISTORY_WITHIN:
            why.append("the FILTER approach did not grow: the history is too small for a scan to dominate")
        why = "; ".join(why)
    if high < 100:
        return {**target, "measured": measured, "met": None,
                "why": f"histories up to {high}× only in this run (the target is at 100×)"}
    return {**target, "measured": measured, "met": met, "why": why}


def _ten_million(result: dict) -> dict:
    sizes = _window_sizes(result)
    target = {"id": "ten_million", "target": f"10M-triple window in under {TEN_MILLION_SECONDS:.0f} s warm, with driver "
              f"memory that does not grow with window size (largest vs smallest ≥ 100k within {MEMORY_GROWTH}×)"}
    big = find(result, "window", "csparql_warm", TEN_MILLION)
    reference_size = next((s for s in sizes if s >= 100_000), sizes[0] if sizes else None)
    small = find(result, "window", "csparql_warm", reference_size) if reference_size else None
    largest = find(result, "window", "csparql_warm", sizes[-1]) if sizes else None
    heap = ratio((largest or {}).get("jvm_heap_peak_bytes"), (small or {}).get("jvm_heap_peak_bytes"))
    python = ratio((largest or {}).get("rss_increase_bytes"), (small or {}).get("rss_increase_bytes"))
    memory = (f"JVM heap peak {_fmt_mb((small or {}).get('jvm_heap_peak_bytes'))} at {reference_size:,} → "
              f"{_fmt_mb((largest or {}).get('jvm_heap_peak_bytes'))} at {sizes[-1]:,} ({_fmt_x(heap)})"
              if sizes else "–")
    if big is None or big["median_seconds"] is None:
        return {**target, "measured": memory, "met": None, "why": "no 10M-triple window in this run"}
    time_ok = big["median_seconds"] < TEN_MILLION_SECONDS
    memory_ok = heap is None or heap <= MEMORY_GROWTH
    measured = f"{_fmt_s(big['median_seconds'])} at 10M; {memory}"
    why = []
    if not time_ok:
        hand = seconds(find(result, "window", "spark_hand", TEN_MILLION))
        why.append(f"the hand-written Spark plan takes {_fmt_s(hand)} on the same files: two cores scan and "
                   "shuffle 10M triples in about that time")
    if not memory_ok:
        why.append(f"the driver JVM's heap peak grew {heap:.2f}× (local mode: the executors' work runs in the "
                   f"driver JVM, so its heap holds the scan and shuffle buffers); the Python driver's RSS grew "
                   f"{_fmt_x(python)}")
    return {**target, "measured": measured, "met": time_ok and memory_ok, "why": "; ".join(why) or None}


def _ingest(result: dict) -> dict:
    target = {"id": "ingest", "target": f"ingest of timestamped N-Quads at least {INGEST_RATE:,} triples per second"}
    landed = [i for i in result["ingest"] if i.get("path", "spark") == "spark"]
    if not landed:
        return {**target, "measured": "–", "met": None, "why": "nothing ingested"}
    largest = max(landed, key=lambda i: i["triples"])
    measured = f"{largest['triples_per_second']:,.0f} triples/s ({largest['triples']:,} triples in {_fmt_s(largest['seconds'])})"
    met = largest["triples_per_second"] >= INGEST_RATE
    why = None
    if not met:
        why = ("the fixed cost of an ingest (two Spark passes, staging, one Delta commit, statistics and the "
               "watermark) dominates files this small") if largest["triples"] < 1_000_000 else (
               "ingest parses the N-Quads lines in Python workers (mapInArrow, two passes over the file) on the "
               "executors: two cores here")
    return {**target, "measured": measured, "met": met, "why": why}


def _graph_ingest(result: dict) -> dict:
    target = {"id": "graph_ingest",
              "target": f"ingest of TriG timestamped named graphs at least {GRAPH_INGEST_RATE:,} triples per second"}
    in_process = [i for i in result["ingest"] if i.get("path") == "in-process"]
    trig = [i for i in in_process if i["format"] == "TriG timestamped graphs"]
    graphs = max(trig, key=lambda i: i["triples"]) if trig else None  # the largest: an ingest's fixed cost counts least
    same_file = ("dataset", "size", "history", "stream")
    lines = next((i for i in in_process if graphs is not None and i["format"] == "timestamped N-Quads"
                  and all(i.get(key) == graphs.get(key) for key in same_file)), None)
    if graphs is None:
        return {**target, "measured": "–", "met": None, "why": "not measured in this run"}
    measured = (f"{graphs['triples_per_second']:,.0f} triples/s ({graphs['triples']:,} triples in "
                f"{_fmt_s(graphs['seconds'])})")
    if lines:
        measured += f"; the line format in the same run: {lines['triples_per_second']:,.0f} triples/s"
    met = graphs["triples_per_second"] >= GRAPH_INGEST_RATE
    why = None if met else ("pyoxigraph parses a TriG file and Python turns each quad into Arrow columns (the "
                            "grouping and timestamps are Arrow's): one core below 32 MiB "
                            "(graph_parts.PARALLEL_MIN_BYTES), one process per core above")
    return {**target, "measured": measured, "met": met, "why": why}


def _per_minute(m: dict | None) -> float | None:
    return (m or {}).get("seconds_per_stream_minute")


def _phases(m: dict | None) -> str:
    """The median phases of a pane system's steady windows (ms), over its measured repetitions."""
    runs = [r for r in (m or {}).get("runs", []) if not r.get("warmup") and r.get("median_phases_ms")]
    if not runs:
        return "–"
    names = sorted({name for r in runs for name in r["median_phases_ms"]}, key=lambda n: -sum(
        r["median_phases_ms"].get(n, 0) for r in runs))
    return ", ".join(f"{name} {_fmt_s(median_of([r['median_phases_ms'].get(name, 0) for r in runs]) / 1000)}"
                     for name in names if median_of([r["median_phases_ms"].get(name, 0) for r in runs]) >= 1)


def median_of(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def _panes_sliding(result: dict) -> dict:
    """The panes' target: at RANGE/STEP = 30, compute per stream minute ≤ 1/5 of the full recompute (judged on the
    live schedule's steady state; the replay's figure is given beside it)."""
    target = {"id": "panes_sliding", "target": f"RANGE/STEP = {PANES_AT}: compute per stream minute ≤ 1/5 of full "
              "recompute (the live pane path's steady windows against csparql warm)"}
    warm, live, replay = (find(result, "ratio", s, ratio_=PANES_AT, workload=PANES_WORKLOAD)
                          for s in ("csparql_warm", "csparql_panes", "csparql_panes_replay"))
    live_ratio = ratio(_per_minute(live), _per_minute(warm))
    replay_ratio = ratio(_per_minute(replay), _per_minute(warm))
    if live_ratio is None:
        return {**target, "measured": "–", "met": None, "why": f"no pane figure at RANGE/STEP = {PANES_AT} in this run"}
    measured = (f"live {_fmt_s(_per_minute(live))} vs recompute {_fmt_s(_per_minute(warm))} per stream minute "
                f"({_fmt_x(live_ratio)}); replay {_fmt_s(_per_minute(replay))} ({_fmt_x(replay_ratio)})")
    met = live_ratio <= PANES_FRACTION
    why = None
    if not met:
        why = (f"a steady window ({_fmt_s(seconds(live))}, recompute {_fmt_s(seconds(warm))}) spends: "
               f"{_phases(live)} — two Spark jobs (computing its new pane, then combining the window's panes) "
               "where the recompute runs one")
        rows = _rows_per_pane(live)
        if rows is not None:
            panes = _last_run(live).get("window_panes") or PANES_AT
            why += (f"; the window combines ~{rows * panes:,.0f} stored rows ({rows:,.0f} a pane, "
                    f"{(live or {}).get('window_file_triples', 0):,} triples in the window's stream files)")
            if live.get("pane_partials_keyed"):
                why += (": its aggregate's partials are keyed — each pane keeps a row per stream solution, so "
                        "that a triple in two panes of a window (a window is a set) counts once — so the "
                        "combination reads about as many rows as the recompute's pattern matches")
    return {**target, "measured": measured, "met": met, "why": why}


def _last_run(m: dict | None) -> dict:
    runs = [r for r in (m or {}).get("runs", []) if not r.get("warmup")]
    return runs[-1] if runs else {}


def _rows_per_pane(m: dict | None) -> float | None:
    run = _last_run(m)
    if not run.get("stored_panes"):
        return None
    return run["stored_pane_rows"] / run["stored_panes"]


def _panes_tumbling(result: dict) -> dict:
    """The panes' target: at RANGE/STEP = 1 the default path (panes on, declined: the window recomputes) is no slower
    than the recompute: its median within the recompute's repetitions (their spread is this run's noise)."""
    target = {"id": "panes_tumbling", "target": "RANGE/STEP = 1: no slower than today (panes on, which "
              "the planner declines for a tumbling window, against csparql warm: the median within the recompute's "
              "range of repetitions)"}
    warm, live = (find(result, "ratio", s, ratio_=1, workload=PANES_WORKLOAD) for s in ("csparql_warm", "csparql_panes"))
    value = ratio(seconds(live), seconds(warm))
    if value is None:
        return {**target, "measured": "–", "met": None, "why": "no RANGE/STEP = 1 point in this run"}
    spread = [r["seconds"] for r in warm.get("runs", []) if not r.get("warmup")]
    measured = (f"{_fmt_s(seconds(live))} vs {_fmt_s(seconds(warm))} per window ({_fmt_x(value)}; recompute "
                f"repetitions {_spread(warm)})")
    met = seconds(live) <= max(spread)
    why = None if met else (f"the default path first decides whether panes apply (statistics, optimizer, pane "
                            f"planner) and then recomputes the window as csparql warm does; its phases: "
                            f"{_phases(live)}; repetitions {_spread(live)} against the recompute's {_spread(warm)} "
                            "(interleaved: a spread this wide is the machine's load, not the path)")
    return {**target, "measured": measured, "met": met, "why": why}


# --- Markdown ----------------------------------------------------------------------------------------------


def _status(met) -> str:
    return {True: "met", False: "**missed**", None: "not measured"}[met]


def markdown(result: dict) -> str:
    """The run's table: targets, every sweep, memory, ingest, Airflow, answers."""
    machine = result["machine"]
    lines = [
        f"# csparql benchmarks — {result['mode']} run",
        "",
        f"Started {result['started_at']}, {result['duration_seconds'] / 60:.1f} min. Machine: {machine['cpu']}, "
        f"{machine['logical_cores']} logical cores, {machine['memory_bytes'] / 2**30:.0f} GiB, {machine['os']}, "
        f"Python {machine['python']}, {machine['java']}; Spark `{machine['spark_master']}`; load average at start "
        f"{machine.get('load_average_at_start')}, at end {machine.get('load_average_at_end')}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in result["versions"].items()) + f". Seed {result['seed']}.",
        "",
        f"Medians of {result['parameters']['repetitions']} repetitions after {result['parameters']['warmups']} "
        f"warm-up(s) (cold runs: {result['parameters']['cold_repetitions']}, no warm-up), systems interleaved. "
        "≠ marks an answer that differs from the reference's.",
        "",
        "## Targets",
        "",
        "| target | measured | status | why |",
        "|---|---|---|---|",
    ]
    for t in result["targets"]:
        lines.append(f"| {t['target']} | {t['measured']} | {_status(t['met'])} | {t['why'] or ''} |")
    systems = ["csparql_warm", "csparql_cold", "spark_hand", "duckdb", "pyoxigraph", "rdflib"]
    lines += ["", "## Window size: cars per district (04), time per window", "",
              "| window (triples) | " + " | ".join(LABELS[s] for s in systems)
              + " | compiled ÷ hand | pyoxigraph ÷ warm | rdflib ÷ warm |",
              "|---:|" + "---:|" * (len(systems) + 3)]
    for size in _window_sizes(result):
        cells = [_cell(find(result, "window", s, size)) for s in systems]
        warm = seconds(find(result, "window", "csparql_warm", size))
        extra = [_fmt_x(ratio(warm, seconds(find(result, "window", "spark_hand", size)))),
                 _fmt_x(ratio(seconds(find(result, "window", "pyoxigraph", size)), warm)),
                 _fmt_x(ratio(seconds(find(result, "window", "rdflib", size)), warm))]
        lines.append(f"| {size:,} | " + " | ".join(cells + extra) + " |")
    workloads_run = sorted({(m["workload"], m["size"]) for m in result["measurements"] if m["sweep"] == "workload"})
    if workloads_run:
        lines += ["", "## Other workloads, time per window", "",
                  "| workload | window (triples) | " + " | ".join(LABELS[s] for s in systems) + " |",
                  "|---|---:|" + "---:|" * len(systems)]
        for workload, size in workloads_run:
            cells = [_cell(find(result, "workload", s, size, workload=workload)) for s in systems]
            lines.append(f"| {workload} | {size:,} | " + " | ".join(cells) + " |")
    histories = sorted({m["history"] for m in result["measurements"] if m["sweep"] == "history"})
    if histories:
        history_systems = ["csparql_warm", "csparql_filter", "spark_hand", "duckdb"]
        size = next(m["size"] for m in result["measurements"] if m["sweep"] == "history")
        lines += ["", f"## Stored history: topic count (social-data paper) over a {size:,}-triple window", "",
                  "| history | stored triples | " + " | ".join(LABELS[s] for s in history_systems)
                  + " | files read (window) |", "|---:|---:|" + "---:|" * (len(history_systems) + 1)]
        for history in histories:
            cells = [_cell(find(result, "history", s, history=history)) for s in history_systems]
            files = (find(result, "history", "csparql_warm", history=history) or {}).get("window_files")
            lines.append(f"| {history}× | {history * size:,} | " + " | ".join(cells) + f" | {files} |")
    lines += _ratio_lines(result)
    lines += _srbench_lines(result)
    lines += ["", "## Memory: cars per district (04), peak per window", "",
              "Peak RSS of the processes a system runs in (the Spark systems: Python driver + JVM; the others: the "
              "Python process, whose RSS includes what earlier systems left allocated — the increase during the "
              "run is the fairer figure) and the JVM heap's peak use.", "",
              "| window | " + " | ".join(f"{LABELS[s]} RSS (increase)" for s in systems) + " | csparql JVM heap peak |",
              "|---:|" + "---:|" * (len(systems) + 1)]
    for size in _window_sizes(result):
        cells = []
        for s in systems:
            m = find(result, "window", s, size)
            cells.append("–" if not m or m["peak_rss_bytes"] is None
                         else f"{_fmt_mb(m['peak_rss_bytes'])} (+{_fmt_mb(m['rss_increase_bytes'])})")
        heap = (find(result, "window", "csparql_warm", size) or {}).get("jvm_heap_peak_bytes")
        lines.append(f"| {size:,} | " + " | ".join(cells) + f" | {_fmt_mb(heap)} |")
    lines += ["", "## Ingest (`ingest_stream`: with Spark, and in process as pushes and message batches land)", "",
              "| data set | stream | format | how | triples | MB | time | triples/s |",
              "|---|---|---|---|---:|---:|---:|---:|"]
    for i in result["ingest"]:
        lines.append(f"| {i['dataset']} n={i['size']:,} h={i['history']} | `{i['stream']}` | "
                     f"{i.get('format', 'timestamped N-Quads')} | {i.get('path', 'spark')} | {i['triples']:,} | "
                     f"{i['bytes'] / 2**20:.1f} | {_fmt_s(i['seconds'])} | {i['triples_per_second']:,.0f} |")
    lines += ["", "## End to end through Airflow", ""]
    lines += _airflow_lines(result["airflow"])
    disagreements = [m for m in result["measurements"] if m.get("agrees_with_reference") is False]
    checked = [m for m in result["measurements"] if m.get("agrees_with_reference") is not None]
    lines += ["", "## Answers", ""]
    if disagreements:
        lines.append(f"**{len(disagreements)} of {len(checked)} answers differ from their reference:**")
        lines += [f"- {m['system']} on {m['workload']} n={m['size']:,} h={m['history']}: {m.get('disagreement')}"
                  for m in disagreements]
    else:
        lines.append(f"All {len(checked)} answers checked are the same multiset as their reference's (pyoxigraph's "
                     "where it ran, else DuckDB's).")
    failed = [m for m in result["measurements"] if m["status"] == "failed"]
    if failed:
        lines += ["", "## Failures", ""] + [f"- {m['system']} on {m['workload']} n={m['size']:,}: {m['reason']}"
                                            for m in failed]
    if result.get("notes"):
        lines += ["", "## Notes", ""] + [f"- {note}" for note in result["notes"]]
    lines += ["", "Plots: " + ", ".join(f"`{p}`" for p in PLOTS) + "."]
    return "\n".join(lines) + "\n"


def _ratio_lines(result: dict) -> list[str]:
    """The sliding tables, one a workload: each system's time per window and compute per stream minute at each
    RANGE/STEP, the pane path live and replayed beside the recompute (csparql warm), and their ratios."""
    names = list(dict.fromkeys(m["workload"] for m in result["measurements"] if m["sweep"] == "ratio"))
    lines = []
    for workload in names:
        lines += _ratio_table(result, workload)
    return lines


RATIO_COLORS = {"csparql_warm": "tab:blue", "csparql_panes": "tab:orange", "csparql_panes_replay": "tab:green",
                "spark_hand": "tab:red", "duckdb": "tab:purple"}
"""One colour a system in the sliding plot; the workload is the marker (the topic count's circles)."""

RATIO_TITLES = {"topic_count": "topic count (keyed pane partials)",
                "topic_set": "distinct topics (pane partials not keyed)"}


def _ratio_table(result: dict, workload: str) -> list[str]:
    measured = [m for m in result["measurements"] if m["sweep"] == "ratio" and m["workload"] == workload]
    ratios = sorted({m["ratio"] for m in measured})
    systems = [s for s in ("csparql_warm", "csparql_panes", "csparql_panes_replay", "spark_hand", "duckdb")
               if any(m["system"] == s for m in measured)]
    pane_windows = result["parameters"].get("pane_windows")
    lines = ["", f"## Sliding ratio: {RATIO_TITLES.get(workload, workload)}, RANGE 3m, STEP = 3m ÷ ratio", "",
             "Time per evaluation, and compute per minute of stream (each triple is in `ratio` windows). csparql "
             "warm recomputes each window; panes (live): with a fresh pane store, the consecutive windows of the "
             f"last {pane_windows} STEPs (at most RANGE/STEP) up to the instant, the median window after the first "
             "(each computes one new pane and combines the window's panes); panes (replay): `Engine.replay` over "
             "the same windows (their missing panes in one Spark job, then each window combined), its total ÷ the "
             "windows. Every pane window's answer is checked against the recompute's.", "",
             "| RANGE/STEP | STEP | " + " | ".join(f"{LABELS[s]} per window | per stream minute" for s in systems)
             + " | live ÷ recompute | replay ÷ recompute |",
             "|---:|---:|" + "---:|---:|" * len(systems) + "---:|---:|"]
    notes = []

    def at(system: str, value: int) -> dict | None:
        return find(result, "ratio", system, ratio_=value, workload=workload)

    for value in ratios:
        cells = []
        step = None
        for s in systems:
            m = at(s, value)
            step = (m or {}).get("step_seconds", step)
            cells += [_cell(m), _fmt_s(_per_minute(m))]
            if m and m.get("pane_note") and s == "csparql_panes":
                notes.append(f"RANGE/STEP = {value}: {LABELS[s]}: {m['pane_note']} (its figure is the default path's "
                             "recompute, not a pane figure)")
        warm = _per_minute(at("csparql_warm", value))
        pane_ratios = [_fmt_x(ratio(_per_minute(m), warm)) + (" (recomputes)" if (m or {}).get("pane_note") else "")
                       if m and m["status"] == "ok" else "–"
                       for m in (at("csparql_panes", value), at("csparql_panes_replay", value))]
        lines.append(f"| {value} | {step} s | " + " | ".join(cells + pane_ratios) + " |")
    for value in ratios:
        for s in ("csparql_panes", "csparql_panes_replay"):
            m = at(s, value)
            if m and m["status"] == "ok" and not m.get("pane_note"):
                lines.append(f"- RANGE/STEP = {value}, {LABELS[s]}: {m.get('windows_checked', 0)} windows checked against "
                             f"the recompute ({len(m.get('windows_differing_from_recompute') or [])} differ); steady "
                             f"window phases: {_phases(m)}" + _pane_extra(m)
                             + ("" if _rows_per_pane(m) is None else f"; {_rows_per_pane(m):,.0f} stored rows a pane"
                                + (" (keyed partials: a row per stream solution)" if m.get("pane_partials_keyed")
                                   else "")))
    return lines + ([""] + [f"- {note}" for note in notes] if notes else [])


def _pane_extra(m: dict) -> str:
    runs = [r for r in m.get("runs", []) if not r.get("warmup")]
    if m["system"] == "csparql_panes_replay":
        jobs = [r["panes_job_seconds"] for r in runs if r.get("panes_job_seconds") is not None]
        windows = [r["median_window_seconds"] for r in runs if r.get("median_window_seconds") is not None]
        if not jobs or not windows:
            return ""
        return (f"; the panes job {_fmt_s(median_of(jobs))}, then a window {_fmt_s(median_of(windows))} (median), "
                f"{runs[0].get('windows')} windows")
    first = [r["first_window_seconds"] for r in runs if r.get("first_window_seconds") is not None]
    if not first:
        return ""
    return f"; the first window (computing its {runs[0].get('window_panes')} panes) {_fmt_s(median_of(first))}"


def _srbench_lines(result: dict) -> list[str]:
    """The SRBench table: each measured query at each data size, the engine against the SPARQL stores."""
    measured = [m for m in result["measurements"] if m["sweep"] == "srbench"]
    if not measured:
        return []
    systems = ["csparql_warm", "pyoxigraph", "rdflib"]
    parameters = result["parameters"]
    lines = ["", "## SRBench (004): queries over weather-station streams, time per window", "",
             f"SRBench data of {', '.join(map(str, parameters['srbench_stations']))} stations, every property "
             f"sampled {parameters['srbench_rate']}× an hour; each query at a window with answers. The stores "
             "evaluate the query's SPARQL 1.1 form over the exported window and the query's FROM graphs.", "",
             "| query | stations | window (triples) | " + " | ".join(LABELS[s] for s in systems)
             + " | pyoxigraph ÷ warm | rdflib ÷ warm | answer rows |", "|---|---:|---:|" + "---:|" * (len(systems) + 3)]
    points = sorted({(m["workload"], m["stations"]) for m in measured})
    for workload, stations in points:
        row = {m["system"]: m for m in measured if m["workload"] == workload and m["stations"] == stations}
        warm = seconds(row.get("csparql_warm"))
        first = next(iter(row.values()))
        extra = [_fmt_x(ratio(seconds(row.get("pyoxigraph")), warm)), _fmt_x(ratio(seconds(row.get("rdflib")), warm)),
                 str((row.get("csparql_warm") or {}).get("answer_rows", "–"))]
        lines.append(f"| {workload} | {stations} | {first.get('window_triples', 0):,} | "
                     + " | ".join(_cell(row.get(s)) for s in systems) + " | " + " | ".join(extra) + " |")
    return lines


def _airflow_lines(airflow: dict) -> list[str]:
    if airflow.get("status") != "ok":
        return [f"{airflow.get('status', 'not run')}: {airflow.get('reason', '')}"]
    lines = _capacity_lines(airflow.get("capacity") or {"status": "not run", "reason": ""})
    lines += ["### The shortest COMPUTED EVERY kept up with, one query", "", airflow.get("description", ""), "",
             "| mode | COMPUTED EVERY | windows evaluated | expected | lag growth (s per s) | lag at end | "
             "window end → results committed (median, max) | keeps up |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for trial in airflow["trials"]:
        latency = trial.get("commit_latency_seconds") or []
        lat = (f"{_fmt_s(sorted(latency)[len(latency) // 2])}, {_fmt_s(max(latency))}" if latency else "–")
        lines.append(f"| {trial['mode']} | {trial['period']} | {trial['windows_evaluated']} | {trial['windows_expected']} | "
                     f"{_fmt_num(trial.get('lag_slope'))} | {_fmt_s(trial.get('lag_at_end_seconds'))} | {lat} | "
                     f"{'yes' if trial['keeps_up'] else 'no'} |")
    lines.append("")
    for mode, period in airflow.get("shortest_period_kept_up", {}).items():
        lines.append(f"- shortest COMPUTED EVERY kept up with, {mode}: {period or 'none of those tried'}")
    return lines


def _capacity_lines(capacity: dict) -> list[str]:
    """The capacity sweep's table (benchmarks/capacity.py)."""
    lines = ["### Capacity: queries kept up with", ""]
    if capacity.get("status") != "ok":
        return lines + [f"{capacity.get('status', 'not run')}: {capacity.get('reason', '')}", ""]
    lines += [capacity.get("description", ""), "",
              "| queries | windows due | evaluated | missed | failed runs | lag growth (s per s, worst) | "
              "window end → committed p50 | p95 | the same, windows closed after the unpause: p50 | p95 | "
              "of which waiting for the data: p50 | inputs complete → committed: p50 | p95 | "
              "evaluation (median) | CPU busy | load | kept up |",
              "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for point in capacity["points"]:
        cpu = point.get("cpu_busy_percent")
        load = point.get("load_average")
        lines.append(
            f"| {point['queries']} | {point['windows_due']} | {point['windows_evaluated']} | {point['windows_missed']} "
            f"| {point['failed_runs']} | {_fmt_num(point.get('lag_slope_max'))} | "
            f"{_fmt_s(point.get('commit_latency_p50_seconds'))} | {_fmt_s(point.get('commit_latency_p95_seconds'))} | "
            f"{_fmt_s(point.get('commit_latency_unpaused_p50_seconds'))} | "
            f"{_fmt_s(point.get('commit_latency_unpaused_p95_seconds'))} | "
            f"{_fmt_s(point.get('inputs_wait_p50_seconds'))} | {_fmt_s(point.get('after_inputs_p50_seconds'))} | "
            f"{_fmt_s(point.get('after_inputs_p95_seconds'))} | "
            f"{_fmt_s(point.get('evaluation_median_seconds'))} | {'–' if cpu is None else f'{cpu:.0f} %'} | "
            f"{'–' if load is None else f'{load:.1f}'} | {'yes' if point['kept_up'] else 'no'} |")
    lines += ["", f"- capacity at COMPUTED EVERY {capacity['period']}: "
                  f"{capacity.get('capacity') or 'none of the counts tried'} queries", ""]
    return lines + _cpu_per_window_lines(capacity["points"])


def _cpu_per_window_lines(points: list[dict]) -> list[str]:
    """Each process's CPU per window evaluated at each count (points measured before it have none)."""
    names = sorted({name for point in points for name in point.get("cpu_ms_per_window") or {}},
                   key=lambda name: -max((point.get("cpu_ms_per_window") or {}).get(name) or 0 for point in points))
    if not names:
        return []
    lines = ["CPU milliseconds per window evaluated, by process (with its children), over each count's observation "
             "and drain:", "", "| queries | " + " | ".join(names) + " | all |", "|---:|" + "---:|" * (len(names) + 1)]
    for point in points:
        used = point.get("cpu_ms_per_window") or {}
        values = [used.get(name) for name in names]
        total = None if any(value is None for value in values) else sum(values)
        lines.append(f"| {point['queries']} | " + " | ".join("–" if v is None else f"{v:.0f}" for v in values)
                     + f" | {'–' if total is None else f'{total:.0f}'} |")
    return lines + [""]


def _fmt_num(value) -> str:
    return "–" if value is None else f"{value:.3f}"


# --- plots ---------------------------------------------------------------------------------------------------


def plots(result: dict, folder: Path) -> list[Path]:
    """The PNG plots of a run (time and memory against window size, time against history, sliding ratio)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    written = []
    systems = ["csparql_warm", "csparql_cold", "spark_hand", "duckdb", "pyoxigraph", "rdflib"]

    def save(figure, name):
        path = folder / name
        figure.tight_layout()
        figure.savefig(path, dpi=120)
        plt.close(figure)
        written.append(path)

    figure, axes = plt.subplots(figsize=(7.5, 5))
    for system in systems:
        points = [(m["size"], m["median_seconds"]) for m in result["measurements"]
                  if m["sweep"] == "window" and m["system"] == system and m["median_seconds"] is not None]
        estimates = [(m["size"], m["estimated_seconds"]) for m in result["measurements"]
                     if m["sweep"] == "window" and m["system"] == system and m.get("estimated_seconds")]
        if points:
            line, = axes.plot(*zip(*sorted(points)), marker="o", label=LABELS[system])
            if estimates:
                axes.plot(*zip(*sorted([points[-1], *estimates])), linestyle=":", color=line.get_color())
    axes.set(xscale="log", yscale="log", xlabel="triples in the window", ylabel="seconds per window (median)",
             title="Cars per district (04): time against window size")
    axes.grid(True, which="both", alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)
    save(figure, "time_vs_window.png")

    figure, axes = plt.subplots(figsize=(7.5, 5))
    for system in ("csparql_warm", "csparql_filter", "spark_hand", "duckdb"):
        points = [(m["history"], m["median_seconds"]) for m in result["measurements"]
                  if m["sweep"] == "history" and m["system"] == system and m["median_seconds"] is not None]
        if points:
            axes.plot(*zip(*sorted(points)), marker="o", label=LABELS[system])
    axes.set(xscale="log", yscale="log", xlabel="stored history (multiples of the window)",
             ylabel="seconds per window (median)", title="Topic count (social-data paper): time against stored history")
    axes.grid(True, which="both", alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)
    save(figure, "time_vs_history.png")

    figure, axes = plt.subplots(figsize=(7.5, 5))
    for system in systems:
        points = [(m["size"], m["peak_rss_bytes"] / 2**20) for m in result["measurements"]
                  if m["sweep"] == "window" and m["system"] == system and m["peak_rss_bytes"]]
        if points:
            axes.plot(*zip(*sorted(points)), marker="o", label=f"{LABELS[system]} (RSS)")
    heap = [(m["size"], m["jvm_heap_peak_bytes"] / 2**20) for m in result["measurements"]
            if m["sweep"] == "window" and m["system"] == "csparql_warm" and m.get("jvm_heap_peak_bytes")]
    if heap:
        axes.plot(*zip(*sorted(heap)), marker="s", linestyle="--", label="csparql warm (JVM heap peak)")
    axes.set(xscale="log", xlabel="triples in the window", ylabel="peak memory (MB)",
             title="Cars per district (04): memory against window size")
    axes.grid(True, which="both", alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=8)
    save(figure, "memory_vs_window.png")

    figure, axes = plt.subplots(figsize=(7.5, 5))
    workloads = list(dict.fromkeys(m["workload"] for m in result["measurements"] if m["sweep"] == "ratio"))
    for workload in workloads:
        for system in ("csparql_warm", "csparql_panes", "csparql_panes_replay", "spark_hand", "duckdb"):
            points = [(m["ratio"], m["seconds_per_stream_minute"]) for m in result["measurements"]
                      if m["sweep"] == "ratio" and m["workload"] == workload and m["system"] == system
                      and m.get("seconds_per_stream_minute")]
            if points:
                style = {"csparql_panes": "--", "csparql_panes_replay": ":"}.get(system, "-")
                marker = "o" if workload == PANES_WORKLOAD else "^"
                label = LABELS[system] + ("" if len(workloads) == 1 else f" ({workload})")
                axes.plot(*zip(*sorted(points)), marker=marker, linestyle=style, label=label,
                          color=RATIO_COLORS[system], alpha=1.0 if workload == PANES_WORKLOAD else 0.6)
    axes.set(xscale="log", yscale="log", xlabel="RANGE / STEP", ylabel="compute seconds per minute of stream",
             title="RANGE 3m over the topic stream: cost against sliding ratio")
    axes.grid(True, which="both", alpha=0.3)
    if axes.get_legend_handles_labels()[0]:
        axes.legend(fontsize=7)
    save(figure, "cost_vs_sliding_ratio.png")

    from benchmarks.capacity import plot as capacity_plot

    written.append(capacity_plot((result.get("airflow") or {}).get("capacity") or {},
                                 folder / "capacity_vs_queries.png"))
    return written


def write(result: dict, folder: Path) -> None:
    """Write ``results.json``, ``table.md`` and the plots into the run folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "results.json").write_text(json.dumps(result, indent=1, default=str), encoding="utf-8")
    (folder / "table.md").write_text(markdown(result), encoding="utf-8")
    plots(result, folder)

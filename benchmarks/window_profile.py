"""Where a warm window evaluation's time goes (``./bench.sh --profile``).

Each workload's data lands in its own warehouse; one SparkSession (``local[2]``, or ``--master sc://…`` for a
Spark Connect server) evaluates its window ``warmups`` times, then ``repetitions`` times with writing, as a
registered query's run does (``Engine.evaluate``): each repetition's phases (``csparql.engine.runner.Phases``:
recording lost runs, statistics, Delta logs and pruning, the optimizer and the Spark plan, Spark's planning,
run and collection, the result commit, the runs commit), and on a classic session the Spark jobs and stages
it ran and the time its JVM spent compiling code just in time (``jit``). The report is the median of each.

A JVM keeps compiling Spark's own code for hundreds of evaluations after it starts: "warm" after the default 2
warm-ups is warm for csparql's caches, not for the JIT. ``--set warmups=200`` profiles the evaluations of a
process that has been running a while, as a deployment's are; the ``jit`` column tells which one a table shows.

pyoxigraph answers the same window in the same run (a new in-memory store, ``bulk_load`` of the exported window
and static graphs, the SPARQL 1.1 query:
``benchmarks.systems.Pyoxigraph``), ``repetitions`` times after one warm-up; its median is reported beside the
engine's, and whether both gave the same answer.

``data``: the data folder of an earlier profile (its ``data/``), whose warehouses are evaluated again rather
than built anew — how two versions of the engine are profiled over the same data, one process each, in turn.

An engine older than ``Phases`` is profiled with wrappers around the functions it had (``Engine.compile``,
the collection, ``Engine._write``, ``Engine._record``), so the figures before and after a change compare
phase by phase where both have the phase.
"""

from __future__ import annotations

import functools
import json
import statistics
import time
from collections import defaultdict
from pathlib import Path

from benchmarks import data, workloads

PHASES = ("lost runs", "statistics", "sources", "plan", "spark", "write", "record", "jit")
WORKLOADS = ("district_count", "two_streams", "srbench_q01", "srbench_q04", "srbench_q12")
SIZES = {"district_count": 10_000, "two_streams": 10_000}
SRBENCH_STATIONS = 12
SRBENCH_RATE = 6


def profile(out: Path, master: str | None = None, names: tuple[str, ...] = WORKLOADS, warmups: int = 2,
            repetitions: int = 7, seed: int = 2010, data_folder: Path | None = None) -> dict:
    """Profile each workload (see the module docstring); writes ``profile.json`` and ``profile.md`` in ``out``.
    ``data_folder``: evaluate the warehouses built there by an earlier profile (same seed) instead of building
    them."""
    from csparql.runtime.session import spark_session

    out.mkdir(parents=True, exist_ok=True)
    spark = spark_session(master or "local[2]")
    points = []
    srbench = None
    for name in names:
        if name.startswith("srbench_"):
            if srbench is None:
                srbench = (_existing_srbench(data_folder, seed) if data_folder is not None else
                           data.build_srbench(spark, out / "data", SRBENCH_STATIONS, SRBENCH_RATE, seed))
            dataset, generated = srbench
            workload = workloads.srbench(int(name[len("srbench_q"):]))
            at = generated.instant(workloads.SRBENCH_WINDOW_HOUR[workload.parameters["query"]])
        else:
            workload = getattr(workloads, name)()
            dataset = (_existing(data_folder, workload.dataset, SIZES[name], seed) if data_folder is not None else
                       data.build(spark, workload.dataset, out / "data", SIZES[name], 1, seed))
            at = dataset.at
        point = _profile_point(spark, workload, dataset, at, warmups, repetitions)
        answer = point.pop("answer")
        point.update(_pyoxigraph(workload, dataset, at, out / "work" / workload.name, repetitions, answer))
        point.update(_rsp_rs(workload, dataset, at, out / "work" / workload.name / "rsp-rs", repetitions, answer))
        points.append(point)
    result = {"master": master or "local[2]", "warmups": warmups, "repetitions": repetitions, "points": points,
              "versions": _git_commit()}
    (out / "profile.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    (out / "profile.md").write_text(table(result), encoding="utf-8")
    return result


def _existing(folder: Path, kind: str, size: int, seed: int):
    """The data set ``data.build`` landed in ``folder`` (history 1)."""
    from csparql.storage.warehouse import Warehouse

    warehouse = Warehouse(folder / f"{kind}-n{size}-h1" / "warehouse")
    if not warehouse.root.exists():
        raise FileNotFoundError(f"{warehouse.root}: no data set there to profile again")
    return data.Dataset(kind, size, 1, 0, warehouse, seed=seed)


def _existing_srbench(folder: Path, seed: int):
    """The SRBench data set ``data.build_srbench`` landed in ``folder``, and its generated scenario (generated
    again, not landed)."""
    from csparql.srbench import Size
    from csparql.srbench.workload import DEFAULT_START, generate
    from csparql.storage.warehouse import Warehouse

    warehouse = Warehouse(folder / f"srbench-s{SRBENCH_STATIONS}-r{SRBENCH_RATE}" / "warehouse")
    if not warehouse.root.exists():
        raise FileNotFoundError(f"{warehouse.root}: no data set there to profile again")
    generated = generate(Size(stations=SRBENCH_STATIONS, hours=data.SRBENCH_HOURS, rate=SRBENCH_RATE), seed,
                         DEFAULT_START)
    return data.Dataset("srbench", 0, data.SRBENCH_HOURS, 0, warehouse, seed=seed), generated


def _pyoxigraph(workload, dataset, at: int, work: Path, repetitions: int, answer) -> dict:
    """pyoxigraph over the same window (see the module docstring): its median milliseconds, and whether its
    answer is the engine's (``answer``)."""
    from benchmarks.systems import Point, Pyoxigraph

    system = Pyoxigraph()
    window = Point("profile", workload, dataset, at, work)
    system.prepare(window)
    times = []
    raw = None
    for repetition in range(repetitions + 1):
        clock = time.perf_counter()
        raw = system.run(window)
        if repetition:
            times.append((time.perf_counter() - clock) * 1000)
    agrees = workloads.agree(answer, system.answer(window, raw), workload.tolerance)
    return {"pyoxigraph_ms": statistics.median(times), "same_answer": agrees}


def _rsp_rs(workload, dataset, at: int, work: Path, repetitions: int, answer) -> dict:
    """rsp-rs over the same window where it can be measured (``benchmarks.rsp_rs_peer``): its median
    milliseconds and whether its answer is the engine's, else why it was not run."""
    from benchmarks import rsp_rs_peer
    from benchmarks.systems import Point

    measured = rsp_rs_peer.measure(workload, Point("profile", workload, dataset, at, work).window, work, repetitions)
    if "rsp_rs_answer" in measured:
        measured["rsp_rs_same_answer"] = workloads.agree(answer, measured.pop("rsp_rs_answer"), workload.tolerance)
    return measured


def _profile_point(spark, workload, dataset, at: int, warmups: int, repetitions: int) -> dict:
    from csparql.core.frontend import compile_query
    from csparql.engine.runner import Engine

    plan = compile_query(workload.cquery)
    engine = Engine(dataset.warehouse, spark)
    wrapped = _Wrappers(engine)
    runs = []
    for repetition in range(warmups + repetitions):
        wrapped.times.clear()
        group = f"csparql-profile-{workload.name}-{repetition}"
        jobs = _JobCounter(spark, group)
        compiling = jit_milliseconds(spark)
        clock = time.perf_counter()
        evaluation = engine.evaluate(plan, at, f"profile_{workload.name}")
        total = (time.perf_counter() - clock) * 1000
        phases = dict(getattr(evaluation, "phases", None) or wrapped.phases())
        if compiling is not None:
            phases["jit"] = jit_milliseconds(spark) - compiling
        if repetition >= warmups:
            runs.append({"total": total, "phases": phases, **jobs.counts(), "rows": len(evaluation.result),
                         "triples_read": sum(scan.rows for scan in evaluation.scans.values())})
    wrapped.restore()
    medians = {phase: statistics.median(run["phases"].get(phase, 0.0) for run in runs)
               for phase in sorted({p for run in runs for p in run["phases"]}, key=_phase_order)}
    return {
        "workload": workload.name, "title": workload.title, "triples_read": runs[-1]["triples_read"],
        "rows": runs[-1]["rows"], "total_ms": statistics.median(run["total"] for run in runs), "phases_ms": medians,
        "jobs": _median_or_none(run.get("jobs") for run in runs),
        "stages": _median_or_none(run.get("stages") for run in runs), "runs": runs,
        "answer": workloads.answer_of_rows(evaluation.result.rows) if evaluation.result.form == "select"
        else workloads.answer_of_triples(evaluation.result.triples),
    }


def jit_milliseconds(spark) -> float | None:
    """The milliseconds the session's JVM has spent compiling just in time since it started, summed over its
    compiler threads (``CompilationMXBean``); None over Spark Connect, whose JVM is the server's."""
    if _is_connect(spark):
        return None
    return float(spark._jvm.java.lang.management.ManagementFactory.getCompilationMXBean().getTotalCompilationTime())


def _phase_order(phase: str) -> tuple[int, str]:
    return (PHASES.index(phase) if phase in PHASES else len(PHASES), phase)


def _median_or_none(values) -> float | None:
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


class _JobCounter:
    """The Spark jobs and stages one evaluation ran (a classic session only: its job group)."""

    def __init__(self, spark, group: str) -> None:
        self.context = getattr(spark, "sparkContext", None) if not _is_connect(spark) else None
        self.group = group
        if self.context is not None:
            self.context.setJobGroup(group, group)

    def counts(self) -> dict:
        if self.context is None:
            return {}
        tracker = self.context.statusTracker()
        jobs = tracker.getJobIdsForGroup(self.group)
        stages = sum(len(tracker.getJobInfo(job).stageIds) for job in jobs if tracker.getJobInfo(job) is not None)
        self.context.setJobGroup("", "")
        return {"jobs": len(jobs), "stages": stages}


def _is_connect(spark) -> bool:
    return type(spark).__module__.startswith("pyspark.sql.connect")


class _Wrappers:
    """For an engine without ``Phases``: times around the functions it had, as phases."""

    TARGETS = (("compile", "sources+plan"), ("_write", "write"), ("_record", "record"))

    def __init__(self, engine) -> None:
        from csparql.engine import runner

        self.times: dict[str, float] = defaultdict(float)
        self.saved = []
        if hasattr(runner, "Phases"):
            return
        for attribute, phase in self.TARGETS:
            self._wrap(type(engine), attribute, phase)
        if hasattr(runner, "_collect"):
            self._wrap(runner, "_collect", "spark")

    def _wrap(self, owner, attribute: str, phase: str) -> None:
        original = getattr(owner, attribute, None)
        if original is None:
            return
        self.saved.append((owner, attribute, original))

        @functools.wraps(original)
        def timed(*args, **kwargs):
            clock = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.times[phase] += (time.perf_counter() - clock) * 1000

        setattr(owner, attribute, timed)

    def phases(self) -> dict[str, float]:
        return dict(self.times)

    def restore(self) -> None:
        for owner, attribute, original in self.saved:
            setattr(owner, attribute, original)


def _git_commit() -> dict:
    import subprocess

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).resolve().parent, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = None
    import csparql

    return {"commit": commit, "engine": str(Path(csparql.__file__).resolve().parent)}


def table(result: dict) -> str:
    """The profile as a Markdown table: medians in milliseconds."""
    phases = sorted({p for point in result["points"] for p in point["phases_ms"]}, key=_phase_order)
    header = ["workload", "triples read", "total", *phases, "Spark jobs", "stages", "pyoxigraph", "ratio",
              "same answer", "rsp-rs", "ratio", "same answer"]
    lines = [f"Warm evaluations on `{result['master']}`, medians of {result['repetitions']} (after "
             f"{result['warmups']} warm-ups), milliseconds; commit {result['versions'].get('commit')}, engine "
             f"`{result['versions'].get('engine')}`; pyoxigraph: median of {result['repetitions']} over the same "
             "window (load + query); rsp-rs: median of as many, from the first event pushed to the last binding "
             "(benchmarks/rsp_rs_peer.py); jit: the milliseconds the session's JVM spent compiling just in time "
             "during an evaluation, beside its phases (not one of them: compiler threads run beside the others).",
             "",
             "| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    for point in result["points"]:
        cells = [point["title"], f"{point['triples_read']:,}", f"{point['total_ms']:.0f}"]
        cells += [f"{point['phases_ms'][p]:.0f}" if p in point["phases_ms"] else "—" for p in phases]
        cells += ["—" if point[k] is None else f"{point[k]:.0f}" for k in ("jobs", "stages")]
        oxigraph = point.get("pyoxigraph_ms")
        cells += ["—", "—", "—"] if oxigraph is None else [
            f"{oxigraph:.0f}", f"{point['total_ms'] / oxigraph:.1f}×", "yes" if point["same_answer"] else "**no**"]
        peer = point.get("rsp_rs_ms")
        cells += [f"not run: {point.get('rsp_rs_reason', '')}", "—", "—"] if peer is None else [
            f"{peer:.1f}", f"{point['total_ms'] / peer:.1f}×", "yes" if point["rsp_rs_same_answer"] else "**no**"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"

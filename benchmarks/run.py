"""One benchmark run: generate and land the data, measure every system side by side, write the run folder.

The run folder holds ``results.json`` (every repetition, medians, peak memory, the machine, versions,
parameters and seed), ``table.md`` (the Markdown table, with each target met or missed), the PNG plots and
``plans/`` (the executed Spark plans of the compiled and the hand-written evaluations, for the "why" of a
missed target). See ``benchmarks/README.md``.
"""

from __future__ import annotations

import logging
import os
import platform
import shutil
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from benchmarks import data, workloads
from benchmarks.measure import extrapolate, measure, median
from benchmarks.profiles import SYSTEMS, Profile
from benchmarks.systems import (
    CsparqlCold,
    CsparqlFilter,
    CsparqlPanes,
    CsparqlPanesReplay,
    CsparqlWarm,
    DuckDB,
    Point,
    Pyoxigraph,
    Rdflib,
    SparkHand,
    System,
)

log = logging.getLogger("benchmarks")
SLOW = ("pyoxigraph", "rdflib")
SRBENCH_SYSTEMS = ("csparql_warm", "pyoxigraph", "rdflib")
"""The SRBench sweep compares the engine with the SPARQL stores (no hand-written plans for its queries)."""
RATIO_SYSTEMS = ("csparql_warm", "csparql_panes", "csparql_panes_replay", "spark_hand", "duckdb")
"""The sliding sweep: the recompute, the pane path live and in a replay, and the hand-written peers."""
PANE_SYSTEMS = ("csparql_panes", "csparql_panes_replay")
REFERENCE_ORDER = ("pyoxigraph", "rdflib", "duckdb", "spark_hand")
"""Whose answer the others are checked against: the independent SPARQL evaluator when it ran."""


@dataclass
class Record:
    """Every figure of one system at one point of a sweep."""

    sweep: str
    workload: str
    system: str
    size: int
    history: int = 1
    ratio: int | None = None
    status: str = "ok"  # ok, not run, failed
    reason: str | None = None
    runs: list[dict] = field(default_factory=list)
    estimated_seconds: float | None = None
    answer_rows: int | None = None
    agrees: bool | None = None
    reference: str | None = None
    extra: dict = field(default_factory=dict)

    def measured(self) -> list[dict]:
        return [r for r in self.runs if not r["warmup"]]

    @property
    def median_seconds(self) -> float | None:
        return median([r["seconds"] for r in self.measured()])

    @property
    def peak_rss(self) -> int | None:
        values = [r["peak_rss_bytes"] for r in self.runs]
        return max(values) if values else None

    @property
    def rss_increase(self) -> int | None:
        values = [r["peak_rss_bytes"] - r["base_rss_bytes"] for r in self.runs]
        return max(values) if values else None

    @property
    def jvm_heap_peak(self) -> int | None:
        values = [r["jvm_heap_peak_bytes"] for r in self.runs if r.get("jvm_heap_peak_bytes") is not None]
        return max(values) if values else None

    def to_dict(self) -> dict:
        measured = [r["seconds"] for r in self.measured()]
        return {
            "sweep": self.sweep, "workload": self.workload, "system": self.system, "size": self.size,
            "history": self.history, "ratio": self.ratio, "status": self.status, "reason": self.reason,
            "repetitions": len(measured), "median_seconds": self.median_seconds,
            "min_seconds": min(measured) if measured else None, "max_seconds": max(measured) if measured else None,
            "estimated_seconds": self.estimated_seconds,
            "peak_rss_bytes": self.peak_rss, "rss_increase_bytes": self.rss_increase,
            "jvm_heap_peak_bytes": self.jvm_heap_peak,
            "answer_rows": self.answer_rows, "agrees_with_reference": self.agrees, "reference": self.reference,
            "runs": self.runs, **self.extra,
        }


class BenchmarkRun:
    """Runs a profile and writes its run folder (see the module docstring)."""

    def __init__(self, profile: Profile, out: Path, keep_data: bool = False):
        self.profile = profile
        self.out = Path(out).resolve()  # spark-submit runs in a point's folder: every path must be absolute
        self.keep_data = keep_data
        self.work = self.out / "work"
        self.records: list[Record] = []
        self.datasets: dict[tuple, data.Dataset] = {}
        self.airflow: dict = {}
        self.notes: list[str] = []
        self.started = time.time()

    # --- set-up -----------------------------------------------------------------------------------------

    def session(self):
        from csparql.runtime.session import spark_session

        return spark_session("local[2]", app_name="csparql-benchmarks")

    def dataset(self, kind: str, size: int, history: int) -> data.Dataset:
        key = (kind, size, history)
        if key not in self.datasets:
            log.info("generating and landing %s: %d triples per window, %d× history", kind, size, history)
            self.datasets[key] = data.build(self.spark, kind, self.work / "data", size, history, self.profile.seed)
        return self.datasets[key]

    def systems(self, names: Sequence[str]) -> list[System]:
        return [self._systems[name] for name in names]

    # --- measuring ----------------------------------------------------------------------------------------

    def measure_point(self, point: Point, names: Sequence[str], repetitions: int | None = None) -> list[Record]:
        """Measure ``names`` on one point: warm-ups, then repetitions, the systems' order rotating each round so
        that machine noise falls on all of them alike; then check every answer against the reference."""
        profile = self.profile
        repetitions = profile.repetitions if repetitions is None else repetitions
        point.work.mkdir(parents=True, exist_ok=True)
        records = {name: Record(point.sweep, point.workload.name, name, point.dataset.size, point.dataset.history,
                                point.label.get("ratio")) for name in names}
        active = []
        for system in self.systems(names):
            record = records[system.name]
            if system.name not in profile.systems:
                record.status, record.reason = "not run", "not among the systems of this run (systems=...)"
                continue
            if system.name in SLOW:
                estimate = self.estimate(point.workload.name, system.name, point.dataset.size)
                if estimate is not None and estimate > profile.slow_limit_seconds:
                    record.status, record.estimated_seconds = "not run", estimate
                    record.reason = (f"would take ~{estimate:.0f} s per repetition (extrapolated from the smaller "
                                     f"windows), over the {profile.slow_limit_seconds:.0f} s limit")
                    continue
            if system.name == "csparql_cold" and point.dataset.size > profile.cold_max_size:
                record.status = "not run"
                record.reason = f"cold runs only up to {profile.cold_max_size} triples (cold_max_size)"
                continue
            if system.name == "csparql_cold" and point.workload.name not in profile.cold_workloads:
                record.status, record.reason = "not run", "cold runs not asked for this workload (cold_workloads)"
                continue
            try:
                system.prepare(point)
            except Exception as error:
                record.status, record.reason = "failed", f"prepare: {type(error).__name__}: {error}"[:2000]
                log.exception("%s failed to prepare %s", system.name, point.workload.name)
                continue
            active.append(system)
        answers = {}
        rounds = profile.warmups + repetitions
        for round_ in range(rounds):
            warmup = round_ < profile.warmups
            shift = round_ % max(1, len(active))
            for system in active[shift:] + active[:shift]:
                record = records[system.name]
                if record.status == "failed":
                    continue
                if system.name == "csparql_cold":
                    # every cold run is cold: no warm-up, and its own repetition count
                    if warmup or len(record.runs) >= profile.cold_repetitions:
                        continue
                try:
                    heap = getattr(system, "heap", None)
                    result = measure(lambda: system.run(point), system.processes, system.children(), heap)
                except Exception as error:
                    record.status, record.reason = "failed", f"{type(error).__name__}: {error}"[:2000]
                    log.exception("%s failed on %s", system.name, point.workload.name)
                    continue
                figures = system.figures(result.value)
                if "seconds" in figures:
                    figures["total_seconds"] = result.seconds
                record.runs.append({**result.to_dict(), **figures, "warmup": warmup and system.name != "csparql_cold",
                                    "round": round_})
                log.info("  %-15s %-20s n=%-9d %8.3f s", point.workload.name, system.name, point.dataset.size,
                         record.runs[-1]["seconds"])
                if system.name not in answers:
                    try:
                        answers[system.name] = system.answer(point, result.value)
                    except Exception as error:
                        record.extra["answer_error"] = f"{type(error).__name__}: {error}"[:500]
        self.check_answers(records, answers, point.workload.tolerance)
        for record in records.values():
            record.extra["window_files"] = sum(len(s.files) for s in point.window.streams.values())
            record.extra["window_file_triples"] = sum(s.records or 0 for s in point.window.streams.values())
            record.extra.update({k: v for k, v in point.label.items() if not k.startswith("_")})
        self.records.extend(records.values())
        return list(records.values())

    def check_answers(self, records: dict[str, Record], answers: dict, tolerance: float | None = None) -> None:
        reference = next((name for name in REFERENCE_ORDER if name in answers), None)
        for name, record in records.items():
            if name not in answers:
                continue
            record.answer_rows = sum(answers[name].values())
            if reference is not None:
                record.reference = reference
                record.agrees = workloads.agree(answers[name], answers[reference], tolerance)
                if not record.agrees:
                    missing = answers[reference] - answers[name]
                    extra = answers[name] - answers[reference]
                    record.extra["disagreement"] = {"missing": [list(k) for k in list(missing)[:5]],
                                                    "extra": [list(k) for k in list(extra)[:5]]}
                    log.warning("%s's answer differs from %s's", name, reference)

    def estimate(self, workload: str, system: str, size: int) -> float | None:
        points = [(r.size, r.median_seconds) for r in self.records
                  if r.workload == workload and r.system == system and r.median_seconds and r.size < size]
        return extrapolate(points, size) if points else None

    def point(self, sweep: str, workload, dataset: data.Dataset, **label) -> Point:
        name = "-".join([sweep, workload.name, f"n{dataset.size}", f"h{dataset.history}"]
                        + [f"{k}{v}" for k, v in label.items()])
        return Point(sweep, workload, dataset, data.AT, self.work / "points" / name, dict(label))

    # --- the sweeps ------------------------------------------------------------------------------------------

    def window_sweep(self) -> None:
        for size in self.profile.window_sizes:
            point = self.point("window", workloads.district_count(), self.dataset("urban", size, 1))
            self.measure_point(point, SYSTEMS)
            if size in (100_000, 1_000_000, 10_000_000) or size == max(self.profile.window_sizes):
                self.save_plans(point)

    def workload_sweep(self) -> None:
        for name in self.profile.workloads:
            for size in self.profile.workload_sizes:
                if name == "physical_window":
                    workload = workloads.physical_window(size)
                    dataset = self.dataset("urban", size, self.profile.physical_history)
                else:
                    workload = workloads.ALL[name]()
                    dataset = self.dataset(workload.dataset, size, 1)
                self.measure_point(self.point("workload", workload, dataset), SYSTEMS)

    def history_sweep(self) -> None:
        for history in self.profile.histories:
            dataset = self.dataset("topics", self.profile.history_window, history)
            point = self.point("history", workloads.topic_count(), dataset)
            self.measure_point(point, ("csparql_warm", "csparql_filter", "spark_hand", "duckdb"))

    def ratio_sweep(self) -> None:
        """Each of ``ratio_workloads`` (the topic count, the distinct topics) at RANGE 3m and STEP = 3m ÷ ratio:
        the recompute, the pane path (live and replayed) and the hand-written peers. The data set holds two
        window-lengths of stream, so that every window of the pane path's schedule (the ``pane_windows`` STEPs
        before ``at``) is full."""
        ratios = []
        for ratio in self.profile.ratios:
            if 180 % ratio:
                self.notes.append(f"ratio {ratio} skipped: 3 minutes is not a whole number of seconds times it")
            else:
                ratios.append(ratio)
        if not ratios or not self.profile.ratio_workloads:
            return
        dataset = self.dataset("topics", self.profile.ratio_window, 2)
        for name in self.profile.ratio_workloads:
            for ratio in ratios:
                step_seconds = 180 // ratio
                self._ratio_point(workloads.ALL[name](f"{step_seconds}s"), dataset, ratio, step_seconds)

    def _ratio_point(self, workload, dataset: data.Dataset, ratio: int, step_seconds: int) -> None:
        point = self.point("ratio", workload, dataset, ratio=ratio, step_seconds=step_seconds)
        names = RATIO_SYSTEMS
        decision = self._systems["csparql_panes"].decision(point)
        reason = getattr(decision, "reason", None)
        keyed = getattr(decision, "keyed", None)
        if reason is not None:  # the pane planner declines: the live path recomputes, a replay has no panes
            names = tuple(name for name in RATIO_SYSTEMS if name != "csparql_panes_replay")
        records = self.measure_point(point, names)
        if reason is not None:
            replay = Record("ratio", workload.name, "csparql_panes_replay", dataset.size, dataset.history, ratio,
                            status="not run", reason=f"no panes ({reason}): a replay recomputes every window")
            replay.extra.update({"step_seconds": step_seconds, "pane_note": reason})
            self.records.append(replay)
            records.append(replay)
        for record in records:
            if record.median_seconds is not None:
                # each triple is in `ratio` windows: the compute a minute of stream costs
                record.extra["seconds_per_stream_minute"] = record.median_seconds * 60 / step_seconds
            if record.system in PANE_SYSTEMS:
                self._pane_checks(point, record, reason)
                record.extra["pane_partials_keyed"] = keyed

    @staticmethod
    def _pane_checks(point: Point, record: Record, declined: str | None) -> None:
        """Record how the pane system's windows compared with the recompute's, window by window; a difference
        is a disagreement like one with the reference."""
        if declined is not None:
            record.extra["pane_note"] = f"panes not used ({declined}): the window is recomputed"
        checked, differing = point.label.get("_pane_checks", {}).get(record.system, (0, []))
        record.extra["windows_checked"] = checked
        record.extra["windows_differing_from_recompute"] = differing
        if differing:
            record.agrees = False
            log.warning("%s: %d window(s) differ from the recompute's", record.system, len(differing))

    def srbench_sweep(self) -> None:
        """SRBench queries (``srbench_queries``) over SRBench data of each ``srbench_stations``: the engine
        against the SPARQL stores over the same window and FROM graphs."""
        for stations in self.profile.srbench_stations:
            log.info("generating and landing SRBench data: %d stations, %d samples an hour", stations,
                     self.profile.srbench_rate)
            dataset, generated = data.build_srbench(self.spark, self.work / "data", stations,
                                                    self.profile.srbench_rate, self.profile.seed)
            for number in self.profile.srbench_queries:
                workload = workloads.srbench(number)
                at = generated.instant(workloads.SRBENCH_WINDOW_HOUR[number])
                name = f"srbench-{workload.name}-s{stations}"
                point = Point("srbench", workload, dataset, at, self.work / "points" / name,
                              {"stations": stations, "rate": self.profile.srbench_rate})
                window = point.plan.streams[0].window
                end = at - at % window.step
                point.label["window_triples"] = sum(1 for t in generated.stream if end - window.range < t[3] <= end)
                self.measure_point(point, SRBENCH_SYSTEMS)

    def save_plans(self, point: Point) -> None:
        """The executed plans of the compiled and the hand-written evaluation, and their exchange counts."""
        folder = self.out / "plans"
        folder.mkdir(parents=True, exist_ok=True)
        summary = {}
        for system in (self._systems["csparql_warm"], self._systems["spark_hand"]):
            try:
                text = system.explain(point)
            except Exception as error:
                text = f"(no plan: {error})"
            path = folder / f"{point.workload.name}-n{point.dataset.size}-{system.name}.txt"
            path.write_text(text, encoding="utf-8")
            summary[system.name] = plan_summary(text)
        for record in self.records:
            if record.sweep == point.sweep and record.size == point.dataset.size and record.system in summary:
                record.extra["plan"] = summary[record.system]

    # --- the whole run ----------------------------------------------------------------------------------------

    def execute(self) -> dict:
        from benchmarks import report

        self.out.mkdir(parents=True, exist_ok=True)
        self.spark = self.session()
        self._systems = {
            "csparql_warm": CsparqlWarm(self.spark),
            "csparql_cold": CsparqlCold(),
            "spark_hand": SparkHand(self.spark),
            "duckdb": DuckDB(),
            "pyoxigraph": Pyoxigraph(),
            "rdflib": Rdflib(),
            "csparql_filter": CsparqlFilter(self.spark),
            "csparql_panes": CsparqlPanes(self.spark, self.profile.pane_windows),
            "csparql_panes_replay": CsparqlPanesReplay(self.spark, self.profile.pane_windows),
        }
        machine_before = machine()
        phases = {}
        sweeps = (("window", self.window_sweep), ("workloads", self.workload_sweep), ("history", self.history_sweep),
                  ("ratio", self.ratio_sweep), ("srbench", self.srbench_sweep))
        for name, phase in sweeps if self.profile.sweeps else ():
            clock = time.perf_counter()
            phase()
            phases[name] = time.perf_counter() - clock
        if self.profile.airflow:
            from benchmarks import airflow_e2e

            clock = time.perf_counter()
            try:
                self.airflow = airflow_e2e.run(self.profile, self.work / "airflow", self.spark)
            except Exception as error:
                log.exception("the Airflow end-to-end measurement failed")
                self.airflow = {"status": "failed", "reason": f"{type(error).__name__}: {error}"[:3000]}
            phases["airflow"] = time.perf_counter() - clock
        else:
            self.airflow = {"status": "not run", "reason": "airflow=false in this run's parameters"}
        result = {
            "schema": 1,
            "mode": self.profile.mode,
            "seed": self.profile.seed,
            "started_at": _iso(self.started),
            "finished_at": _iso(time.time()),
            "duration_seconds": time.time() - self.started,
            "phase_seconds": phases,
            "command": " ".join(sys.argv),
            "machine": {**machine_before, "load_average_at_end": _load()},
            "versions": versions(),
            "parameters": self.profile.to_dict(),
            "ingest": [
                {"dataset": d.kind, "size": d.size, "history": d.history, "stream": i.stream, "triples": i.triples,
                 "bytes": i.bytes, "seconds": i.seconds, "triples_per_second": i.triples_per_second,
                 "format": i.format, "path": i.path}
                for d in self.datasets.values() for i in d.ingests
            ],
            "measurements": [r.to_dict() for r in self.records],
            "airflow": self.airflow,
            "notes": self.notes,
        }
        result["targets"] = report.targets(result)
        report.write(result, self.out)
        if not self.keep_data:
            shutil.rmtree(self.work, ignore_errors=True)
        return result


def plan_summary(text: str) -> dict:
    """Counts of what costs in a Spark plan: shuffles, broadcasts, sorts, Python evaluation."""
    return {
        "shuffles": text.count("Exchange hashpartitioning") + text.count("Exchange SinglePartition")
        + text.count("Exchange rangepartitioning") + text.count("Exchange RoundRobinPartitioning"),
        "broadcasts": text.count("BroadcastExchange"),
        "sort_merge_joins": text.count("SortMergeJoin"),
        "broadcast_hash_joins": text.count("BroadcastHashJoin"),
        "sorts": text.count(" Sort ["),
        "python_udfs": text.count("BatchEvalPython") + text.count("ArrowEvalPython"),
        "windows": text.count("Window ["),
    }


def _iso(seconds: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(seconds))


def _load() -> list[float] | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def machine() -> dict:
    """What the run ran on: CPU, cores, memory, OS, Python, Java, and the load when it started."""
    import psutil

    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr.splitlines()[0]
    except (OSError, subprocess.SubprocessError, IndexError):
        java = None
    return {
        "cpu": cpu,
        "logical_cores": os.cpu_count(),
        "physical_cores": psutil.cpu_count(logical=False),
        "memory_bytes": psutil.virtual_memory().total,
        "os": platform.platform(),
        "python": sys.version.split()[0],
        "java": java,
        "hostname": platform.node(),
        "load_average_at_start": _load(),
        "spark_master": "local[2]",
    }


def versions() -> dict:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for package in ("pyspark", "deltalake", "pyarrow", "duckdb", "pyoxigraph", "rdflib", "apache-airflow", "psutil",
                    "matplotlib"):
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = None
    try:
        root = Path(__file__).resolve().parents[1]
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                               capture_output=True, text=True, timeout=10)
        found["csparql_commit"] = commit.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")
    except (OSError, subprocess.SubprocessError):
        found["csparql_commit"] = None
    return found

"""What a run measures: sizes, repetitions and limits, for the quick and the full mode.

``QUICK`` finishes in a few minutes on two cores (it runs in the test suite as a smoke check: tiny sizes,
fewer repetitions, every system, sweep and figure present); ``FULL`` has the full sizes. Every field can
be overridden on the command line (``--set window_sizes=10000,100000``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

SYSTEMS = ("csparql_warm", "csparql_cold", "spark_hand", "duckdb", "pyoxigraph", "rdflib")
"""The systems of the window-size sweep, in the order of the table."""

RATIO_WORKLOADS = ("topic_count", "topic_set")
"""The workloads the sliding sweep can measure (``ratio_workloads``; in ``benchmarks.workloads.ALL``, each
made for a STEP)."""


@dataclass(frozen=True)
class Profile:
    """Parameters of one run (each documented in benchmarks/README.md)."""

    mode: str
    seed: int = 2010
    systems: tuple[str, ...] = SYSTEMS + ("csparql_filter", "csparql_panes", "csparql_panes_replay")  # measured
    warmups: int = 1
    repetitions: int = 5
    # window-size sweep of the per-district count (04), every system
    window_sizes: tuple[int, ...] = (10_000, 100_000, 1_000_000, 10_000_000)
    # the other workloads, at these window sizes
    workload_sizes: tuple[int, ...] = (100_000, 1_000_000)
    workloads: tuple[str, ...] = ("construct_stream", "topic_count", "physical_window", "two_streams")
    physical_history: int = 10  # the physical window's stream holds this many windows' worth of triples
    # cold runs (one spark-submit each) only up to this window size, and this many repetitions
    cold_max_size: int = 10_000_000
    cold_repetitions: int = 5
    cold_workloads: tuple[str, ...] = ("district_count", "construct_stream", "topic_count", "physical_window",
                                       "two_streams")
    # rdflib / pyoxigraph: a repetition that would take longer than this (extrapolated) is not run
    slow_limit_seconds: float = 600.0
    # history sweep: the topic count (social-data paper) with this window size, history 1× … 100×
    history_window: int = 100_000
    histories: tuple[int, ...] = (1, 3, 10, 30, 100)
    # sliding sweep: these workloads' RANGE 3m with STEP = 3m / ratio (the topic count, whose pane partials are
    # keyed, and the distinct topics, whose are not)
    ratio_window: int = 100_000
    ratios: tuple[int, ...] = (1, 2, 6, 18, 30)
    ratio_workloads: tuple[str, ...] = RATIO_WORKLOADS
    # the pane path's live schedule: this many windows after the first (at most RANGE/STEP of them)
    pane_windows: int = 12
    # SRBench (004): these queries over data of each number of stations, sampled `srbench_rate` times an hour
    srbench_queries: tuple[int, ...] = (1, 4, 10, 12)
    srbench_stations: tuple[int, ...] = (12, 60)
    srbench_rate: int = 6
    # end to end through Airflow
    airflow: bool = True
    airflow_periods: tuple[str, ...] = ("60s", "30s", "20s", "10s", "5s")
    airflow_observe_seconds: int = 600
    airflow_rate: int = 2000  # triples per second landing
    airflow_tick_seconds: int = 5
    airflow_modes: tuple[str, ...] = ("submit", "connect")
    airflow_modes_together: bool = False  # observe the modes at the same time (quick: saves minutes)
    airflow_drain_seconds: int = 300  # how long the observed windows' runs may take to finish after it
    # the capacity sweep on the same stack (benchmarks/capacity.py): this many queries at COMPUTED EVERY
    # capacity_period, each N observed for capacity_observe_seconds, the stream landing at capacity_rate triples/s
    capacity_queries: tuple[int, ...] = (20, 50, 100, 150)
    capacity_period: str = "1m"
    capacity_observe_seconds: int = 600
    capacity_rate: int = 30
    # the window, workload, history, ratio and SRBench sweeps (false: only the Airflow measurements)
    sweeps: bool = True

    def override(self, assignments: list[str]) -> Profile:
        """This profile with ``field=value`` assignments applied (tuples as comma-separated values)."""
        changes = {}
        fields = {f.name: f for f in dataclasses.fields(self)}
        for assignment in assignments:
            key, sep, text = assignment.partition("=")
            key = key.strip().replace("-", "_")
            if not sep or key not in fields:
                known = ", ".join(sorted(fields))
                raise ValueError(f"--set {assignment!r}: use FIELD=VALUE with a field among {known}")
            current = getattr(self, key)
            try:
                changes[key] = _parse(text.strip(), current)
            except ValueError as error:
                raise ValueError(f"--set {assignment!r}: {error}") from None
        unknown = [name for name in changes.get("ratio_workloads", ()) if name not in RATIO_WORKLOADS]
        if unknown:
            raise ValueError(f"--set ratio_workloads: {', '.join(unknown)} not among {', '.join(RATIO_WORKLOADS)}")
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def _parse(text: str, current):
    if isinstance(current, bool):
        if text.lower() in ("1", "true", "yes", "on"):
            return True
        if text.lower() in ("0", "false", "no", "off"):
            return False
        raise ValueError(f"{text!r} is not a boolean")
    if isinstance(current, tuple):
        items = [item.strip() for item in text.split(",") if item.strip()]
        sample = current[0] if current else ""
        return tuple(_parse(item, sample) for item in items)
    if isinstance(current, int):
        return int(float(text.replace("_", "")))
    if isinstance(current, float):
        return float(text)
    return text


FULL = Profile(mode="full")

QUICK = Profile(
    mode="quick",
    warmups=0,  # a smoke check measures nothing worth warming up for: each system runs once per point
    repetitions=1,
    window_sizes=(2_000, 8_000),
    workload_sizes=(2_000,),
    physical_history=3,
    cold_max_size=2_000,
    cold_repetitions=1,
    cold_workloads=("district_count",),
    slow_limit_seconds=60.0,
    history_window=2_000,
    histories=(1, 4),
    ratio_window=2_000,
    ratios=(1, 18),
    pane_windows=4,
    srbench_stations=(12,),
    srbench_rate=1,
    airflow_periods=("15s",),
    # one spark-submit per run costs a JVM start each (its windows were committed ~100 s late on a busy machine):
    # the smoke check observes the Spark Connect mode; the cold system above still runs spark-submit
    airflow_modes=("connect",),
    airflow_observe_seconds=30,  # two windows of 15 s: the first run evaluates the window closed at the unpause
    airflow_modes_together=True,
    airflow_drain_seconds=240,  # ends once the observed windows are done; a slow spark-submit still lands
    airflow_rate=50,
    airflow_tick_seconds=5,
    capacity_queries=(2,),
    capacity_period="15s",
    capacity_observe_seconds=30,
    capacity_rate=20,
)

PROFILES = {"quick": QUICK, "full": FULL}

"""Measure SRBench on csparql: per-window evaluation times of a few queries over generated data; paths over
static graphs with their closures kept (what csparql does) and computed in every window; and the two
entailment strategies (rewriting patterns against the hierarchies, which csparql does, against materialising
each window's entailed graph and matching patterns on it).

    .venv/bin/python scripts/srbench_measure.py --stations 60 --hours 30 --towns 3 --windows 4

Each query is evaluated once to warm up (the first evaluation also computes and stores the closures of static
graphs: reported separately), then over ``--windows`` consecutive windows of the hurricane; the median is
reported. Timings are wall-clock, on whatever else the machine is doing: compare figures of one run only.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "plugins"))

from csparql.engine import catalog  # noqa: E402
from csparql.engine import evaluate as evaluate_module  # noqa: E402
from csparql.engine.closures import DeltaClosureStore  # noqa: E402
from csparql.engine.runner import Engine  # noqa: E402
from csparql.core.frontend import compile_query  # noqa: E402
from csparql.spark.entailment import Entailment  # noqa: E402
from csparql.runtime.session import spark_session  # noqa: E402
from csparql.srbench import Size, generate_workload, query_files  # noqa: E402
from csparql.storage.warehouse import Warehouse  # noqa: E402

HOUR = 3_600_000_000
MINUTE = 60_000_000


class MaterialisingEntailment(Entailment):
    """The other strategy: every pattern reads the whole entailed graph of its sources (all inferred triples of
    the window and the static graphs, as a per-window materialisation would hold them), then matches it."""

    def triples(self, frame, subject=None, predicate=None, object=None):
        from csparql.spark.terms import constant
        from pyspark.sql import functions as F
        from rdflib import Variable

        rows = super().triples(frame)
        for column, term in (("s", subject), ("p", predicate), ("o", object)):
            if term is not None and not isinstance(term, Variable):
                rows = rows.where(F.col(column) == constant(term))
        return rows


def timed(engine: Engine, plan, at: int, name: str) -> tuple[float, int]:
    started = time.perf_counter()
    evaluation = engine.evaluate(plan, at, name)
    return time.perf_counter() - started, len(evaluation.result)


def measure(engine: Engine, path: Path, instants: list[int]) -> dict:
    plan = compile_query(path.read_text(encoding="utf-8"), path.name)
    name = plan.registration.name
    first, _ = timed(engine, plan, instants[0] - HOUR, name)
    times, rows = [], []
    for at in instants:
        seconds, count = timed(engine, plan, at, name)
        times.append(seconds)
        rows.append(count)
    return {"query": path.stem, "first": first, "median": statistics.median(times), "rows": rows}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--stations", type=int, default=60)
    parser.add_argument("--hours", type=int, default=30)
    parser.add_argument("--towns", type=int, default=3, help="filler GeoNames towns per county (static graph size)")
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--queries", default="1,4,10,12", help="SRBench query numbers to time")
    parser.add_argument("--paths", default="12,14", help="queries with paths over static graphs to time without closures kept")
    parser.add_argument("--entailment", default="2,15,16,17", help="queries whose entailment strategies to compare")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()
    spark = spark_session(args.master)
    files = {int(p.name[1:3]): p for p in query_files()}
    with tempfile.TemporaryDirectory() as folder:
        warehouse = Warehouse(Path(folder) / "warehouse")
        started = time.perf_counter()
        workload = generate_workload(warehouse, Size(args.stations, args.hours, 1, args.towns), seed=1, spark=spark)
        data = workload.data
        print(f"data: {len(data.stream)} stream triples, {sum(len(g) for g in data.graphs.values())} static triples, "
              f"generated and landed in {time.perf_counter() - started:.1f} s")
        hurricane = data.scenario.hurricane.start + 2
        engine = Engine(warehouse, spark)

        def windows(path: Path) -> list[int]:
            """Consecutive windows with answers: in the hurricane, or ending at hour 24 for the daily queries."""
            plan = compile_query(path.read_text(encoding="utf-8"))
            period = plan.registration.computed_every
            daily = any(getattr(s.window, "range", 0) >= 24 * HOUR for s in plan.streams)
            first = data.instant(24 if daily else hurricane)
            return [first + k * period for k in range(args.windows)]

        print("\nquery | first window (s) | median of later windows (s) | rows per window")
        for number in [int(n) for n in args.queries.split(",") if n]:
            path = files[number]
            result = measure(engine, path, windows(path))
            print(f"{result['query']} | {result['first']:.1f} | {result['median']:.1f} | {result['rows']}")
        print("\nquery | closures kept (s, median) | computed every window (s, median) | same rows")
        for number in [int(n) for n in args.paths.split(",") if n]:
            path = files[number]
            kept = measure(engine, path, windows(path))
            catalog.DeltaClosureStore = lambda spark, warehouse: None
            try:
                every = measure(engine, path, windows(path))
            finally:
                catalog.DeltaClosureStore = DeltaClosureStore
            print(f"{path.stem} | {kept['median']:.1f} | {every['median']:.1f} | {kept['rows'] == every['rows']}")
        print("\nquery | rewriting (s, median) | materialising (s, median) | same rows")
        for number in [int(n) for n in args.entailment.split(",") if n]:
            path = files[number]
            instants = windows(path)
            rewriting = measure(engine, path, instants)
            evaluate_module.Entailment = MaterialisingEntailment
            try:
                materialising = measure(engine, path, instants)
            finally:
                evaluate_module.Entailment = Entailment
            print(f"{path.stem} | {rewriting['median']:.1f} | {materialising['median']:.1f} | "
                  f"{rewriting['rows'] == materialising['rows']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

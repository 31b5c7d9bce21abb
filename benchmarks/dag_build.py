"""How long building the DAGs of a registry takes, and how many registry files it reads: this checkout's csparql
against another's (``--against PLUGINS``, e.g. the main branch's ``plugins`` folder), side by side in one run.

The registry holds ``--queries`` queries of the capacity benchmark's mix (``benchmarks/capacity.py``), each with
its DAG loader, and the ingestion DAGs' file beside it, as in ``csparql stack``. Each round starts, for each
checkout in turn, one process (imports excluded from the times) that measures:

- **factory**: ``csparql_dags()`` building every DAG (queries, ingestion, revisions) in a process that has not
  looked at the registry yet (the warehouse's compile cache is warm, as after the first parse);
- **factory again**: the same call again in that process, the registry unchanged;
- **per file**: what Airflow's DAG processor does, each DAG file in a fresh state (its process memory
  forgotten): every query's loader, then the ingestion DAGs' file; the sum over the files;
- **one loader, new process**: what one DAG file costs the DAG processor, which parses each in a process of its
  own forked from one that imported Airflow: a process that imported Airflow's DAG bag parses one query's
  loader (importing csparql and compiling the query included).

The first round of each checkout is a warm-up (it fills the compile cache) and is not counted; the figures are
medians over the other rounds, with the ``.rq`` files opened per scenario.

    python -m benchmarks.dag_build --against /work/main/plugins --queries 100 --rounds 5
"""

from __future__ import annotations

import argparse
import builtins
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

REPOSITORY = Path(__file__).resolve().parents[1]
STREAMS_FILE = REPOSITORY / "dags" / "csparql_streams.py"


def write_registry(dags: Path, count: int) -> None:
    """``count`` queries of the capacity mix with their loaders in ``dags/queries``, the ingestion DAGs'
    file in ``dags``."""
    from benchmarks.capacity import query_text

    registry = dags / "queries"
    registry.mkdir(parents=True)
    (dags / "csparql_streams.py").write_text(STREAMS_FILE.read_text(encoding="utf-8"), encoding="utf-8")
    loader = ("# Airflow DAG loader for the C-SPARQL query in {query} (written by `csparql register`; do not edit).\n"
              "from csparql.orchestration.dags import registered_query_dag\n\ndag = registered_query_dag(__file__)\n")
    for index in range(count):
        name, text = query_text(index, "1m")
        (registry / f"{name}.rq").write_text(text, encoding="utf-8")
        (registry / f"{name}.py").write_text(loader.format(query=f"{name}.rq"), encoding="utf-8")


def child(dags: Path) -> dict:
    """The measurements of one process (see the module's docstring), as JSON-ready numbers."""
    import logging

    logging.disable(logging.CRITICAL)
    from csparql.deploy import registry as registry_module
    from csparql.deploy.settings import Settings
    from csparql.orchestration.dags import registered_query_dag
    from csparql.orchestration.factory import csparql_dags

    registry = dags / "queries"
    settings = Settings.from_environment(dict(os.environ))
    reads: Counter = Counter()
    real_open = io.open

    def counting_open(file, *args, **kwargs):
        if isinstance(file, (str, os.PathLike)) and str(file).endswith(".rq"):
            reads["rq"] += 1
        return real_open(file, *args, **kwargs)

    builtins.open = io.open = counting_open

    def forget() -> None:
        for cache in ("_COMPILED", "_FACTS", "_READ"):
            if hasattr(registry_module, cache):
                setattr(registry_module, cache, {})

    def timed(action) -> tuple[float, int]:
        reads.clear()
        started = time.perf_counter()
        action()
        return time.perf_counter() - started, reads["rq"]

    forget()
    factory, factory_reads = timed(lambda: csparql_dags(settings=settings))
    again, again_reads = timed(lambda: csparql_dags(settings=settings))
    per_file = per_file_reads = 0
    for loader in [*sorted(registry.glob("*.py")), dags / "csparql_streams.py"]:
        forget()
        if loader.parent == registry:
            seconds, count = timed(lambda: registered_query_dag(loader))
        else:
            seconds, count = timed(lambda: csparql_dags(settings=settings, queries=False))
        per_file += seconds
        per_file_reads += count
    return {"factory": factory, "factory_reads": factory_reads, "again": again, "again_reads": again_reads,
            "per_file": per_file, "per_file_reads": per_file_reads}


def fresh_loader(loader: Path) -> float:
    """Seconds a process that imported Airflow's DAG bag takes to parse ``loader``."""
    import logging

    logging.disable(logging.CRITICAL)
    from airflow.dag_processing.dagbag import DagBag

    started = time.perf_counter()
    bag = DagBag(str(loader))
    seconds = time.perf_counter() - started
    if len(bag.dags) != 1:
        raise SystemExit(f"{loader}: {bag.import_errors}")
    return seconds


def run_child(plugins: Path, dags: Path, warehouse: Path, home: Path) -> dict:
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(plugins), str(REPOSITORY)]),
                   "CSPARQL_REGISTRY": str(dags / "queries"), "CSPARQL_WAREHOUSE": str(warehouse),
                   "AIRFLOW_HOME": str(home), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                   "AIRFLOW__CORE__UNIT_TEST_MODE": "False"}
    code = ("import csparql, json, sys; from pathlib import Path; from benchmarks.dag_build import child; "
            "print(json.dumps({'csparql': csparql.__file__, **child(Path(sys.argv[1]))}))")
    done = subprocess.run([sys.executable, "-c", code, str(dags)], env=environment, capture_output=True,
                          text=True, check=False, cwd=REPOSITORY)
    if done.returncode != 0:
        raise SystemExit(f"the measuring process of {plugins} failed:\n{done.stderr[-4000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not result["csparql"].startswith(str(plugins)):
        raise SystemExit(f"the measuring process imported {result['csparql']}, not the csparql of {plugins}")
    loader = sorted((dags / "queries").glob("*.py"))[-1]
    code = ("import sys; from pathlib import Path; import airflow.sdk; from airflow.dag_processing import dagbag; "
            "from benchmarks.dag_build import fresh_loader; print(fresh_loader(Path(sys.argv[1])))")
    done = subprocess.run([sys.executable, "-c", code, str(loader)], env=environment, capture_output=True,
                          text=True, check=False, cwd=REPOSITORY)
    if done.returncode != 0:
        raise SystemExit(f"parsing {loader} with {plugins} failed:\n{done.stderr[-4000:]}")
    result["fresh_loader"] = float(done.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--against", type=Path, required=True, help="the other checkout's plugins folder")
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=5, help="counted rounds (one warm-up round more)")
    args = parser.parse_args(argv)
    variants = {"other": args.against.resolve(), "this": (REPOSITORY / "plugins").resolve()}
    with tempfile.TemporaryDirectory(prefix="csparql-dag-build-") as folder:
        root = Path(folder)
        write_registry(root / "dags", args.queries)
        results: dict[str, list[dict]] = {name: [] for name in variants}
        for round_number in range(args.rounds + 1):
            for name, plugins in variants.items():
                result = run_child(plugins, root / "dags", root / f"warehouse-{name}", root / f"home-{name}")
                if round_number > 0:
                    results[name].append(result)
                print(f"round {round_number} {name}: " + ", ".join(
                    f"{key} {value:.3f}" if isinstance(value, float) else f"{key} {value}"
                    for key, value in result.items() if key != "csparql"), file=sys.stderr, flush=True)
    print(f"{args.queries} queries of the capacity mix, median of {args.rounds} rounds "
          f"(other: {variants['other']}, this: {variants['this']})")
    print(f"{'':28} {'other':>16} {'this':>16}")
    for key, label in (("factory", "csparql_dags()"), ("again", "csparql_dags() again"),
                       ("per_file", "each DAG file, fresh state")):
        cells = []
        for name in variants:
            seconds = statistics.median(r[key] for r in results[name])
            opened = statistics.median(r[f"{key}_reads"] for r in results[name])
            cells.append(f"{seconds:7.2f} s {opened:6.0f} rq")
        print(f"{label:28} {cells[0]:>16} {cells[1]:>16}")
    cells = [f"{statistics.median(r['fresh_loader'] for r in results[name]):7.2f} s" for name in variants]
    print(f"{'one loader, new process':28} {cells[0]:>16} {cells[1]:>16}")


if __name__ == "__main__":
    main()

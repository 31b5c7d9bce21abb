"""End to end through Airflow: the shortest ``COMPUTED EVERY`` a query keeps up with, and the time from a
window's end to its results being committed.

A real embedded stack (``csparql.stack.airflow_stack.AirflowStack``: api-server, scheduler, DAG processor and
triggerer on loopback, SQLite, LocalExecutor) runs the per-district count (04) as
``[RANGE 1m STEP p] COMPUTED EVERY p`` for decreasing periods p, in two Spark modes:

- ``submit``: one ``spark-submit`` of the packaged job ``csparql/jobs/evaluate_window.py`` per run (the standalone mode's code
  path, SparkSubmitHook, with the master ``local[2]``: a new driver JVM per window);
- ``connect``: every run a client of one Spark Connect server (``local[2]``) started here with the product's
  launcher (``csparql.runtime.connect_server.ConnectServer``, as ``csparql stack`` starts it).

Both are DAGs built by the product's own ``query_dag`` from a deployment of the query, with the Spark mode
set per DAG (``bench_dags.py`` in the stack's DAGs folder), so one stack serves both.

While a DAG is unpaused, a feeder thread lands the stream continuously: every ``tick`` seconds it writes the
registrations of the last tick (``rate`` triples a second, timestamped with the wall clock) as timestamped
N-Quads and lands them with ``ingest_stream`` in this process, without Spark, as the push endpoint and the
Redis and Kafka sources land small batches (through the benchmark's own Spark it cost a JVM ~10 s of CPU a
minute of the two cores the stack is measured on); the ingest advances the stream's watermark; the query's
run waits for that watermark (allowed lateness 0 s). Every two seconds the lag — now minus the
end of the latest window whose results are committed — is sampled. A period is kept up with when the lag
does not grow over the observation (``observation.lag_growth`` under ``KEEP_UP_SLOPE`` seconds per second) and at
most one of the observation's windows (from the latest closed when the DAG is unpaused to the last closed a
period before the end) is missing. The commit latency of a window is the end of its run (start +
duration in the runs table, which is appended after the results commit) minus the window's end.

Before the periods, on the same stack and with the connect mode, the capacity sweep runs (``benchmarks/capacity.py``):
how many registered queries at ``COMPUTED EVERY 1m`` the stack keeps up with.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import socket
import threading
import time
from pathlib import Path

from benchmarks import capacity, data
from benchmarks.observation import KEEP_UP_SLOPE, observe
from csparql.runtime.connect_server import ConnectServer
from csparql.core.windows import parse_duration

log = logging.getLogger("benchmarks.airflow")
HOST = "127.0.0.1"
SUBMIT_CONNECTION = "bench_spark_submit"
CONNECT_CONNECTION = "bench_spark_connect"

DAG_FILE = '''"""Benchmark DAGs (written by benchmarks/airflow_e2e.py): each query of bench_dags.json with its own Spark mode."""
import dataclasses
import json
from pathlib import Path

from csparql.deploy.plan import deployment_of
from csparql.deploy.settings import Settings
from csparql.orchestration.dags import query_dag

for entry in json.loads(Path(__file__).with_name("bench_dags.json").read_text(encoding="utf-8")):
    settings = dataclasses.replace(Settings.from_environment(), spark=entry["spark"], spark_conn_id=entry["connection"],
                                   registry=Path(entry["registry"]), retries=0)
    dag = query_dag(deployment_of(Path(entry["query"]), settings), settings)
    globals()[dag.dag_id] = dag
'''


def query_text(period: str) -> str:
    """The per-district count (04) over a one-minute window sliding every ``period``, computed every ``period``."""
    return f"""REGISTER QUERY CarsPerDistrict COMPUTED EVERY {period} AS
PREFIX c: <http://linkedurbandata.org/city#>
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT DISTINCT ?district ?passages
FROM STREAM <{data.MILAN_TOLLGATES}> [RANGE 1m STEP {period}]
WHERE {{ ?tollgate t:registers ?car .
        ?tollgate c:placedIn ?street .
        ?district c:contains ?street . }}
AGGREGATE {{ (?passages, COUNT, {{?district}}) }}
"""


def dag_id(mode: str, period: str) -> str:
    return f"bench_{mode}_every_{period}"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


class Feeder:
    """Lands the tollgate stream continuously (see the module docstring) while ``active``."""

    def __init__(self, warehouse, folder: Path, rate: int, tick: float, seed: int):
        self.warehouse = warehouse
        self.folder = folder
        self.rate = rate
        self.tick = tick
        self.rng = random.Random(seed)
        self.city = data.City.of(seed)
        self.last = time.time_ns() // 1000
        self.ingests: list[dict] = []
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="feeder", daemon=True)

    def start(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        self.last = time.time_ns() // 1000
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=300)

    def _run(self) -> None:
        from csparql.ingest.ingest import ingest_stream

        index = 0
        while not self._stop.wait(max(0.0, self.tick - 0.0)):
            now = time.time_ns() // 1000
            count = max(1, int(self.rate * (now - self.last) / 1e6))
            path = self.folder / f"feed-{index:05d}.nq"
            index += 1
            data._write_registrations(path, self.rng, self.city, self.last, now, count)
            clock = time.perf_counter()
            try:
                report = ingest_stream(None, self.warehouse, data.MILAN_TOLLGATES, [path], in_process=True)
                self.ingests.append({"triples": report.landed, "seconds": time.perf_counter() - clock,
                                     "watermark": report.max_ts})
            except Exception as error:  # keep feeding: the trial's lag shows what a failed ingest costs
                self.errors.append(f"{type(error).__name__}: {error}"[:500])
            path.unlink(missing_ok=True)
            self.last = now


def run(profile, work: Path, spark) -> dict:
    """The end-to-end figures (see the module docstring) as a dictionary for results.json."""
    from csparql.deploy.settings import Settings
    from csparql.ingest.ingest import load_static
    from csparql.stack.airflow_stack import AirflowStack
    from csparql.storage.warehouse import Warehouse

    if work.exists():
        shutil.rmtree(work)
    dags = work / "dags"
    queries = work / "queries"
    for folder in (dags, queries):
        folder.mkdir(parents=True, exist_ok=True)
    warehouse = Warehouse(work / "warehouse")
    static = work / "city.nt"
    static.write_text("".join(data.City.of(profile.seed).static_lines()), encoding="utf-8")
    load_static(spark, warehouse, None, [static], replace=True)

    modes = list(profile.airflow_modes)
    periods = sorted(profile.airflow_periods, key=parse_duration, reverse=True)
    entries = []
    for mode in modes:
        for period in periods:
            path = queries / f"{dag_id(mode, period)}.rq"
            path.write_text(query_text(period), encoding="utf-8")
            entries.append({"query": str(path), "registry": str(queries),
                            "spark": "standalone" if mode == "submit" else "connect",
                            "connection": SUBMIT_CONNECTION if mode == "submit" else CONNECT_CONNECTION})
    (dags / "bench_dags.json").write_text(json.dumps(entries, indent=1), encoding="utf-8")
    (dags / "bench_dags.py").write_text(DAG_FILE, encoding="utf-8")

    capacity_runs = bool(profile.capacity_queries)
    server = None
    if "connect" in modes or capacity_runs:
        server = ConnectServer(work / "connect", port=_free_port())
        server.start()
    registry = dags / "registry"  # the capacity sweep's queries, registered as csparql register does
    environment = {
        "CSPARQL_REGISTRY": str(registry),
        "CSPARQL_WAREHOUSE": str(warehouse.root),
        "CSPARQL_LANDING": str(work / "landing"),
        "CSPARQL_ALLOWED_LATENESS": "0s",
        "CSPARQL_WAIT_TIMEOUT": "5m",
        "CSPARQL_POLL_INTERVAL": "1s",
    }
    extra = {f"AIRFLOW_CONN_{SUBMIT_CONNECTION.upper()}": json.dumps(
        {"conn_type": "spark", "host": "local[2]", "extra": {"deploy-mode": "client"}})}
    if server:
        environment.update({"CSPARQL_SPARK": "connect", "CSPARQL_SPARK_CONN_ID": CONNECT_CONNECTION})
        # as csparql stack's connection: the password is the server's token
        extra[f"AIRFLOW_CONN_{CONNECT_CONNECTION.upper()}"] = f"spark-connect://:{server.token}@localhost:{server.port}"
    stack = AirflowStack(home=work / "airflow", dags=dags, settings_environment=environment, port=_free_port(),
                         pool_slots=2, extra_environment=extra)
    result = {"status": "ok", "trials": [], "modes": modes, "periods": periods, "rate": profile.airflow_rate,
              "tick_seconds": profile.airflow_tick_seconds}
    feeder = None
    try:
        clock = time.perf_counter()
        feeder = Feeder(warehouse, work / "feed",
                        profile.capacity_rate if capacity_runs else profile.airflow_rate,
                        profile.airflow_tick_seconds, profile.seed)
        feeder.start()  # landing while the stack starts: a watermark exists before the first window waits
        stack.set_up()
        stack.start()
        stack.supervise_in_background()  # as csparql stack does: the scheduler may exit on a database error
        stack.wait_until_healthy()
        stack.wait_for_dags([dag_id(m, p) for m in modes for p in periods])
        if server:
            server.wait_until_answering()
            result["connect_url"] = server.address
        result["stack_start_seconds"] = time.perf_counter() - clock
        if capacity_runs:
            settings = Settings(registry=registry, warehouse=warehouse, landing=work / "landing")
            try:
                result["capacity"] = capacity.sweep(profile, stack, settings, warehouse, feeder, server)
            except Exception as error:
                log.exception("the capacity sweep failed")
                result["capacity"] = {"status": "failed", "reason": f"{type(error).__name__}: {error}"[:3000]}
        else:
            result["capacity"] = {"status": "not run", "reason": "capacity_queries is empty in this run's parameters"}
        feeder.rate = profile.airflow_rate
        shortest = {mode: None for mode in modes}
        # modes one after the other (full), or together to save time (quick: a smoke check)
        groups = [modes] if profile.airflow_modes_together else [[mode] for mode in modes]
        for group in groups:
            for period in periods:
                log.info("Airflow: %s, COMPUTED EVERY %s, %d s", " + ".join(group), period,
                         profile.airflow_observe_seconds)
                trials = observe(stack, warehouse, [dag_id(mode, period) for mode in group], period,
                                 profile.airflow_observe_seconds, profile.airflow_drain_seconds)
                for mode, trial in zip(group, trials):
                    trial["mode"] = mode
                    trial["together_with"] = [m for m in group if m != mode]
                    result["trials"].append(trial)
                    log.info("Airflow: %s every %s: %d/%d windows, lag slope %s, keeps up: %s", mode, period,
                             trial["windows_evaluated"], trial["windows_expected"], trial["lag_slope"],
                             trial["keeps_up"])
                    if trial["keeps_up"]:
                        shortest[mode] = period  # periods are tried longest first
                if not any(t["keeps_up"] for t in trials):
                    break  # a shorter period cannot keep up either
        result["shortest_period_kept_up"] = shortest
    finally:
        if feeder is not None:
            feeder.stop()
            result["feeder"] = {"ingests": len(feeder.ingests), "errors": feeder.errors[:5],
                                "median_ingest_seconds": (sorted(i["seconds"] for i in feeder.ingests)[
                                    len(feeder.ingests) // 2] if feeder.ingests else None)}
        stack.stop()
        if server:
            server.stop()
    result["description"] = (
        f"The per-district count over `[RANGE 1m STEP p] COMPUTED EVERY p`, a stream of {profile.airflow_rate} "
        f"triples/s landed every {profile.airflow_tick_seconds} s through `ingest_stream` (allowed lateness 0 s), "
        f"each period observed for {profile.airflow_observe_seconds} s on a real embedded Airflow stack"
        + (" (the modes observed at the same time, sharing the two cores: a smoke check)"
           if profile.airflow_modes_together else " (one mode at a time)") + "; "
        "kept up = the lag does not grow (slope < "
        f"{KEEP_UP_SLOPE} s/s) and at most one of the observed windows is missing.")
    return result

"""Windows due together on one triggerer: evaluated one by one on two places, as before batching; as a batch
(``csparql.orchestration.triggers.DueTogether``) whose windows each run their own Spark job; and as a batch
whose windows' plans run up to 4 or 8 to a Spark job (``csparql.engine.together``); side by side in one run
(``./bench.sh --together --set queries=20 --set trials=5``).

One Spark Connect server (the product's launcher, ``local[2]``) and one warehouse holding an hour of the sample
tollgates stream and the city graph. The capacity sweep's mix of queries (``benchmarks.capacity``, ``COMPUTED
EVERY 1m``) is registered once per way, each way's results under names of its own. A trial starts the
``WindowCompleteTrigger`` of every query of one way, as the operator gives them, on one asyncio loop as the
triggerer runs them, for one instant whose windows are complete: all fall due at once. The figures are the time
from the triggers' start to each trigger's event (its task ended): the median, p95 and the last, per trial, and
their medians over the trials. Every way evaluates the same instants, in turn (each round starting with the next
way), and the benchmark checks that their result tables hold the same rows."""

from __future__ import annotations

import asyncio
import math
import os
import statistics
import tempfile
import time
from pathlib import Path

import pendulum

from benchmarks import capacity, data

WAYS = {"alone": (2, None), "one_job_each": (2, 1), "jobs_of_4": (2, 4), "jobs_of_8": (2, 8)}
"""Each way's places (``[csparql] triggerer_evaluations``) and windows per Spark job
(``[csparql] triggerer_windows_per_job``). ``alone``: each window evaluated in its own thread, two
at a time (the trigger before batching); ``one_job_each``: batched, each window's plan its own Spark job (the
batch before its plans were combined); ``jobs_of_N``: batched, up to N windows' plans in one Spark job."""

CONNECTION = "bench_connect"


def _alone_trigger():
    """The trigger as it evaluated before batching: each complete window in a thread of its own, two at a
    time on the loop."""
    from csparql.orchestration.triggers import WindowCompleteTrigger

    places: dict[int, asyncio.Semaphore] = {}

    class AloneTrigger(WindowCompleteTrigger):
        async def evaluate_complete_window(self, complete):
            loop = asyncio.get_running_loop()
            semaphore = places.setdefault(id(loop), asyncio.Semaphore(2))
            async with semaphore:
                return await asyncio.to_thread(self.evaluate, complete)

    return AloneTrigger


def _triggers(kind, registry: Path, prefix: str, warehouse: str, at: str) -> list:
    from airflow.sdk import DAG

    from csparql.orchestration.operators import CsparqlEvaluateWindowOperator

    triggers = []
    for query in sorted(registry.glob(f"{prefix}*.rq")):
        with DAG(query.stem, schedule=None, start_date=pendulum.datetime(2010, 1, 1, tz="UTC")):
            operator = CsparqlEvaluateWindowOperator(task_id="evaluate_window", query=str(query), name=query.stem,
                                                     warehouse=warehouse, conn_id=CONNECTION)
        triggers.append(kind(**{**operator.start_trigger_args.trigger_kwargs, "window_instant": at}))
    return triggers


def trial(kind, registry: Path, prefix: str, warehouse: str, at: str) -> list[float]:
    """Seconds from the start of every trigger of the way ``prefix`` to each one's event."""
    triggers = _triggers(kind, registry, prefix, warehouse, at)

    async def scenario() -> list[float]:
        started = time.monotonic()

        async def ended(trigger) -> float:
            async for event in trigger.run():
                if type(event).__name__ != "TaskSuccessEvent" and event.payload.get("status") != "evaluated":
                    raise RuntimeError(f"{trigger.evaluation['name']}: the window at {at} ended {event}")
                return time.monotonic() - started
            raise RuntimeError("the trigger ended without an event")

        return sorted(await asyncio.gather(*(ended(t) for t in triggers)))

    return asyncio.run(scenario())


def _rows(warehouse, name: str) -> list:
    """What the query ``name`` wrote: its stored windows and their rows, or, for a ``REGISTER STREAM`` query, the
    triples of its output stream with their timestamps."""
    from csparql.storage import delta
    from csparql.storage.stored import StoredResults
    from csparql.storage.warehouse import output_stream_iri

    def rows(result) -> list[str]:
        return sorted(map(repr, (result.rows if result.form == "select" else result.triples) or []))

    stream = warehouse.stream(str(output_stream_iri(name)))
    if delta.exists(stream):
        table = delta.open_table(stream).to_pyarrow_table().select(["s", "p", "o", "ts"])
        return sorted(map(repr, table.to_pylist()))
    return sorted((end, rows(result)) for _, end, result in StoredResults(warehouse, name).windows())


def main(queries: int = 20, trials: int = 5) -> dict[str, list[dict]]:
    from csparql.core.windows import format_instant
    from csparql.deploy.registration import register_text
    from csparql.deploy.settings import Settings
    from csparql.ingest.ingest import ingest_stream, load_static
    from csparql.runtime.connect_server import ConnectServer
    from csparql.runtime.session import spark_session
    from csparql.samples import write_samples
    from csparql.stack.airflow_stack import free_port

    root = Path(tempfile.mkdtemp(prefix="due-together-"))
    server = ConnectServer(root / "connect", port=free_port(), master="local[2]")
    server.start()
    try:
        url = server.wait_until_answering()
        os.environ.update({"AIRFLOW_HOME": str(root / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                           "AIRFLOW__OPENLINEAGE__DISABLED": "True",
                           f"AIRFLOW_CONN_{CONNECTION.upper()}":
                               f"spark-connect://:{server.token}@localhost:{server.port}"})
        settings = Settings.from_environment({"CSPARQL_REGISTRY": str(root / "registry"),
                                              "CSPARQL_WAREHOUSE": str(root / "warehouse")})
        os.environ["AIRFLOW__CSPARQL__REGISTRY"] = str(settings.registry)
        samples = write_samples(root / "samples", hours=1)
        ingest_stream(None, settings.warehouse, data.MILAN_TOLLGATES, [samples.streams[data.MILAN_TOLLGATES]],
                      in_process=True)
        load_static(spark_session(url), settings.warehouse, None, [samples.graphs[None]])
        for way in WAYS:
            for index in range(queries):
                name, text = capacity.query_text(index, "1m")
                register_text(text.replace(f"REGISTER QUERY {name}", f"REGISTER QUERY {way}_{name}")
                              .replace(f"REGISTER STREAM {name}", f"REGISTER STREAM {way}_{name}"),
                              settings, name=f"{way}_{name}", replace=True, source_name=f"{way}_{name}.rq")
        kinds = {"alone": _alone_trigger()}
        from csparql.orchestration.triggers import WindowCompleteTrigger

        ways = list(WAYS)

        figures: dict[str, list[dict]] = {way: [] for way in WAYS}
        first = samples.start + 10 * 60_000_000
        for number in range(trials + 1):  # the first round warms the server up and is not counted
            at = format_instant(first + number * 60_000_000)
            for way in ways[number % len(ways):] + ways[:number % len(ways)]:  # each way first in turn
                places, per_job = WAYS[way]
                os.environ["AIRFLOW__CSPARQL__TRIGGERER_EVALUATIONS"] = str(places)
                os.environ["AIRFLOW__CSPARQL__TRIGGERER_WINDOWS_PER_JOB"] = str(per_job or 1)
                ended = trial(kinds.get(way, WindowCompleteTrigger), settings.registry, f"{way}_",
                              str(settings.warehouse.root), at)
                if number:
                    figures[way].append({"p50": statistics.median(ended),
                                         "p95": ended[math.ceil(0.95 * len(ended)) - 1], "last": ended[-1]})
        _report(figures, queries, trials)
        for index in range(queries):
            name, _ = capacity.query_text(index, "1m")
            answers = {way: _rows(settings.warehouse, f"{way}_{name}") for way in WAYS}
            if len({repr(a) for a in answers.values()}) != 1:
                raise AssertionError(f"{name}: the ways' windows differ")
        print("every way's result tables hold the same windows and rows")
    finally:
        server.stop()
    return figures


def _report(figures: dict[str, list[dict]], queries: int, trials: int) -> None:
    """Print each way's medians over the trials, and how much longer the last window waits alone."""
    print(f"{queries} windows due at once, {trials} trials (seconds from the triggers' start to each one's end; "
          "medians over the trials):")
    for way in WAYS:
        row = {key: statistics.median(t[key] for t in figures[way]) for key in ("p50", "p95", "last")}
        print(f"  {way:<12} p50 {row['p50']:.2f} s  p95 {row['p95']:.2f} s  last {row['last']:.2f} s")
    alone = statistics.median(t["last"] for t in figures["alone"])
    for way in list(WAYS)[1:]:
        print(f"  alone ÷ {way} (last window): {alone / statistics.median(t['last'] for t in figures[way]):.2f}×",
              flush=True)

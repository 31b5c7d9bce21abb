"""Windows evaluated and ended on the triggerer, against a real Spark Connect server: their OpenLineage events,
and windows due together evaluated as one batch.

OpenLineage: ``WindowCompleteTrigger.evaluate`` run as Airflow's triggerer runs it — the task instance built from the serialized DAG by the triggerer's own
``TriggerRunner.create_runtime_ti``, the evaluation a client of a real Spark Connect server — with the
OpenLineage provider's ``file`` transport; the events are read back from its file.

The trigger runs in a fresh Python process: this process holds the suite's classic SparkSession, and PySpark
opens no Connect session beside it. Only the database row of the task instance is not there (no scheduler
runs): the triggerer's ``TaskInstanceDTO`` is built by hand with the fields the triggerer gives it.

Windows due together: the triggers of four example queries for one instant, run on one event loop as the
triggerer runs them, are evaluated as one batch, each window as pyoxigraph evaluates it alone; killed in the
middle of the batch and run again, every window is there once."""

from __future__ import annotations

import json
import re
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from csparql.examples import examples_folder
from csparql.storage import delta
from csparql.storage.revisions import table_version
from csparql.storage.warehouse import Warehouse
from csparql.core.windows import format_instant
from orchestration.spark_cluster import spark_environment
from orchestration.spark_connect import ingest_city_hour, test_server

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

TOLLGATES = "http://streams.org/citytollgates.trdf"
MILAN = "http://streams.org/milantollgates.trdf"
QUERY = examples_folder("queries") / "04-cars-per-district.rq"
NAMESPACE = "csparql-triggerer"
CONNECTION = "csparql_connect"

# As the triggerer: the DAG serialized, the runtime task instance made from it and the DAG run's data, the
# trigger's kwargs the operator gave (its template field rendered), then the trigger's evaluation.
_TRIGGER = """
import json, sys, uuid
from datetime import datetime, timedelta, timezone

import pendulum
from airflow.executors.workloads.task import TaskInstanceDTO
from airflow.jobs.triggerer_job_runner import TriggerRunner
from airflow.providers.openlineage.plugins.adapter import OpenLineageAdapter
from airflow.sdk import DAG
from airflow.serialization.serialized_objects import DagSerialization
from airflow.triggers.base import TriggerEvent

from csparql.orchestration.operators import CsparqlEvaluateWindowOperator
from csparql.orchestration.triggers import WindowCompleteTrigger

query, warehouse, at, dag_id, conn_id = sys.argv[1:]
window_end = datetime.fromisoformat(at.replace("Z", "+00:00"))
with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2010, 1, 1, tz="UTC")) as dag:
    operator = CsparqlEvaluateWindowOperator(task_id="evaluate_window", query=query, name="cars",
                                             warehouse=warehouse, conn_id=conn_id)
run_id = "manual__" + at
ti = TaskInstanceDTO(id=uuid.uuid4(), task_id="evaluate_window", dag_id=dag_id, run_id=run_id, try_number=1,
                     dag_version_id=uuid.uuid4(), pool_slots=1, priority_weight=1)
dag_run = {"dag_id": dag_id, "run_id": run_id, "logical_date": window_end,
           "data_interval_start": window_end - timedelta(minutes=5), "data_interval_end": window_end,
           "run_after": window_end, "start_date": datetime.now(timezone.utc), "end_date": None, "clear_number": 0,
           "run_type": "manual", "state": "running", "conf": {}, "consumed_asset_events": [], "partition_key": None}
runtime_ti = TriggerRunner.create_runtime_ti(ti, DagSerialization.to_dict(dag), dag_run)
trigger = WindowCompleteTrigger(**{**operator.start_trigger_args.trigger_kwargs, "window_instant": at})
trigger.task_instance = runtime_ti
event = trigger.evaluate(TriggerEvent({"status": "complete"}))
print("CSPARQL_RESULT " + json.dumps({
    "event": type(event).__name__,
    "run_id": OpenLineageAdapter.build_task_instance_run_id(dag_id, "evaluate_window", 1, window_end, -1),
    "parent_run_id": OpenLineageAdapter.build_dag_run_id(dag_id, window_end, 0)}), flush=True)
"""


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    server = test_server(tmp_path_factory.mktemp("spark-connect"))
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def city(spark, server, tmp_path_factory):
    """An hour of the two sample tollgates streams and the city's static graph, ingested while the server
    starts."""
    root = tmp_path_factory.mktemp("triggerer-lineage")
    warehouse, samples = ingest_city_hour(spark, root, (TOLLGATES, MILAN))
    return root, warehouse, samples


def run_trigger(server, root: Path, warehouse: Warehouse, at: int, dag_id: str, connection: str,
                **openlineage: str) -> tuple[dict, list[dict]]:
    """Evaluate the window at ``at`` in a trigger of a new process; what it printed and the events sent."""
    lineage = root / f"{dag_id}.jsonl"
    env = spark_environment(root)
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    env.update({
        "AIRFLOW_HOME": str(root / "airflow"),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        f"AIRFLOW_CONN_{CONNECTION.upper()}": f"spark-connect://:{server.token}@localhost:{server.port}",
        "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps({"type": "file", "log_file_path": str(lineage),
                                                       "append": True}),
        "AIRFLOW__OPENLINEAGE__NAMESPACE": NAMESPACE,
        **openlineage,
    })
    done = subprocess.run([sys.executable, "-c", _TRIGGER, str(QUERY), str(warehouse.root), format_instant(at),
                           dag_id, connection], env=env, cwd=root, capture_output=True, text=True, timeout=240,
                          stdin=subprocess.DEVNULL)
    [line] = [line for line in done.stdout.splitlines() if line.startswith("CSPARQL_RESULT ")] or [None]
    assert done.returncode == 0 and line, done.stdout[-2000:] + done.stderr[-4000:]
    events = [json.loads(e) for e in lineage.read_text(encoding="utf-8").splitlines()] if lineage.exists() else []
    return json.loads(line.split(" ", 1)[1]), events


def test_a_window_ended_on_the_triggerer_sends_its_lineage_as_a_task_process_would(server, city):
    root, warehouse, samples = city
    server.wait_until_answering()
    printed, events = run_trigger(server, root, warehouse, samples.end, "cars_on_triggerer", CONNECTION)
    assert printed["event"] == "TaskSuccessEvent"  # the task ended on the triggerer: no task process
    assert [e["eventType"] for e in events] == ["START", "COMPLETE"]
    start, complete = events
    for event in events:  # the listener's names: the job dag_id.task_id, the run id of the try, its DAG run
        assert event["job"] == {**event["job"], "namespace": NAMESPACE, "name": "cars_on_triggerer.evaluate_window"}
        assert event["run"]["runId"] == printed["run_id"]
        assert event["run"]["facets"]["parent"]["run"]["runId"] == printed["parent_run_id"]
        assert event["run"]["facets"]["parent"]["job"]["name"] == "cars_on_triggerer"
    assert start["eventTime"] <= complete["eventTime"]

    tollgates, city_graph = warehouse.stream(TOLLGATES), warehouse.static(None)
    results = warehouse.results("cars", "bindings")
    assert [(d["namespace"], d["name"], d["facets"]["version"]["datasetVersion"]) for d in complete["inputs"]] == [
        ("file", str(tollgates), str(table_version(tollgates))),
        ("file", str(city_graph), str(table_version(city_graph)))]
    window = complete["inputs"][0]["facets"]["csparqlWindow"]
    assert (window["stream"], window["window"], window["windowEnd"]) == (
        TOLLGATES, "[RANGE 30m STEP 5m]", format_instant(samples.end))
    assert window["triplesRead"] > 0
    assert [(d["namespace"], d["name"], d["facets"]["version"]["datasetVersion"]) for d in complete["outputs"]] == [
        ("file", str(results), str(table_version(results)))]


def test_a_failure_on_the_triggerer_sends_fail_with_its_message_and_nothing_when_lineage_is_disabled(server, city):
    root, warehouse, samples = city
    printed, events = run_trigger(server, root, warehouse, samples.end, "failing_on_triggerer", "no_such_connection")
    assert printed["event"] == "TaskFailedEvent"
    assert [e["eventType"] for e in events] == ["START", "FAIL"]
    assert "no Airflow connection 'no_such_connection'" in events[1]["run"]["facets"]["errorMessage"]["message"]
    assert events[1]["run"]["runId"] == printed["run_id"]

    printed, events = run_trigger(server, root, warehouse, samples.end, "disabled_lineage", "no_such_connection",
                                  AIRFLOW__OPENLINEAGE__DISABLED="True")
    assert printed["event"] == "TaskFailedEvent" and events == []


# Windows due together on one triggerer: one trigger per query, as the operator gives them, all run on one event
# loop as the triggerer runs them; their windows are complete, so they become complete together. Prints one
# CSPARQL_EVENT line per trigger, then CSPARQL_DONE.
_DUE_TOGETHER = """
import asyncio, json, logging, sys
from pathlib import Path

import pendulum
from airflow.sdk import DAG

from csparql.orchestration.operators import CsparqlEvaluateWindowOperator
from csparql.orchestration.triggers import WindowCompleteTrigger

registry, warehouse, at, conn_id = sys.argv[1:]
logging.basicConfig(level=logging.INFO)
triggers = []
for query in sorted(Path(registry).glob("*.rq")):
    with DAG(query.stem, schedule=None, start_date=pendulum.datetime(2010, 1, 1, tz="UTC")):
        operator = CsparqlEvaluateWindowOperator(task_id="evaluate_window", query=str(query), name=query.stem,
                                                 warehouse=warehouse, conn_id=conn_id)
    triggers.append(WindowCompleteTrigger(**{**operator.start_trigger_args.trigger_kwargs, "window_instant": at}))

async def first_event(trigger):
    async for event in trigger.run():
        return event

async def main():
    for event in await asyncio.gather(*(first_event(t) for t in triggers)):
        value = getattr(event, "xcoms", None) or {}
        print("CSPARQL_EVENT " + json.dumps({"event": type(event).__name__, "value": value.get("return_value")}),
              flush=True)

asyncio.run(main())
print("CSPARQL_DONE", flush=True)
"""

DUE_TOGETHER = {  # over the two tollgates streams
    "district_counts": examples_folder("queries") / "04-cars-per-district.rq",
    "gate_counts": examples_folder("queries") / "02-cars-per-tollgate.rq",
    "street_counts": examples_folder("queries") / "05-cars-per-street-worked-example.rq",
    "two_aggregates": examples_folder("queries") / "06-multiple-aggregates.rq",
}


def due_together(server, root: Path, warehouse: Warehouse, at: int, prefix: str,
                 windows_per_job: int = 1) -> subprocess.Popen:
    """The triggers of ``DUE_TOGETHER``'s queries (in ``root/registry``, their results named ``prefix`` and
    their key) for the window at ``at``, started in a new process on one event loop (``_DUE_TOGETHER``), with
    ``[csparql] triggerer_windows_per_job`` set to ``windows_per_job``."""
    registry = root / "registry"
    registry.mkdir(exist_ok=True)
    for name, source in DUE_TOGETHER.items():
        (registry / f"{prefix}{name}.rq").write_text(source.read_text(encoding="utf-8"), encoding="utf-8")
    env = spark_environment(root)
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    env.update({"AIRFLOW_HOME": str(root / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__OPENLINEAGE__DISABLED": "True", "AIRFLOW__CSPARQL__REGISTRY": str(registry),
                "AIRFLOW__CSPARQL__TRIGGERER_EVALUATIONS": "2",
                "AIRFLOW__CSPARQL__TRIGGERER_WINDOWS_PER_JOB": str(windows_per_job),
                f"AIRFLOW_CONN_{CONNECTION.upper()}": f"spark-connect://:{server.token}@localhost:{server.port}"})
    return subprocess.Popen([sys.executable, "-c", _DUE_TOGETHER, str(registry), str(warehouse.root),
                             format_instant(at), CONNECTION], env=env, cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL, start_new_session=True)


def assert_each_window_once_as_pyoxigraph_gives_it(warehouse: Warehouse, samples, at: int, prefix: str) -> None:
    from rdflib import Graph, URIRef

    from conformance import reference
    from conformance.compare import compare, from_engine
    from csparql.storage.stored import StoredResults
    from orchestration.test_airflow_end_to_end import stream_quads

    streams = {URIRef(stream): stream_quads(samples.streams[stream]) for stream in (TOLLGATES, MILAN)}
    graphs = {None: list(Graph().parse(samples.graphs[None]))}
    for name, source in DUE_TOGETHER.items():
        windows = [(end, result) for _, end, result in StoredResults(warehouse, prefix + name).windows()]
        assert [end for end, _ in windows] == [at], (name, windows)  # the window once, no other
        truth = reference.evaluate(reference.Case(name, source.read_text(encoding="utf-8"), streams, graphs, at))
        assert not compare(from_engine(windows[0][1]), truth), name


@pytest.mark.parametrize("windows_per_job", [1, 4])
def test_windows_due_together_are_evaluated_as_one_batch_each_as_pyoxigraph_evaluates_it_alone(server, city,
                                                                                               tmp_path,
                                                                                               windows_per_job):
    _, warehouse, samples = city
    server.wait_until_answering()
    at = samples.end - 5 * 60_000_000  # a window no other test of the module writes under these names
    prefix = f"together{windows_per_job}_"
    triggers = due_together(server, tmp_path, warehouse, at, prefix, windows_per_job)
    out, err = triggers.communicate(timeout=300)
    assert triggers.returncode == 0 and "CSPARQL_DONE" in out, out[-2000:] + err[-4000:]
    ended = [json.loads(line.split(" ", 1)[1]) for line in out.splitlines() if line.startswith("CSPARQL_EVENT ")]
    assert [e["event"] for e in ended] == ["TaskSuccessEvent"] * len(DUE_TOGETHER), ended
    batches = {json.dumps(e["value"]["batch"], sort_keys=True) for e in ended}
    assert len(batches) == 1 and json.loads(batches.pop())["windows"] == len(DUE_TOGETHER), ended
    assert f"{len(DUE_TOGETHER)} windows due together: evaluated as batch" in out + err, out[-4000:]
    jobs = re.findall(r"(\d+) windows evaluated in one Spark job", out + err)
    # with more than one window a job, their plans (none ordered) run as one job; else each its own
    assert jobs == ([str(len(DUE_TOGETHER))] if windows_per_job >= len(DUE_TOGETHER) else []), (
        jobs, out[-4000:] + err[-4000:])
    assert_each_window_once_as_pyoxigraph_gives_it(warehouse, samples, at, prefix)


def test_a_triggerer_killed_in_the_middle_of_a_batch_leaves_every_window_once_when_it_is_run_again(server, city,
                                                                                                    tmp_path):
    _, warehouse, samples = city
    server.wait_until_answering()
    at = samples.end - 10 * 60_000_000
    tables = [warehouse.results(f"killed_{name}", "bindings") for name in DUE_TOGETHER]
    triggers = due_together(server, tmp_path, warehouse, at, "killed_")
    deadline = time.monotonic() + 240
    while not any(delta.exists(t) for t in tables) and triggers.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    os.killpg(triggers.pid, signal.SIGKILL)  # the batch's first result commit made
    triggers.communicate()
    committed = [t for t in tables if delta.exists(t)]
    assert 0 < len(committed) < len(tables), committed  # killed in the middle of the batch
    again = due_together(server, tmp_path, warehouse, at, "killed_")
    out, err = again.communicate(timeout=300)
    assert again.returncode == 0 and "CSPARQL_DONE" in out, out[-2000:] + err[-4000:]
    assert_each_window_once_as_pyoxigraph_gives_it(warehouse, samples, at, "killed_")
    runs = [r for r in delta.open_table(warehouse.runs).to_pyarrow_table().to_pylist()
            if r["query"].startswith("killed_")]
    assert {r["query"] for r in runs} == {f"killed_{name}" for name in DUE_TOGETHER}
    assert {r["status"] for r in runs} == {"succeeded"}, runs

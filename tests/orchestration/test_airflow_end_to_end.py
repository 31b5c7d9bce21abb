"""End to end through a real Airflow: scheduler, DAG processor, triggerer and api-server started on loopback
(SQLite, LocalExecutor), driven through the REST API as a data engineer would drive it from the UI.

One stack serves the module (starting it takes about a minute). The windows evaluated by Airflow are
compared with ``csparql replay`` of the same range, run as a separate process over a copy of the warehouse.
As on the embedded stack, Spark is one Spark Connect server (``CSPARQL_SPARK=connect`` through the connection
``csparql_connect``): the registered queries' windows, their revisions and the ingests are its clients, and a
complete window is evaluated on the triggerer. The user's own DAG runs a local Spark inside its task, the path
of an Airflow without a Spark connection: its window resumes in one task process.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import time
import urllib.request
from collections import Counter
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
from rdflib import Graph, URIRef

from csparql import samples
from csparql.cli import main as cli_main
from csparql.deploy.plan import deployment_of, ingest_dag_id
from csparql.deploy.registration import register, register_text
from csparql.deploy.settings import Settings
from csparql.ingest.ingest import ingest_stream, load_static
from csparql.engine.runner import Engine
from csparql.storage.stored import StoredResults
from csparql.stack.airflow_stack import AirflowStack, free_port
from csparql.storage import delta
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import latest_run, read_watermarks
from csparql.core.windows import format_instant, parse_instant
from orchestration.spark_connect import test_server

pytestmark = pytest.mark.airflow

REPOSITORY = Path(__file__).resolve().parents[2]
EXAMPLES = REPOSITORY / "examples" / "queries"
MILAN = samples.STREAMS["milantollgates"]
MINUTE = 60_000_000
CONSUMER = """REGISTER QUERY EnteringCarsPerDistrict AS
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?district ?passages
FROM STREAM <urn:csparql:stream:CarsEnteringCityCenterPerDistrictStream> [RANGE 5m TUMBLING]
WHERE { ?district t:has-entering-cars ?passages . }
"""
LATE = "http://example.org/late/gates"
LATE_COUNTS = f"""REGISTER QUERY LateCounts AS
PREFIX ex: <http://example.org/late/>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <{LATE}> [RANGE 20m TUMBLING]
WHERE {{ ?gate ex:registers ?car }}
GROUP BY ?gate
"""
LATE_PRODUCER = f"""REGISTER STREAM LatePassages AS
PREFIX ex: <http://example.org/late/>
CONSTRUCT {{ ?car ex:passed ?gate }}
FROM STREAM <{LATE}> [RANGE 20m TUMBLING]
WHERE {{ ?gate ex:registers ?car }}
"""
LATE_CONSUMER = """REGISTER QUERY LateGateCounts AS
PREFIX ex: <http://example.org/late/>
SELECT ?gate (COUNT(?car) AS ?cars)
FROM STREAM <urn:csparql:stream:LatePassages> [RANGE 20m TUMBLING]
WHERE { ?car ex:passed ?gate }
GROUP BY ?gate
"""
LATE_QUERIES = {"late_counts": LATE_COUNTS, "late_producer": LATE_PRODUCER, "late_consumer": LATE_CONSUMER}
USER_QUERY = """REGISTER QUERY UserCarsPerDistrict COMPUTED EVERY 5m AS
PREFIX c: <http://linkedurbandata.org/city#>
PREFIX t: <http://linkedurbandata.org/traffic#>
SELECT ?district (COUNT(?car) AS ?passages)
FROM STREAM <http://streams.org/milantollgates.trdf> [RANGE 30m STEP 5m]
WHERE { ?tollgate t:registers ?car . ?tollgate c:placedIn ?street . ?district c:contains ?street . }
GROUP BY ?district
"""
USER_DAG = """# An Airflow DAG a user writes: one task that evaluates a C-SPARQL query's window, its query a file.
import os

import pendulum
from airflow.sdk import DAG

from csparql.deploy.settings import Settings
from csparql.orchestration.operators import CsparqlEvaluateWindowOperator

# Spark inside the task, whatever the deployment's CSPARQL_SPARK says; the deployment's evaluation pool
LOCAL_SPARK = Settings.from_environment({{**os.environ, "CSPARQL_SPARK": "local"}})

with DAG("user_cars_per_district", schedule=None, start_date=pendulum.datetime(2010, 1, 1, tz="UTC")):
    CsparqlEvaluateWindowOperator(task_id="evaluate", query={query!r}, name="user_cars", warehouse={warehouse!r},
                                  settings=LOCAL_SPARK, pool=LOCAL_SPARK.pool)
"""
BROKEN = "http://example.org/broken/stream"
BROKEN_QUERY = f"""REGISTER QUERY BrokenWindows AS
SELECT ?s ?p ?o
FROM STREAM <{BROKEN}> [RANGE 5m STEP 5m]
WHERE {{ ?s ?p ?o }}
"""
TRIGGERER_STREAM = """REGISTER STREAM TriggererPassages AS
PREFIX t: <http://linkedurbandata.org/traffic#>
CONSTRUCT { ?car t:passedBy ?tollgate }
FROM STREAM <http://streams.org/milantollgates.trdf> [RANGE 5m STEP 5m]
WHERE { ?tollgate t:registers ?car . }
"""
TRIGGERER_API_STREAM = TRIGGERER_STREAM.replace("TriggererPassages", "ApiPassages")
CONNECT_CONNECTION = "csparql_connect"
TRIGGERER_DAGS = """# Airflow DAGs whose Spark is a Spark Connect server: their windows are evaluated on the triggerer.
from datetime import timedelta

import pendulum
from airflow.sdk import DAG

from csparql.orchestration.operators import CsparqlEvaluateWindowOperator

for dag_id, query, name, api_conn_id in {dags!r}:
    with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2010, 1, 1, tz="UTC")):
        CsparqlEvaluateWindowOperator(task_id="evaluate_window", query=query, name=name, warehouse={warehouse!r},
                                      conn_id={connection!r}, api_conn_id=api_conn_id, retries=1,
                                      retry_delay=timedelta(seconds=1))
"""


@pytest.fixture(scope="module")
def world(tmp_path_factory, spark):
    root = tmp_path_factory.mktemp("e2e")
    files = samples.write_samples(root / "samples", hours=1)
    dags = root / "dags"
    (dags / "queries").mkdir(parents=True)
    shutil.copy(REPOSITORY / "dags" / "csparql_streams.py", dags)
    environment = {
        "CSPARQL_REGISTRY": str(dags / "queries"),
        "CSPARQL_WAREHOUSE": str(root / "warehouse"),
        "CSPARQL_ALLOWED_LATENESS": "0s",
        "CSPARQL_WAIT_TIMEOUT": "1d",  # the scheduled runs of today's (empty) windows just wait
        "CSPARQL_POLL_INTERVAL": "2s",
        "CSPARQL_SPARK": "connect",
        "CSPARQL_SPARK_CONN_ID": CONNECT_CONNECTION,
    }
    settings = Settings.from_environment(environment)
    connect = test_server(root / "connect")  # the Spark Connect server of every evaluation and ingest
    load_static(spark, settings.warehouse, None, [files.graphs[None]], replace=True)
    shutil.copy(EXAMPLES / "02-cars-per-tollgate.rq", root / "tollgates.rq")
    register(root / "tollgates.rq", settings, name="tollgates")
    register(EXAMPLES / "07-register-stream-construct.rq", settings, name="districts")
    (root / "consumer.rq").write_text(CONSUMER, encoding="utf-8")
    register(root / "consumer.rq", settings, name="district_consumer")
    for name, text in LATE_QUERIES.items():
        register_text(text, settings, name=name)
    (root / "user" / "cars_per_district.rq").parent.mkdir()
    (root / "user" / "cars_per_district.rq").write_text(USER_QUERY, encoding="utf-8")
    (dags / "user_cars_per_district.py").write_text(USER_DAG.format(
        query=str(root / "user" / "cars_per_district.rq"), warehouse=str(root / "warehouse")), encoding="utf-8")
    (root / "user" / "broken_windows.rq").write_text(BROKEN_QUERY, encoding="utf-8")
    (root / "user" / "triggerer_passages.rq").write_text(TRIGGERER_STREAM, encoding="utf-8")
    (root / "user" / "api_passages.rq").write_text(TRIGGERER_API_STREAM, encoding="utf-8")
    (dags / "on_triggerer.py").write_text(TRIGGERER_DAGS.format(dags=[
        ("on_triggerer", str(root / "user" / "cars_per_district.rq"), "triggerer_cars", None),
        ("failing_on_triggerer", str(root / "user" / "broken_windows.rq"), "broken_windows", None),
        # a connection to the REST API that does not exist: the Asset event falls back to a worker
        ("stream_on_triggerer", str(root / "user" / "triggerer_passages.rq"), "triggerer_passages",
         "no_such_connection"),
        # the stack's own (csparql_airflow_api, the default the stack sets)
        ("stream_through_api", str(root / "user" / "api_passages.rq"), "api_passages", None),
    ], warehouse=str(root / "warehouse"), connection=CONNECT_CONNECTION), encoding="utf-8")
    stack = AirflowStack(home=root / "airflow", dags=dags, settings_environment=environment, port=free_port(),
                         pool_slots=2,
                         extra_environment={
                             # the scheduler looks for expired waits every 2 s (not 15): the timeout test is quicker
                             "AIRFLOW__SCHEDULER__TRIGGER_TIMEOUT_CHECK_INTERVAL": "2",
                             # the OpenLineage provider writes every event it sends, one JSON line each
                             "AIRFLOW__OPENLINEAGE__TRANSPORT": json.dumps(
                                 {"type": "file", "log_file_path": str(root / "lineage.jsonl"), "append": True}),
                             "AIRFLOW__OPENLINEAGE__NAMESPACE": "csparql-e2e",
                             # events are sent from a thread of the task process, not from forks of it
                             "AIRFLOW__OPENLINEAGE__EXECUTE_IN_THREAD": "True",
                             f"AIRFLOW_CONN_{CONNECT_CONNECTION.upper()}":
                                 f"spark-connect://:{connect.token}@localhost:{connect.port}",
                         })
    connect.start()  # its JVM starts while Airflow's database is set up
    try:
        stack.set_up()
        stack.start()
        stack.supervise_in_background()  # as csparql stack does: the scheduler may exit on a database error
        stack.wait_until_healthy()
        connect.wait_until_answering()
        ingest_dag = ingest_dag_id(MILAN)
        stack.wait_for_dags(["tollgates", "districts", "district_consumer", ingest_dag, ingest_dag_id(LATE),
                             *LATE_QUERIES, *(f"revise_{name}" for name in LATE_QUERIES), "user_cars_per_district",
                             "on_triggerer", "failing_on_triggerer", "stream_on_triggerer",
                             "stream_through_api"])
        yield {"root": root, "files": files, "settings": settings, "stack": stack, "ingest_dag": ingest_dag,
               "spark": spark, "connect": connect}
    finally:
        stack.stop()
        connect.stop()


def rows_by_window(warehouse: Warehouse, name: str) -> dict[int, Counter]:
    return {end: Counter(tuple(zip(map(str, result.vars), map(str, row), strict=True)) for row in result.rows)
            for _, end, result in StoredResults(warehouse, name).windows()}


def test_a_dropped_file_is_ingested_by_the_stream_dag_and_advances_the_watermark(world):
    stack, settings, files = world["stack"], world["settings"], world["files"]
    landing = settings.landing_folder(MILAN)
    landing.mkdir(parents=True, exist_ok=True)
    shutil.copy(files.streams[MILAN], landing / "milan.nq")
    (landing / "broken.tsv").write_text("not\tN-Triples\n", encoding="utf-8")
    stack.unpause(world["ingest_dag"])
    stack.api("POST", f"dags/{world['ingest_dag']}/dagRuns", {"logical_date": None})
    deadline = time.monotonic() + 300
    while (landing / "milan.nq").exists() and time.monotonic() < deadline:
        time.sleep(3)
    stack.wait_for_runs(world["ingest_dag"], 1)
    assert (landing / "done" / "milan.nq").exists()
    assert (landing / "rejected" / "broken.tsv").exists() and (landing / "rejected" / "broken.tsv.reason").read_text()
    marks = read_watermarks(settings.warehouse)
    assert files.start < marks[MILAN] <= files.end


def test_a_user_dag_with_the_evaluate_operator_gives_pyoxigraph_s_window_and_lineage_names_the_tables(world):
    from conformance import reference
    from conformance.compare import compare, from_engine

    from csparql.storage.revisions import table_version

    stack, settings, files = world["stack"], world["settings"], world["files"]
    assert read_watermarks(settings.warehouse).get(MILAN), "the ingest test lands the stream first"
    at = files.start + 30 * MINUTE
    stack.unpause("user_cars_per_district")
    _start_run(stack, "user_cars_per_district", at)
    run, = stack.wait_for_runs("user_cars_per_district", 1)
    # the DAG's settings chose a Spark inside the task, not the deployment's Connect server
    assert "Spark: a session of its own in this process" in stack.task_log_tail("user_cars_per_district", run, 400)

    [(start, end, stored)] = list(StoredResults(settings.warehouse, "user_cars").windows())
    assert (start, end) == (at - 30 * MINUTE, at)
    truth = reference.evaluate(reference.Case("user", USER_QUERY, {URIRef(MILAN): stream_quads(files.streams[MILAN])},
                                              {None: list(Graph().parse(files.graphs[None]))}, at))
    found = from_engine(stored)
    assert found.rows and not compare(found, truth)

    # what the OpenLineage provider sent, through its file transport
    events = [json.loads(line) for line in (world["root"] / "lineage.jsonl").read_text(encoding="utf-8").splitlines()]
    [evaluation] = [e for e in events if e["eventType"] == "COMPLETE"
                    and e["job"]["name"] == "user_cars_per_district.evaluate"]
    milan_table, city_graph = settings.warehouse.stream(MILAN), settings.warehouse.static(None)
    results = settings.warehouse.results("user_cars", "bindings")
    assert [(d["namespace"], d["name"], d["facets"]["version"]["datasetVersion"]) for d in evaluation["inputs"]] == [
        ("file", str(milan_table), str(table_version(milan_table))),
        ("file", str(city_graph), str(table_version(city_graph)))]
    window = evaluation["inputs"][0]["facets"]["csparqlWindow"]
    assert (window["stream"], window["window"], window["windowStart"], window["windowEnd"]) == (
        MILAN, "[RANGE 30m STEP 5m]", format_instant(at - 30 * MINUTE), format_instant(at))
    assert [(d["namespace"], d["name"], d["facets"]["version"]["datasetVersion"]) for d in evaluation["outputs"]] == [
        ("file", str(results), str(table_version(results)))]
    landings = [e for e in events if e["eventType"] == "COMPLETE"
                and e["job"]["name"] == f"{world['ingest_dag']}.ingest_landed_files" and e["inputs"]]
    [landing] = landings  # the one run that landed files; the others found nothing waiting and name nothing
    folder = settings.landing_folder(MILAN)
    assert [(d["namespace"], d["name"]) for d in landing["inputs"]] == [("file", str(folder / "done" / "milan.nq"))]
    assert [(d["namespace"], d["name"], d["facets"]["version"]["datasetVersion"]) for d in landing["outputs"]] == [
        ("file", str(milan_table), str(table_version(milan_table)))]

    # Airflow's asset graph: the REGISTER STREAM query produces its stream, which its consumer reads
    [asset] = stack.api("GET", "assets?uri_pattern=CarsEnteringCityCenterPerDistrictStream")["assets"]
    assert asset["uri"] == "csparql://streams/CarsEnteringCityCenterPerDistrictStream"
    assert [(t["dag_id"], t["task_id"]) for t in asset["producing_tasks"]] == [("districts", "evaluate_window")]
    assert [(t["dag_id"], t["task_id"]) for t in asset["consuming_tasks"]] == [("district_consumer", "evaluate_window")]


def stream_quads(path: Path) -> list[tuple]:
    """The (s, p, o, τ µs) of a sample stream file (IRIs only, one timestamped quad a line)."""
    quads = []
    for line in path.read_text(encoding="utf-8").splitlines():
        s, p, o, rest = line.split(" ", 3)
        quads.append((URIRef(s[1:-1]), URIRef(p[1:-1]), URIRef(o[1:-1]), parse_instant(rest.split('"')[1])))
    return quads


def test_a_backfill_gives_the_same_windows_as_replay_and_running_it_again_keeps_one_copy(world):
    stack, settings, files = world["stack"], world["settings"], world["files"]
    assert read_watermarks(settings.warehouse).get(MILAN), "the ingest test lands the stream first"
    start, end = format_instant(files.start + 30 * MINUTE), format_instant(files.start + 32 * MINUTE)
    stack.unpause("tollgates")
    stack.backfill("tollgates", start, end)
    stack.wait_for_runs("tollgates", 3, run_type="backfill")
    stack.wait_for_backfills("tollgates")
    without_run = stack.api("POST", "backfills/dry_run", {
        "dag_id": "tollgates", "from_date": start, "to_date": end, "reprocess_behavior": "none",
        "max_active_runs": 2, "run_backwards": False, "dag_run_conf": {}}, idempotent=True)
    assert without_run["backfills"] == []  # every window of the range has its run
    airflow_rows = rows_by_window(settings.warehouse, "tollgates")
    assert sorted(airflow_rows) == [files.start + m * MINUTE for m in (30, 31, 32)]
    assert all(sum(rows.values()) > 0 for rows in airflow_rows.values())

    replayed = world["root"] / "replayed"
    shutil.copytree(settings.warehouse.root, replayed)
    shutil.rmtree(replayed / "results")
    # the command line's replay, in this process: on the module's SparkSession instead of a JVM of its own
    replay = ["replay", str(world["root"] / "tollgates.rq"), "--from", start, "--to", end, "--name", "tollgates",
              "--warehouse", str(replayed)]
    assert cli_main(replay) == 0
    assert rows_by_window(Warehouse(replayed), "tollgates") == airflow_rows

    # A triple arrives late, for the window ending at 32 (already evaluated): it is stored, the window's
    # results stay as they were until the window is run again, and running it again replaces them.
    late_ntriples = world["root"] / "late.nq"
    late_at = files.start + 31 * MINUTE + 30_000_000
    late_ntriples.write_text(
        f'<{samples.C}T-100> <{samples.T}registers> <{samples.C}LATE001> "{format_instant(late_at)}"'
        f'^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n', encoding="utf-8")
    ingest_stream(world["spark"], settings.warehouse, MILAN, [late_ntriples])
    assert rows_by_window(settings.warehouse, "tollgates") == airflow_rows

    stack.backfill("tollgates", start, end, reprocess="completed")
    runs_table = settings.warehouse.runs
    deadline = time.monotonic() + 600
    while _succeeded_runs(runs_table, "tollgates") < 6 and time.monotonic() < deadline:
        time.sleep(3)
    assert _succeeded_runs(runs_table, "tollgates") == 6  # every window evaluated twice …
    rerun = rows_by_window(settings.warehouse, "tollgates")
    assert {end: rows for end, rows in rerun.items() if end != files.start + 32 * MINUTE} == {
        end: rows for end, rows in airflow_rows.items() if end != files.start + 32 * MINUTE}  # … stored once
    before, after = (_passages(rows[files.start + 32 * MINUTE]) for rows in (airflow_rows, rerun))
    assert after == {**before, f"{samples.C}T-100": before.get(f"{samples.C}T-100", 0) + 1}  # one more car


def _passages(rows: Counter) -> dict[str, int]:
    return {dict(row)["tollgate"]: int(dict(row)["passages"]) for row in rows}


def _succeeded_runs(path, query: str) -> int:
    from csparql.storage.statistics import read_table

    rows = read_table(path).to_pylist()
    return sum(1 for r in rows if r["query"] == query and r["status"] == "succeeded")


def test_a_chained_query_waits_without_a_task_process_and_evaluates_once_the_producer_wrote_its_window(world):
    stack, settings, files = world["stack"], world["settings"], world["files"]
    window_end = files.start + 55 * MINUTE  # the stream's watermark, its greatest timestamp, is past it
    instant = format_instant(window_end)
    for dag in ("districts", "district_consumer"):
        stack.unpause(dag)
    stack.backfill("district_consumer", instant, instant)  # the consumer first: it must wait
    waiting_run, waiting = _wait_for_task(stack, "district_consumer", "deferred", run_type="backfill")
    # A run is one task, which starts deferred on the triggerer: it never went to an executor, never ran in a
    # worker, and no process runs it.
    tasks = stack.api("GET", f"dags/district_consumer/dagRuns/{waiting_run['dag_run_id']}/taskInstances")
    assert [t["task_id"] for t in tasks["task_instances"]] == ["evaluate_window"]
    assert (waiting["queued_when"], waiting["pid"], waiting["hostname"] or None) == (None, None, None), waiting
    assert _task_processes(waiting["id"]) == {}
    assert not delta.exists(settings.warehouse.results("district_consumer", "bindings"))
    # the UI's windows view shows the run waiting, linked to it
    shown = _window_shown(stack, "district_consumer", instant)
    assert (shown["state"], shown["detail"], shown["dag_run_id"]) == (
        "running", "waiting for its inputs to land", waiting_run["dag_run_id"])

    stack.backfill("districts", instant, instant)
    processes = _watch_task_processes(stack, "district_consumer", waiting_run["dag_run_id"], waiting["id"])
    producer_run, = stack.wait_for_runs("districts", 1, run_type="backfill")
    consumer_run, = stack.wait_for_runs("district_consumer", 1, run_type="backfill")
    # over Spark Connect the triggerer evaluated the window and ended the task: the whole run took no process
    assert processes == set(), processes
    produced = _task(stack, "districts", producer_run, "evaluate_window")
    consumed = _task(stack, "district_consumer", consumer_run, "evaluate_window")
    assert (consumed["state"], consumed["try_number"], consumed["pid"]) == ("success", 1, None), consumed
    windows = rows_by_window(settings.warehouse, "district_consumer")
    assert list(windows) == [window_end] and sum(windows[window_end].values()) > 0
    run = latest_run(settings.warehouse, "district_consumer", window_end)
    assert run["complete"] is True
    # evaluated after the producer's evaluation finished writing (Airflow stamps the producer task's end_date only
    # after that, so the consumer, woken by the write, may start before it)
    producer = latest_run(settings.warehouse, "districts", window_end)
    assert run["started_at"] >= producer["started_at"] + timedelta(milliseconds=producer["duration_ms"])
    assert produced["state"] == "success"
    shown = _window_shown(stack, "district_consumer", instant)
    assert (shown["state"], shown["rows_written"]) == ("complete", sum(windows[window_end].values()))


def test_after_the_wait_timeout_a_window_is_evaluated_anyway_and_recorded_incomplete(world):
    stack, settings, files = world["stack"], world["settings"], world["files"]
    marks = read_watermarks(settings.warehouse)
    assert marks.get(MILAN), "the ingest test lands the stream first"
    window_end = files.start + 2 * 60 * MINUTE  # an hour past the sample stream: its watermark is far behind
    instant = format_instant(window_end)
    stack.unpause("tollgates")
    stack.backfill("tollgates", instant, instant)
    run, waiting = _wait_for_task(stack, "tollgates", "deferred", run_type="backfill",
                                  data_interval_end=window_end)
    # The stack waits a day (CSPARQL_WAIT_TIMEOUT=1d, so that the scheduled runs of today's empty windows
    # just wait); the test brings this task's deadline — the trigger timeout Airflow set from that setting
    # when it deferred the task — to the past. Airflow's scheduler then ends the wait, as it would a day later.
    _expire_trigger_timeout(stack, waiting["id"])
    finished = _wait_for_run(stack, "tollgates", run["dag_run_id"])
    assert finished["state"] == "success", stack.task_log_tail("tollgates", finished)
    recorded = latest_run(settings.warehouse, "tollgates", window_end)
    assert (recorded["status"], recorded["complete"]) == ("succeeded", False)
    outcome = stack.api("GET", f"dags/tollgates/dagRuns/{run['dag_run_id']}/taskInstances/evaluate_window/"
                               "xcomEntries/return_value")["value"]  # what the task returned
    outcome = json.loads(outcome) if isinstance(outcome, str) else outcome
    missing = f"<{MILAN}> until {format_instant(window_end)} (watermark {format_instant(marks[MILAN])})"
    assert (outcome["complete"], outcome["missing"]) == (False, [missing])
    assert f"still missing: {missing}" in stack.task_log_tail("tollgates", finished, lines=200)
    shown = _window_shown(stack, "tollgates", instant)
    assert shown["state"] == "late"


def _wait_for_task(stack: AirflowStack, dag: str, state: str, run_type: str, data_interval_end: int | None = None,
                   timeout: float = 180) -> tuple[dict, dict]:
    """The first run of ``run_type`` (ending its data interval at ``data_interval_end`` when given) whose
    ``evaluate_window`` task reaches ``state``, and that task."""
    deadline = time.monotonic() + timeout
    seen = None
    while time.monotonic() < deadline:
        for run in stack.dag_runs(dag):
            if run["run_type"] != run_type or (
                    data_interval_end is not None and parse_instant(run["data_interval_end"]) != data_interval_end):
                continue
            seen = _task(stack, dag, run, "evaluate_window", allow=(404,))
            if seen.get("state") == state:
                return run, seen
        time.sleep(1)
    raise AssertionError(f"{dag}: no {run_type} run's evaluate_window became {state} within {timeout:.0f} s: {seen}")


def _wait_for_run(stack: AirflowStack, dag: str, run_id: str, timeout: float = 300) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = stack.api("GET", f"dags/{dag}/dagRuns/{run_id}")
        if run["state"] in ("success", "failed"):
            return run
        time.sleep(2)
    raise AssertionError(f"{dag}: run {run_id} did not finish within {timeout:.0f} s")


def _task_processes(task_instance_id: str) -> dict[int, int]:
    """The task processes running the task instance now, each with its parent's pid. Airflow titles the process
    running a task ``airflow worker -- <task instance id>`` (and the LocalExecutor worker supervising it
    ``airflow worker -- LocalExecutor: <task instance id>``); a fork of the task process (a subprocess it starts,
    before its exec) carries the same title for a moment."""
    found = {}
    for process in psutil.process_iter(["pid", "ppid", "cmdline"]):
        title = " ".join(process.info["cmdline"] or [])
        if task_instance_id in title and "LocalExecutor" not in title:
            found[process.info["pid"]] = process.info["ppid"]
    return found


def _watch_task_processes(stack: AirflowStack, dag: str, run_id: str, task_instance_id: str,
                          timeout: float = 600) -> set[int]:
    """Every task process an executor started for the task instance until its run finished (looked for five
    times a second: a task process lives for seconds at least, to start Spark). Forks of a task process are part
    of it, not processes of their own."""
    seen: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    checked = 0.0
    while time.monotonic() < deadline:
        seen |= _task_processes(task_instance_id)
        if time.monotonic() - checked > 2:
            checked = time.monotonic()
            if stack.api("GET", f"dags/{dag}/dagRuns/{run_id}")["state"] in ("success", "failed"):
                return {pid for pid, parent in seen.items() if parent not in seen}
        time.sleep(0.2)
    raise AssertionError(f"{dag}: run {run_id} did not finish within {timeout:.0f} s")


def _expire_trigger_timeout(stack: AirflowStack, task_instance_id: str) -> None:
    """Move a deferred task's trigger timeout a century back (keeping the format Airflow stored it in)."""
    database = sqlite3.connect(stack.home / "airflow.db", timeout=60)
    try:
        with database:
            # SQLAlchemy keeps a UUID on SQLite as 32 hex digits
            (stored,), = database.execute("SELECT trigger_timeout FROM task_instance WHERE id = ?",
                                          (task_instance_id.replace("-", ""),)).fetchall()
            assert stored, "the deferred task has no trigger timeout"
            database.execute("UPDATE task_instance SET trigger_timeout = ? WHERE id = ?",
                             (str(int(stored[:4]) - 100) + stored[4:], task_instance_id.replace("-", "")))
    finally:
        database.close()


def _window_shown(stack: AirflowStack, query: str, window_end: str) -> dict:
    """The window as the query's page in the UI shows it (its JSON: ``GET /csparql/api/queries/<query>``)."""
    request = urllib.request.Request(f"{stack.url}/csparql/api/queries/{query}",
                                     headers={"Authorization": f"Bearer {stack.token()}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        windows = json.loads(response.read())["windows"]
    shown = [w for w in windows if w["window_end"] == window_end]
    assert len(shown) == 1, windows
    return shown[0]


def _task(stack: AirflowStack, dag: str, run: dict, task: str, allow: tuple[int, ...] = ()) -> dict:
    return stack.api("GET", f"dags/{dag}/dagRuns/{run['dag_run_id']}/taskInstances/{task}", allow=allow)


def test_late_triples_revise_their_windows_inside_the_horizon_by_themselves_and_downstream_too(world):
    """Three windows evaluated; late triples land in each through the stream's landing folder. Without any
    other step, the two inside the revision horizon are re-evaluated by the query's revision DAG (revision 1,
    equal to the independent evaluator's results over all the data), the one beyond it is recorded stale and
    left as it was, and the REGISTER STREAM query over the same stream is revised, then its consumer."""
    from rdflib import URIRef

    from conformance import reference
    from conformance.compare import compare, from_engine
    from csparql.storage import stale_windows as sw
    from csparql.storage.instants import micros_of
    from csparql.storage.statistics import read_table

    stack, settings = world["stack"], world["settings"]
    now = time.time_ns() // 1000
    step = 20 * MINUTE
    c = now // step * step - step  # the latest of the three windows
    a, b = c - 2 * step, c - step
    # the query's horizon: the middle window is inside it for 14 minutes from now, the oldest one is beyond it
    horizon_minutes = (now - c) // MINUTE + 34
    register_text(f"# csparql revision-horizon {horizon_minutes}m\n" + LATE_COUNTS, settings, name="late_counts",
                  replace=True)
    ex = "http://example.org/late/"
    on_time = [("g1", "c1", a - 5 * MINUTE), ("g2", "c2", a - 4 * MINUTE), ("g1", "c3", b - 5 * MINUTE),
               ("g1", "c4", c - 5 * MINUTE), ("g2", "c5", c - 6 * MINUTE), ("g3", "c6", c + MINUTE)]
    late = [("g1", "late1", a - 3 * MINUTE), ("g2", "late2", b - 7 * MINUTE), ("g1", "late3", c - 2 * MINUTE)]
    # the stream and its first windows, evaluated as their DAGs' runs would (here, to keep the test short)
    (world["root"] / "on-time.nq").write_text(_nquads(on_time, ex), encoding="utf-8")
    ingest_stream(world["spark"], settings.warehouse, LATE, [world["root"] / "on-time.nq"])
    engine = Engine(settings.warehouse, world["spark"])
    for name, ends in (("late_counts", (a, b, c)), ("late_producer", (b,)), ("late_consumer", (b,))):
        deployment = deployment_of(settings.registry / f"{name}.rq", settings)
        for end in ends:
            engine.evaluate(deployment.plan, end, name, complete=True, version=deployment.version)
    before = {name: rows_by_window(settings.warehouse, name) for name in ("late_counts", "late_consumer")}
    assert sorted(before["late_counts"]) == [a, b, c] and sorted(before["late_consumer"]) == [b]

    # the late triples land through the stream's landing folder: nothing else is done by hand
    ingest = ingest_dag_id(LATE)
    stack.unpause(ingest)
    _land(stack, ingest, settings.landing_folder(LATE), "late.nq", late, ex)

    def revisions() -> dict[tuple[str, int], int]:
        runs = read_table(settings.warehouse.runs).to_pylist()
        return {(r["query"], micros_of(r["window_end"])): r["revision"] or 0
                for r in sorted(runs, key=lambda r: r["started_at"]) if r["status"] == "succeeded"}

    wanted = {("late_counts", b): 1, ("late_counts", c): 1, ("late_producer", b): 1, ("late_consumer", b): 1}
    deadline = time.monotonic() + 900  # about 3 minutes on an idle machine
    while time.monotonic() < deadline and any(revisions().get(k) != v for k, v in wanted.items()):
        time.sleep(3)
    assert {k: revisions().get(k) for k in wanted} == wanted
    assert revisions()[("late_counts", a)] == 0

    def oracle(text: str, stream: str, triples: list, at: int):
        return reference.evaluate(reference.Case("oracle", text, {URIRef(stream): triples}, {}, at))

    everything = [(URIRef(ex + g), URIRef(ex + "registers"), URIRef(ex + car), ts) for g, car, ts in on_time + late]
    stored = {end: from_engine(result) for _, end, result in StoredResults(settings.warehouse, "late_counts").windows()}
    for end in (b, c):
        assert not compare(stored[end], oracle(LATE_COUNTS, LATE, everything, end)), end
    assert rows_by_window(settings.warehouse, "late_counts")[a] == before["late_counts"][a]  # beyond: unchanged
    assert rows_by_window(settings.warehouse, "late_counts")[b] != before["late_counts"][b]
    passages = [(s, p, o, b) for s, p, o in oracle(LATE_PRODUCER, LATE, everything, b).triples]
    consumer = StoredResults(settings.warehouse, "late_consumer")
    (_, end, result), = consumer.windows()
    assert not compare(from_engine(result), oracle(LATE_CONSUMER, "urn:csparql:stream:LatePassages", passages, b))
    assert rows_by_window(settings.warehouse, "late_consumer")[b] != before["late_consumer"][b]
    assert {r["revision"] for r in read_table(settings.warehouse.results("late_counts", "bindings")).to_pylist()
            if micros_of(r["window_end"]) in (b, c)} == {1}
    # the earlier revision stays readable (Delta time travel)
    assert {e: Counter(tuple(zip(map(str, r.vars), map(str, row), strict=True)) for row in r.rows)
            for _, e, r in StoredResults(settings.warehouse, "late_counts").windows(revision=0)} == before["late_counts"]

    stale = {(w.query, w.window_end): w for w in sw.stale_windows(settings.warehouse)}
    assert (stale[("late_counts", a)].status, stale[("late_counts", a)].within_horizon) == (sw.BEYOND_HORIZON, False)
    assert {key: stale[key].status for key in wanted} == dict.fromkeys(wanted, sw.REVISED)
    assert stale[("late_consumer", b)].stream == "urn:csparql:stream:LatePassages"
    assert stale[("late_counts", b)].late_triples == 1 and stale[("late_counts", b)].lateness_max_ms > 7 * 60_000
    # the query page marks them: revised (revision 1, why and when) and stale beyond the horizon
    shown = {end: _window_shown(stack, "late_counts", format_instant(end)) for end in (a, b, c)}
    assert (shown[a]["revision"], shown[a]["stale"]["status"]) == (0, sw.BEYOND_HORIZON)
    assert {(shown[e]["revision"], shown[e]["stale"]["status"]) for e in (b, c)} == {(1, sw.REVISED)}
    assert shown[b]["stale"]["reasons"] == [f"late triples on <{LATE}>"] and shown[b]["stale"]["late_triples"] == 1
    request = urllib.request.Request(f"{stack.url}/csparql/streams", headers={"Authorization": f"Bearer {stack.token()}"})
    with urllib.request.urlopen(request, timeout=60) as response:
        page = response.read().decode()
    assert "Late triples</dt><dd class=\"late\">3 (how late: p50" in page  # the Streams page
    # the revisions were Airflow runs, started by the revision asset's events: in the grid, with their logs (a
    # run's state follows its task's end, which recorded the revision, by a scheduler loop)
    for name in ("late_counts", "late_producer", "late_consumer"):
        runs = stack.wait_for_runs(f"revise_{name}", 1, timeout=120)
        assert {r["run_type"] for r in runs} == {"asset_triggered"}, runs
    assert "revised: revision 1" in stack.task_log_tail("revise_late_counts", runs_of(stack, "revise_late_counts")[-1],
                                                        lines=200)


def runs_of(stack: AirflowStack, dag: str) -> list[dict]:
    return [r for r in stack.dag_runs(dag) if r["state"] == "success"]


def _nquads(triples: list, ex: str) -> str:
    """(gate, car, µs) triples as timestamped N-Quads."""
    return "".join(f'<{ex}{g}> <{ex}registers> <{ex}{car}> "{format_instant(ts)}"'
                   '^^<http://www.w3.org/2001/XMLSchema#dateTime> .\n' for g, car, ts in triples)


def _land(stack: AirflowStack, dag: str, landing: Path, name: str, triples: list, ex: str,
          timeout: float = 300) -> None:
    """Drop (gate, car, µs) triples as a timestamped N-Quads file in the landing folder, start the ingestion
    DAG and wait (up to ``timeout`` seconds) until the file landed."""
    landing.mkdir(parents=True, exist_ok=True)
    (landing / f".{name}").write_text(_nquads(triples, ex), encoding="utf-8")
    (landing / f".{name}").rename(landing / name)
    stack.api("POST", f"dags/{dag}/dagRuns", {"logical_date": None})
    deadline = time.monotonic() + timeout
    while not (landing / "done" / name).exists() and time.monotonic() < deadline:
        time.sleep(2)
    assert (landing / "done" / name).exists(), f"{name} did not land"


def test_a_file_lands_while_evaluations_wait_for_every_slot_of_the_spark_pool(world):
    # Before ingests had a pool of their own, a file dropped while the examples' backfills ran waited 8 minutes,
    # its ingest queued behind every backfilled evaluation in the one pool they shared. Here the evaluations'
    # pool has no free slot at all (as when a backlog holds them all) while two runs of the user's DAG wait for
    # it: the file lands all the same. (Its evaluations resume in a worker, which takes a slot of the pool; an
    # evaluation the triggerer ends over Spark Connect takes none.)
    stack, settings, files = world["stack"], world["settings"], world["files"]
    pool = stack.api("GET", f"pools/{settings.pool}")

    def resize(slots: int) -> None:
        stack.api("PATCH", f"pools/{settings.pool}?update_mask=slots",
                  {"pool": settings.pool, "slots": slots, "include_deferred": pool["include_deferred"]})

    resize(0)
    try:
        stack.unpause("user_cars_per_district")
        stack.unpause(world["ingest_dag"])
        runs = [_start_run(stack, "user_cars_per_district", files.start + m * MINUTE) for m in (40, 45)]
        ex = "http://example.org/fresh/"
        _land(stack, world["ingest_dag"], settings.landing_folder(MILAN), "fresh.nq",
              [("gate", "car", files.end + MINUTE)], ex, timeout=600)  # a retry of the ingest included
        # their windows are complete: each task left its wait on the triggerer and is scheduled, waiting for a slot
        deadline = time.monotonic() + 120
        while (states := [_task(stack, "user_cars_per_district", run, "evaluate")["state"]
                          for run in runs]) != ["scheduled", "scheduled"] and time.monotonic() < deadline:
            assert not set(states) - {"scheduled", "deferred", None}, f"the runs no longer wait for the pool: {states}"
            time.sleep(1)
        assert states == ["scheduled", "scheduled"], states
    finally:
        resize(pool["slots"])
    assert [_wait_for_run(stack, "user_cars_per_district", run["dag_run_id"])["state"] for run in runs] == [
        "success", "success"]


def test_no_airflow_component_exited_while_the_module_ran(world):
    # the supervisor restarts a component that exits (supervise_in_background), as a safety net: on SQLite the
    # scheduler exited with StaleDataError when a backfill's clean-up deleted runs it had started
    assert not world["stack"].restarts, world["stack"].restarts


@pytest.fixture(scope="module")
def connect_server(world):
    """The module's Spark Connect server (the connection ``csparql_connect``), answering."""
    server = world["connect"]
    server.wait_until_answering()
    return server


def _start_run(stack: AirflowStack, dag: str, at: int) -> dict:
    """A manual run of ``dag`` for the window ending ``at`` (its logical date and data interval), as created."""
    return stack.api("POST", f"dags/{dag}/dagRuns", {
        "logical_date": format_instant(at), "data_interval_start": format_instant(at),
        "data_interval_end": format_instant(at)})


def _trigger(stack: AirflowStack, dag: str, at: int) -> tuple[dict, dict]:
    """A manual run of ``dag`` evaluating the window ending ``at``, and its task instance once it exists."""
    stack.unpause(dag)
    run = _start_run(stack, dag, at)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        task = _task(stack, dag, run, "evaluate_window", allow=(404,))
        if task.get("id"):
            return run, task
        time.sleep(0.5)
    raise AssertionError(f"{dag}: the run {run['dag_run_id']} has no task instance after 180 s")


def _log(stack: AirflowStack, dag: str, run: dict, try_number: int) -> str:
    """The task's log of one try as the UI reads it (the REST API), one event a line."""
    answer = stack.api("GET", f"dags/{dag}/dagRuns/{run['dag_run_id']}/taskInstances/evaluate_window/logs/"
                              f"{try_number}?full_content=true")
    content = answer.get("content") or []
    return "\n".join(str(line.get("event", line)) if isinstance(line, dict) else str(line) for line in content)


def _truth_of_user_query(files, at: int):
    from conformance import reference

    return reference.evaluate(reference.Case(
        "user", USER_QUERY, {URIRef(MILAN): stream_quads(files.streams[MILAN])},
        {None: list(Graph().parse(files.graphs[None]))}, at))


def _callbacks_waiting(stack: AirflowStack) -> int:
    """Callback requests in Airflow's database that the DAG processor has not fetched yet."""
    database = sqlite3.connect(stack.home / "airflow.db", timeout=60)
    try:
        (count,), = database.execute("SELECT count(*) FROM callback WHERE type = 'dag_processor'").fetchall()
        return count
    finally:
        database.close()


def _dag_processor_events(stack: AirflowStack, run_id: str) -> list[str]:
    """What the DAG processor's parsing processes have logged about run ``run_id``."""
    events = []
    for path in sorted((stack.home / "logs" / "dag_processor").rglob("*.log")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            if run_id in line:
                events.append(json.loads(line).get("event", line) if line.startswith("{") else line)
    return events


def _callbacks_fetched(stack: AirflowStack, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while _callbacks_waiting(stack):
        assert time.monotonic() < deadline, "the DAG processor did not fetch its callback requests"
        time.sleep(0.5)


def test_a_window_evaluated_on_the_triggerer_ends_its_task_with_no_task_process(world, connect_server):
    """With Spark Connect the trigger evaluates the complete window itself and ends the task: no executor ever
    starts a task process for it; the results are pyoxigraph's; the task's value and log are Airflow's."""
    from conformance.compare import compare, from_engine

    stack, settings, files = world["stack"], world["settings"], world["files"]
    assert read_watermarks(settings.warehouse).get(MILAN), "the ingest test lands the stream first"
    at = files.start + 30 * MINUTE
    run, task = _trigger(stack, "on_triggerer", at)

    processes = _watch_task_processes(stack, "on_triggerer", run["dag_run_id"], task["id"])

    finished = _wait_for_run(stack, "on_triggerer", run["dag_run_id"])
    assert finished["state"] == "success", stack.task_log_tail("on_triggerer", finished, lines=200)
    assert processes == set()  # the whole run took no task process
    task = _task(stack, "on_triggerer", run, "evaluate_window")
    assert (task["state"], task["try_number"], task["pid"]) == ("success", 1, None)
    [(start, end, stored)] = list(StoredResults(settings.warehouse, "triggerer_cars").windows())
    assert (start, end) == (at - 30 * MINUTE, at)
    found = from_engine(stored)
    assert found.rows and not compare(found, _truth_of_user_query(files, at))
    outcome = stack.api("GET", f"dags/on_triggerer/dagRuns/{run['dag_run_id']}/taskInstances/evaluate_window/"
                               "xcomEntries/return_value")["value"]
    outcome = json.loads(outcome) if isinstance(outcome, str) else outcome
    recorded = latest_run(settings.warehouse, "triggerer_cars", at)
    assert (recorded["status"], recorded["complete"]) == ("succeeded", True)
    assert (outcome["window_end"], outcome["rows_written"], outcome["run_id"], outcome["complete"]) == (
        at, len(stored.rows), recorded["run_id"], True)
    log = _log(stack, "on_triggerer", run, 1)
    assert "evaluating it on the triggerer" in log and "row(s) written" in log, log
    # no task process, so the trigger sent the run's lineage itself, under the task's name and run id
    events = [json.loads(line) for line in (world["root"] / "lineage.jsonl").read_text(encoding="utf-8").splitlines()]
    [complete] = [e for e in events if e["job"]["name"] == "on_triggerer.evaluate_window"
                  and e["eventType"] == "COMPLETE" and e["inputs"]
                  and e["inputs"][0]["facets"]["csparqlWindow"]["windowEnd"] == format_instant(at)]
    assert [e["eventType"] for e in events if e["run"]["runId"] == complete["run"]["runId"]] == ["START", "COMPLETE"]
    assert [d["name"] for d in complete["outputs"]] == [str(settings.warehouse.results("triggerer_cars", "bindings"))]
    # Airflow sends the DAG processor a success callback for the task, which runs nothing: the stack's DAG
    # processor drops it instead of forking a process that parses the DAG file to drop it
    _callbacks_fetched(stack)
    time.sleep(10)  # a process forked for a callback would have logged by now
    assert _dag_processor_events(stack, run["dag_run_id"]) == []


def test_a_failing_evaluation_on_the_triggerer_fails_its_task_with_the_message_and_is_retried(world, connect_server):
    from deltalake import write_deltalake
    import pyarrow as pa

    from csparql.storage.watermarks import advance_watermark

    stack, settings = world["stack"], world["settings"]
    # a stream table with deletion vectors: the engine refuses to read it, so every evaluation fails
    write_deltalake(str(settings.warehouse.stream(BROKEN)), pa.table({"x": [1]}),
                    configuration={"delta.enableDeletionVectors": "true"})
    at = parse_instant("2020-01-01T00:10:00Z")
    advance_watermark(settings.warehouse, BROKEN, at, "test: the window is complete")
    run, task = _trigger(stack, "failing_on_triggerer", at)

    processes = _watch_task_processes(stack, "failing_on_triggerer", run["dag_run_id"], task["id"])

    finished = _wait_for_run(stack, "failing_on_triggerer", run["dag_run_id"])
    assert finished["state"] == "failed"
    assert processes == set()
    task = _task(stack, "failing_on_triggerer", run, "evaluate_window")
    assert (task["state"], task["try_number"]) == ("failed", 2)  # retried once (retries=1), then failed
    for try_number in (1, 2):
        log = _log(stack, "failing_on_triggerer", run, try_number)
        assert "the evaluation of the window at 2020-01-01T00:10:00Z failed" in log and "deletionVectors" in log, log
    failed = [r for r in delta_runs(settings.warehouse) if r["query"] == "broken_windows"]
    assert [r["status"] for r in failed] == ["failed", "failed"]
    # failure callbacks still reach the DAG processor (the DAG defines none to run)
    _callbacks_fetched(stack)
    deadline = time.monotonic() + 60
    while "Callback requested but no callback found" not in (events := _dag_processor_events(
            stack, run["dag_run_id"])) and time.monotonic() < deadline:
        time.sleep(1)
    assert "Callback requested but no callback found" in events, events


def delta_runs(warehouse: Warehouse) -> list[dict]:
    from csparql.storage.statistics import read_table

    return read_table(warehouse.runs).to_pylist()


def test_a_killed_triggerer_loses_no_window_and_its_window_is_written_once(world, connect_server):
    """The triggerer is killed (kill -9) while it evaluates a window; the supervisor starts it again, which
    takes up the run's trigger once Airflow sees the old one dead, evaluates the window and ends the task. The
    window's results are one copy, pyoxigraph's."""
    from conformance.compare import compare, from_engine

    stack, settings, files = world["stack"], world["settings"], world["files"]
    # a window of the sample stream alone: the backfill test lands a late triple at 31.5 min, which every window
    # ending from there to 61.5 min holds, and which the sample files the truth is computed from do not
    at = files.start + 25 * MINUTE
    run, task = _trigger(stack, "on_triggerer", at)
    folder = stack.home / "logs" / "dag_id=on_triggerer" / f"run_id={run['dag_run_id']}" / "task_id=evaluate_window"

    def evaluations_begun() -> int:  # the triggerer writes the trigger's part of the log beside the task's own
        return sum(path.read_text(errors="replace").count("evaluating it on the triggerer")
                   for path in folder.glob("attempt=1.log*"))

    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and not evaluations_begun():
        time.sleep(0.1)
    assert evaluations_begun() == 1, "the triggerer did not begin the evaluation"
    os.killpg(stack.processes["triggerer"].pid, signal.SIGKILL)

    finished = _wait_for_run(stack, "on_triggerer", run["dag_run_id"], timeout=600)

    assert finished["state"] == "success", stack.task_log_tail("on_triggerer", finished, lines=200)
    deadline = time.monotonic() + 60
    while not any(name == "triggerer" for name, _ in stack.restarts) and time.monotonic() < deadline:
        time.sleep(1)
    assert any(name == "triggerer" for name, _ in stack.restarts)  # the supervisor started it again
    assert _task(stack, "on_triggerer", run, "evaluate_window")["try_number"] == 1  # taken up, not retried
    [stored] = [result for _, end, result in StoredResults(settings.warehouse, "triggerer_cars").windows() if end == at]
    found = from_engine(stored)
    assert found.rows and not compare(found, _truth_of_user_query(files, at))
    assert len(stored.rows) == latest_run(settings.warehouse, "triggerer_cars", at)["rows_written"]


def _succeeded_run_and_its_task_processes(stack: AirflowStack, dag: str, at: int) -> tuple[dict, set[int]]:
    """A manual run of ``dag`` for the window ending ``at``, once it succeeded, and the task processes it took."""
    run, task = _trigger(stack, dag, at)
    processes = _watch_task_processes(stack, dag, run["dag_run_id"], task["id"])
    finished = _wait_for_run(stack, dag, run["dag_run_id"])
    assert finished["state"] == "success", stack.task_log_tail(dag, finished, lines=200)
    return run, processes


def test_an_output_stream_written_on_the_triggerer_records_its_asset_event_through_the_api_with_no_task_process(
        world, connect_server):
    """A trigger cannot add Asset events: a REGISTER STREAM query evaluated on the triggerer records its output
    stream's event through Airflow's REST API, as the login of the stack's API connection, and ends the task
    from the triggerer: no task process; the event names the run in its extra."""
    stack, settings, files = world["stack"], world["settings"], world["files"]
    at = files.start + 45 * MINUTE
    run, processes = _succeeded_run_and_its_task_processes(stack, "stream_through_api", at)
    assert processes == set()  # evaluated, announced and ended on the triggerer
    task = _task(stack, "stream_through_api", run, "evaluate_window")
    assert (task["state"], task["try_number"], task["pid"]) == ("success", 1, None)
    runs = [r for r in delta_runs(settings.warehouse) if r["query"] == "api_passages"]
    assert [(r["status"], r["complete"]) for r in runs] == [("succeeded", True)]
    log = _log(stack, "stream_through_api", run, 1)
    assert "recorded the Asset event of urn:csparql:stream:ApiPassages through the API" in log, log
    [asset] = stack.api("GET", "assets?uri_pattern=ApiPassages")["assets"]
    events = stack.api("GET", f"assets/events?asset_id={asset['id']}")["asset_events"]
    assert [{key: e["extra"].get(key) for key in ("window_end", "dag_id", "run_id", "task_id")} for e in events] == [
        {"window_end": format_instant(at), "dag_id": "stream_through_api", "run_id": run["dag_run_id"],
         "task_id": "evaluate_window"}]


def test_an_output_stream_whose_api_connection_is_missing_gets_its_asset_event_from_a_short_worker_finish(
        world, connect_server):
    """A REGISTER STREAM query evaluated on the triggerer whose connection to the REST API does not exist says
    so in its log and resumes in a worker with the evaluation's record, which evaluates nothing and records its
    output stream's Asset event: nothing is lost."""
    stack, settings, files = world["stack"], world["settings"], world["files"]
    at = files.start + 40 * MINUTE
    run, processes = _succeeded_run_and_its_task_processes(stack, "stream_on_triggerer", at)
    assert len(processes) == 1  # the finish: announcing and the Asset event, no Spark
    runs = [r for r in delta_runs(settings.warehouse) if r["query"] == "triggerer_passages"]
    assert [(r["status"], r["complete"]) for r in runs] == [("succeeded", True)]  # evaluated once, on the triggerer
    log = _log(stack, "stream_on_triggerer", run, 1)
    assert "evaluating it on the triggerer" in log and "the triggerer evaluated the window" in log, log
    assert "there is no Airflow connection 'no_such_connection' ([csparql] api_conn_id)" in log, log
    [asset] = stack.api("GET", "assets?uri_pattern=TriggererPassages")["assets"]
    events = stack.api("GET", f"assets/events?asset_id={asset['id']}")["asset_events"]
    assert [(e["source_run_id"], e["extra"].get("window_end")) for e in events] == [
        (run["dag_run_id"], format_instant(at))]

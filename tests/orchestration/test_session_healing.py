"""Spark Connect clients that outlive their session: a real Connect server (started on 127.0.0.1 with a
5-second idle timeout) closes an idle client's session, and is killed and started again as the stack's
supervisor does; a client process that keeps evaluating windows, as the triggerer does (a new ``Engine`` on
the process's session for each window), and the trigger's own evaluation in a process of its own, evaluate the
next window on a new session, with one result commit and one succeeded run per window. The stack says when its
server stops answering (its JVM stopped) and answers again. And the failures a client cannot heal reach the
command line and the runs table in one line with their cause: a server that wants a token the client lacks, an
address where nothing listens.

The long-lived client is a Python process of its own: this process holds the suite's classic SparkSession,
and PySpark opens no Connect session beside it."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from csparql.engine.runner import result_table
from csparql.examples import examples_folder
from csparql.storage import delta
from csparql.storage.statistics import read_table
from csparql.storage.tables import RUN_METADATA
from csparql.storage.warehouse import Warehouse
from orchestration.spark_cluster import RESULT_PREFIX, free_port, spark_environment
from orchestration.spark_connect import ingest_city_hour, test_server

pytestmark = pytest.mark.spark

QUERY = examples_folder("queries") / "04-cars-per-district.rq"
NAME = "cars_per_district"
TOLLGATES = "http://streams.org/citytollgates.trdf"
IDLE_TIMEOUT = 5.0
"""The server's idle timeout in seconds (it looks for idle sessions every second)."""
MINUTE = 60_000_000

# A client that lives as long as the test: one window evaluated per line read (its instant), as the triggerer
# evaluates (evaluation_engine: a new Engine on the process's session); one CSPARQL_RESULT line each.
_CLIENT = """
import json, sys
from pathlib import Path
from csparql.engine.runner import Engine
from csparql.core.frontend import compile_query
from csparql.runtime.session import spark_session
from csparql.storage.warehouse import Warehouse

url, warehouse, query, name = sys.argv[1:]
plan = compile_query(Path(query).read_text(encoding="utf-8"), query)
for line in sys.stdin:
    try:
        engine = Engine(Warehouse(Path(warehouse)), spark_session(url))
        evaluation = engine.evaluate(plan, int(line), name)
        record = {"ok": True, "run_id": evaluation.run_id, "window_end": evaluation.window.end,
                  "session": engine.spark.session_id}
    except Exception as error:
        record = {"ok": False, "error": str(error)}
    print(RESULT_PREFIX + json.dumps(record), flush=True)
"""


class Client:
    """The long-lived client process (``_CLIENT``)."""

    def __init__(self, url: str, warehouse: Path, work: Path):
        env = client_environment(work)
        code = f"RESULT_PREFIX = {RESULT_PREFIX!r}\n{_CLIENT}"
        self.process = subprocess.Popen([sys.executable, "-c", code, url, str(warehouse), str(QUERY), NAME],
                                        env=env, cwd=work, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                        stderr=open(work / "client.log", "w"), text=True)
        self.log = work / "client.log"

    def evaluate(self, at: int) -> dict:
        self.process.stdin.write(f"{at}\n")
        self.process.stdin.flush()
        while True:
            line = self.process.stdout.readline()
            if not line:
                raise AssertionError(f"the client exited:\n{self.log.read_text()[-3000:]}")
            if line.startswith(RESULT_PREFIX):
                return json.loads(line[len(RESULT_PREFIX):])

    def close(self) -> None:
        self.process.stdin.close()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def client_environment(work: Path) -> dict[str, str]:
    env = spark_environment(Path(work))
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT",
                "CSPARQL_SPARK_MASTER"):
        env.pop(key, None)
    return env


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """The product's Connect server with a short idle timeout, started first so that it comes up while the
    city is ingested."""
    server = test_server(tmp_path_factory.mktemp("spark-connect"))
    server.session_timeout = IDLE_TIMEOUT
    server.start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def city_hour(spark, server, tmp_path_factory):
    """One hour of the sample city's tollgates and its static graph, ingested by this process's Spark."""
    tmp_path = tmp_path_factory.mktemp("healing")
    warehouse, samples = ingest_city_hour(spark, tmp_path, (TOLLGATES,))
    return tmp_path, warehouse, samples


@pytest.fixture(scope="module")
def client(city_hour, server):
    tmp_path, warehouse, _ = city_hour
    client = Client(server.wait_until_answering(), warehouse.root, tmp_path)
    yield client
    client.close()


def result_commits(warehouse: Warehouse) -> list[int]:
    """The window end of each result commit of the query (the run each commit carries)."""
    path = result_table(warehouse, _plan(), NAME)
    commits = delta.open_table(path).history()
    return sorted(json.loads(c[RUN_METADATA])["window_end"] for c in commits if RUN_METADATA in c)


def runs(warehouse: Warehouse) -> list[dict]:
    """The query's rows of the runs table, their window ends in µs."""
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    rows = [r for r in read_table(warehouse.runs).to_pylist() if r["query"] == NAME]
    for row in rows:
        end = row["window_end"]
        row["window_end"] = (end.replace(tzinfo=timezone.utc) - epoch) // timedelta(microseconds=1)
    return rows


def _plan():
    from csparql.core.frontend import compile_query

    return compile_query(QUERY.read_text(encoding="utf-8"), str(QUERY))


def test_an_evaluation_after_the_server_closed_the_idle_session_runs_on_a_new_one(city_hour, server, client):
    _, warehouse, samples = city_hour
    first = client.evaluate(samples.end - 15 * MINUTE)
    assert first["ok"], first
    time.sleep(IDLE_TIMEOUT + 4)  # the server closes the session (INVALID_HANDLE.SESSION_CLOSED from then on)
    second = client.evaluate(samples.end - 10 * MINUTE)
    assert second["ok"], f"{second}\n{client.log.read_text()[-3000:]}"
    assert second["session"] != first["session"]  # the closed session was replaced, in the same process
    assert result_commits(warehouse) == sorted([first["window_end"], second["window_end"]])
    recorded = runs(warehouse)
    assert sorted(r["run_id"] for r in recorded) == sorted([first["run_id"], second["run_id"]])
    assert all(r["status"] == "succeeded" and r["error"] is None for r in recorded)


# As the triggerer evaluates a complete window (see test_triggerer_lineage.py): the runtime task instance made
# from the serialized DAG, the trigger the operator defers to, its evaluation; one window per line read.
_TRIGGERER = """
import json, logging, sys, uuid
from datetime import datetime, timedelta, timezone

import pendulum
from airflow.executors.workloads.task import TaskInstanceDTO
from airflow.jobs.triggerer_job_runner import TriggerRunner
from airflow.sdk import DAG
from airflow.serialization.serialized_objects import DagSerialization
from airflow.triggers.base import TriggerEvent

from csparql.orchestration.operators import CsparqlEvaluateWindowOperator
from csparql.orchestration.triggers import WindowCompleteTrigger

query, warehouse, name, conn_id = sys.argv[1:]
logging.basicConfig(level=logging.WARNING, force=True)  # the triggerer's log, on stderr
dag_id = "healing"
with DAG(dag_id, schedule=None, start_date=pendulum.datetime(2010, 1, 1, tz="UTC")) as dag:
    operator = CsparqlEvaluateWindowOperator(task_id="evaluate_window", query=query, name=name,
                                             warehouse=warehouse, conn_id=conn_id)
for line in sys.stdin:
    at = line.strip()
    window_end = datetime.fromisoformat(at.replace("Z", "+00:00"))
    run_id = "manual__" + at
    ti = TaskInstanceDTO(id=uuid.uuid4(), task_id="evaluate_window", dag_id=dag_id, run_id=run_id, try_number=1,
                         dag_version_id=uuid.uuid4(), pool_slots=1, priority_weight=1)
    dag_run = {"dag_id": dag_id, "run_id": run_id, "logical_date": window_end,
               "data_interval_start": window_end - timedelta(minutes=5), "data_interval_end": window_end,
               "run_after": window_end, "start_date": datetime.now(timezone.utc), "end_date": None,
               "clear_number": 0, "run_type": "manual", "state": "running", "conf": {},
               "consumed_asset_events": [], "partition_key": None}
    trigger = WindowCompleteTrigger(**{**operator.start_trigger_args.trigger_kwargs, "window_instant": at})
    trigger.task_instance = TriggerRunner.create_runtime_ti(ti, DagSerialization.to_dict(dag), dag_run)
    event = trigger.evaluate(TriggerEvent({"status": "complete"}))
    print(RESULT_PREFIX + json.dumps({"event": type(event).__name__}), flush=True)
"""


@pytest.mark.airflow
def test_the_triggerer_evaluates_after_the_server_closed_its_idle_session(city_hour, server, tmp_path):
    from csparql.core.windows import format_instant

    _, warehouse, samples = city_hour
    env = client_environment(tmp_path)
    env.update({"AIRFLOW_HOME": str(tmp_path / "airflow"), "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
                "AIRFLOW__OPENLINEAGE__DISABLED": "True",
                "AIRFLOW_CONN_CSPARQL_CONNECT": f"spark-connect://:{server.token}@localhost:{server.port}"})
    code = f"RESULT_PREFIX = {RESULT_PREFIX!r}\n{_TRIGGERER}"
    log = tmp_path / "triggerer.log"
    triggerer = subprocess.Popen([sys.executable, "-c", code, str(QUERY), str(warehouse.root), "on_triggerer",
                                  "csparql_connect"], env=env, cwd=tmp_path, stdin=subprocess.PIPE,
                                 stdout=subprocess.PIPE, stderr=open(log, "w"), text=True)

    def evaluate(at: int) -> str:
        triggerer.stdin.write(format_instant(at) + "\n")
        triggerer.stdin.flush()
        for line in triggerer.stdout:
            if line.startswith(RESULT_PREFIX):
                return json.loads(line[len(RESULT_PREFIX):])["event"]
        raise AssertionError(f"the triggerer exited:\n{log.read_text()[-3000:]}")

    try:
        server.wait_until_answering()
        assert evaluate(samples.end - 15 * MINUTE) == "TaskSuccessEvent", log.read_text()[-3000:]
        time.sleep(IDLE_TIMEOUT + 4)  # the server closes the triggerer's session
        assert evaluate(samples.end - 10 * MINUTE) == "TaskSuccessEvent", log.read_text()[-3000:]
    finally:
        triggerer.stdin.close()
        triggerer.wait(timeout=60)
    recorded = [r for r in read_table(warehouse.runs).to_pylist() if r["query"] == "on_triggerer"]
    assert len(recorded) == 2 and all(r["status"] == "succeeded" for r in recorded)
    # the session was closed under it, and the evaluation ran again on a new one
    assert "the server lost the session of on_triggerer's window ending" in log.read_text()
    assert "INVALID_HANDLE.SESSION_CLOSED" in log.read_text()


_OTHER_THREAD = """
import json, sys, threading, time
from csparql.runtime.session import spark_session

url, idle = sys.argv[1], float(sys.argv[2])
first = spark_session(url)
first.range(2).count()  # the process's default session, active in the main thread only
time.sleep(idle)  # the server closes it
answer = {}

def in_a_pool_thread():  # where the triggerer evaluates: no active session, the default one is closed
    try:
        session = spark_session(url)
        answer.update(rows=session.range(3).count(), new=session.session_id != first.session_id)
    except Exception as error:
        answer["error"] = " ".join(str(error).split())[:500]

thread = threading.Thread(target=in_a_pool_thread)
thread.start()
thread.join()
print(RESULT_PREFIX + json.dumps(answer), flush=True)
"""


def test_a_thread_asking_for_a_session_after_the_server_closed_the_idle_default_one_gets_a_new_one(server,
                                                                                                    tmp_path):
    url = server.wait_until_answering()
    run = subprocess.run([sys.executable, "-c", f"RESULT_PREFIX = {RESULT_PREFIX!r}\n{_OTHER_THREAD}", url,
                          str(IDLE_TIMEOUT + 4)], env=client_environment(tmp_path), cwd=tmp_path,
                         capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL)
    printed = [line for line in run.stdout.splitlines() if line.startswith(RESULT_PREFIX)]
    assert printed, run.stdout[-2000:] + run.stderr[-4000:]
    assert json.loads(printed[-1][len(RESULT_PREFIX):]) == {"rows": 3, "new": True}, run.stderr[-4000:]
    assert "the server lost this process's session" in run.stderr


def test_a_client_without_the_token_fails_with_the_grpc_status_and_details(city_hour, server, tmp_path):
    _, warehouse, samples = city_hour
    server.wait_until_answering()
    run = csparql_run(f"sc://127.0.0.1:{server.port}", warehouse, samples.end, "intruder", tmp_path)
    assert run.returncode == 1, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert "Spark Connect: UNAUTHENTICATED: No authentication token provided" in lines[0]
    assert "_InactiveRpcError" not in run.stderr and "Traceback" not in run.stderr
    (failed,) = [r for r in read_table(warehouse.runs).to_pylist() if r["query"] == "intruder"]
    assert failed["status"] == "failed"
    assert failed["error"] == "Spark Connect: UNAUTHENTICATED: No authentication token provided"


def test_the_command_line_says_when_no_server_answers_at_the_address(city_hour, tmp_path):
    _, warehouse, samples = city_hour
    url = f"sc://127.0.0.1:{free_port()}"  # nothing listens there
    began = time.monotonic()
    run = csparql_run(url, warehouse, samples.end, "nowhere", tmp_path, timeout=90)
    assert time.monotonic() - began < 60
    assert run.returncode == 1, run.stderr
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, run.stderr
    assert f"no Spark Connect server answers at {url}" in lines[0]


def test_the_stack_says_when_its_connect_server_stops_answering_and_answers_again(city_hour, server, tmp_path,
                                                                                  monkeypatch):
    from csparql.deploy.settings import Settings
    from csparql.stack import embedded as embedded_module
    from csparql.stack.embedded import EmbeddedStack

    monkeypatch.setattr(embedded_module, "HEALTH_TIMEOUT", 3.0)
    server.wait_until_answering()
    out = io.StringIO()
    stack = EmbeddedStack(Settings.from_environment({}, base=tmp_path), home=tmp_path / "airflow", out=out)
    stack.server, stack.server_answered = server, True
    stack.check_health()
    assert out.getvalue() == ""  # it answers: nothing to say
    os.killpg(server.process.pid, signal.SIGSTOP)  # the JVM runs no more, its port still takes connections
    try:
        stack.next_health_check = 0.0
        stack.check_health()
    finally:
        os.killpg(server.process.pid, signal.SIGCONT)
    assert f"the Spark Connect server on {server.address} does not answer within 3 s" in out.getvalue()
    stack.server._asking.join(60)  # the request made while it was stopped comes back
    stack.next_health_check = 0.0
    stack.check_health()
    (silent, again) = out.getvalue().splitlines()
    assert "the Spark Connect server answers again" in again


def test_an_evaluation_after_the_server_restarted_runs_on_a_new_session(city_hour, server, client):
    _, warehouse, samples = city_hour
    before = client.evaluate(samples.end - 5 * MINUTE)
    assert before["ok"], before
    os.killpg(server.process.pid, signal.SIGKILL)
    server.process.wait(timeout=30)
    assert server.restart_if_exited() == -signal.SIGKILL  # as the stack's supervisor does: a new JVM
    after = client.evaluate(samples.end)  # sent at once: the client waits for the new server
    assert after["ok"], f"{after}\n{client.log.read_text()[-3000:]}"
    assert after["session"] != before["session"]
    windows = result_commits(warehouse)
    assert len(windows) == len(set(windows))  # one result commit per window
    assert {before["window_end"], after["window_end"]} <= set(windows)
    recorded = runs(warehouse)
    assert sorted(r["window_end"] for r in recorded) == windows  # one run per window, the one that committed
    assert all(r["status"] == "succeeded" and r["error"] is None for r in recorded)
    assert {before["run_id"], after["run_id"]} <= {r["run_id"] for r in recorded}


def csparql_run(url: str, warehouse: Warehouse, at: int, name: str, work: Path,
                timeout: float = 240) -> subprocess.CompletedProcess:
    from csparql.core.windows import format_instant

    env = client_environment(work)
    env["CSPARQL_WAREHOUSE"] = str(warehouse.root)
    return subprocess.run([sys.executable, "-m", "csparql.cli", "run", str(QUERY), "--at", format_instant(at),
                           "--name", name, "--master", url], env=env, cwd=work, capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)

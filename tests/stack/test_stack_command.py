"""The README's main command, ``csparql stack`` (what ``./run.sh`` runs), as a user runs it, on one stack for
the module (the tests run in order): it prints the address and a login that works as soon as Airflow answers,
before the sample stream has landed; it starts one Spark Connect server, on which the ingestion DAG lands the
sample stream and the backfilled windows are evaluated (no Airflow task starts a Spark of its own); Airflow
finishes the runs it started first; it starts the server again when it dies, says so, and the next ingest runs
on the new server; and Ctrl-C stops everything, the server's JVM and its Python workers included, leaving no
process behind."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

from csparql.deploy.plan import ingest_dag_id
from csparql.deploy.settings import Settings
from csparql.samples import STREAMS
from csparql.runtime.connect_server import SERVER_CLASS
from csparql.stack.airflow_stack import AirflowStack, free_port
from csparql.storage import delta
from csparql.storage.statistics import read_table
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import read_watermarks
from csparql.core.windows import to_micros

pytestmark = [pytest.mark.airflow, pytest.mark.spark]

REPOSITORY = Path(__file__).resolve().parents[2]
QUERY = "ex02_cars_per_tollgate"
MILAN = STREAMS["milantollgates"]
LOGIN = re.compile(r"Airflow is up: (\S+)\s+login: (\S+) / (\S+)")
WRITTEN = re.compile(r"window evaluations written: \d+ ")
"""The progress line of the window evaluations, whatever their count: it says the count when it changes, so
two evaluations between its looks are one line (``written: 2``)."""


class RunningStack:
    """``csparql stack`` in its own process group, its output in a file, and a watch, every half second, for
    a JVM started under an Airflow component (a task with a Spark of its own)."""

    def __init__(self, root: Path):
        self.root = root
        self.port, self.connect_port = free_port(), free_port()
        self.home = root / "airflow"
        self.output = root / "stack.out"
        self.warehouse = Warehouse(root / "warehouse")
        self.task_jvms: set[str] = set()
        self.watching = threading.Event()
        dags = root / "dags"
        dags.mkdir()
        shutil.copy(REPOSITORY / "dags" / "csparql_streams.py", dags)
        env = dict(os.environ, CSPARQL_WAREHOUSE=str(self.warehouse.root), CSPARQL_REGISTRY=str(dags / "queries"),
                   AIRFLOW__CORE__DAGS_FOLDER=str(dags), PYTHONUNBUFFERED="1")
        with open(self.output, "w") as out:
            self.process = subprocess.Popen(
                [str(Path(sys.executable).with_name("csparql")), "stack", "--port", str(self.port), "--connect-port",
                 str(self.connect_port), "--home", str(self.home), "--examples", "02", "--windows", "1"],
                env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
            )
        self.watcher = threading.Thread(target=self._watch_for_task_jvms, daemon=True)
        self.watcher.start()

    def text(self) -> str:
        return self.output.read_text()

    def components(self) -> dict[str, int]:
        path = self.home / "components.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def _watch_for_task_jvms(self) -> None:
        while not self.watching.wait(0.5):
            groups = set(self.components().values())
            for process in psutil.process_iter(["name", "cmdline"]):
                try:
                    if process.info["name"] == "java" and any(p.pid in groups for p in process.parents()):
                        self.task_jvms.add(" ".join(process.info["cmdline"])[:300])
                except psutil.Error:
                    continue

    def server_jvm(self) -> psutil.Process:
        """The JVM of the stack's Spark Connect server."""
        marker = f"spark.connect.grpc.binding.port={self.connect_port}"
        found = [p for p in psutil.process_iter(["cmdline"])
                 if SERVER_CLASS in (p.info["cmdline"] or []) and marker in (p.info["cmdline"] or [])]
        assert len(found) == 1, f"{len(found)} Spark Connect server JVMs on port {self.connect_port}"
        return found[0]

    def wait_for(self, check, timeout: float):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            value = check()
            if value:
                return value
            assert self.process.poll() is None, \
                f"csparql stack exited ({self.process.returncode}):\n{self.text()[-3000:]}"
            time.sleep(0.5)
        raise AssertionError(f"timed out after {timeout:.0f} s:\n{self.text()[-3000:]}")

    def succeeded(self) -> list[dict]:
        if not delta.exists(self.warehouse.runs):
            return []
        return [r for r in read_table(self.warehouse.runs).to_pylist()
                if r["query"] == QUERY and r["status"] == "succeeded"]

    def settings(self) -> Settings:
        return Settings.from_environment({"CSPARQL_WAREHOUSE": str(self.warehouse.root)})

    def task_logs(self, dag_id: str, task_id: str) -> str:
        folder = self.home / "logs" / f"dag_id={dag_id}"
        logs = sorted(folder.glob(f"run_id=*/task_id={task_id}/*.log"))
        return "\n".join(p.read_text(errors="replace") for p in logs)

    def stop(self) -> None:
        """What the last test does, when a test before it failed: Ctrl-C, and then whatever is left is killed."""
        self.watching.set()
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGINT)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()
        for group in self.components().values():
            if _group_alive(group):
                os.killpg(group, signal.SIGKILL)
        marker = f"spark.connect.grpc.binding.port={self.connect_port}"
        for process in psutil.process_iter(["cmdline"]):
            if marker in (process.info["cmdline"] or []):
                process.kill()


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    running = RunningStack(tmp_path_factory.mktemp("stack"))
    yield running
    running.stop()


def test_the_login_is_printed_as_soon_as_airflow_answers_before_the_sample_stream_lands(stack):
    login = stack.wait_for(lambda: LOGIN.search(stack.text()), 600)
    assert MILAN not in read_watermarks(stack.warehouse), "the login came only after the sample stream had landed"
    url, user, password = login.groups()
    assert url == f"http://127.0.0.1:{stack.port}"
    request = urllib.request.Request(f"{url}/auth/token", method="POST", headers={"Content-Type": "application/json"},
                                     data=json.dumps({"username": user, "password": password}).encode())
    with urllib.request.urlopen(request, timeout=30) as response:
        assert json.load(response)["access_token"]
    # and then the terminal says what happens, one line per change
    stack.wait_for(lambda: WRITTEN.search(stack.text()) and "backfills done: 1 of 1" in stack.text(), 900)
    text = stack.text()
    assert text.index("Airflow is up") < text.index("sample files landed: 1 of 1") \
        < text.index("backfills done: 1 of 1")


def test_the_sample_stream_lands_and_windows_are_evaluated_on_the_stacks_connect_server(stack):
    stack.wait_for(stack.succeeded, 900)
    assert delta.exists(stack.warehouse.results(QUERY, "bindings"))
    assert not stack.task_jvms, f"an Airflow task started a Spark of its own: {stack.task_jvms}"
    session = f"Spark: a session of the Spark Connect server sc://localhost:{stack.connect_port}"
    assert session in stack.task_logs(ingest_dag_id(MILAN), "ingest_landed_files")
    assert session in stack.task_logs(QUERY, "evaluate_window")
    assert f"the Spark Connect server answers on 127.0.0.1:{stack.connect_port}" in stack.text()
    # the supervisor's restart is a safety net, not the normal path (the scheduler once exited on SQLite)
    restarts = [line for line in stack.text().splitlines() if re.search(r"the Airflow \S+ exited with code", line)]
    assert not restarts, restarts


def test_a_query_registered_over_the_live_sample_stream_shows_results_on_its_schedule(stack):
    # Once the sample history has landed, the stack plays the sample streams live: a query registered now
    # (the editor's example, every minute over the last 10 minutes) evaluates windows of the wall clock.
    from csparql.web.pages.editor import EXAMPLE

    stack.wait_for(lambda: "the sample streams play live" in stack.text(), 600)
    query = stack.root / "live.rq"
    query.write_text(EXAMPLE.replace("CarsPerTollgate", "LiveTollgates"))
    env = dict(os.environ, CSPARQL_WAREHOUSE=str(stack.warehouse.root),
               CSPARQL_REGISTRY=str(stack.root / "dags" / "queries"))
    subprocess.run([str(Path(sys.executable).with_name("csparql")), "register", str(query)], env=env, check=True,
                   capture_output=True, timeout=120)
    registered = time.time_ns() // 1000
    _, user, password = LOGIN.search(stack.text()).groups()
    airflow = AirflowStack(home=stack.home, dags=stack.root / "dags", settings_environment={}, port=stack.port,
                           username=user, password=password)
    stack.wait_for(lambda: airflow.api("GET", "dags/LiveTollgates", allow=(404,)).get("status") != 404, 180)
    airflow.unpause("LiveTollgates")

    def live_results():
        if not delta.exists(stack.warehouse.runs):
            return None
        return [r for r in read_table(stack.warehouse.runs).to_pylist()
                if r["query"] == "LiveTollgates" and r["status"] == "succeeded" and r["rows_written"]
                and to_micros(r["window_end"]) > registered - 120_000_000]

    done = stack.wait_for(live_results, 300)
    assert delta.exists(stack.warehouse.results("LiveTollgates", "bindings"))
    assert all(to_micros(r["window_end"]) <= time.time_ns() // 1000 for r in done)


def test_a_runs_evaluation_goes_before_the_waits_of_runs_not_yet_begun(stack):
    # Each task's priority counts the tasks upstream of it: evaluate_window (2) before await_window (1), so the
    # scheduler finishes the runs it started, and the first results come early, not after every run's wait.
    _, user, password = LOGIN.search(stack.text()).groups()
    airflow = AirflowStack(home=stack.home, dags=stack.root / "dags", settings_environment={}, port=stack.port,
                           username=user, password=password)
    tasks = airflow.api("GET", f"dags/{QUERY}/tasks")["tasks"]
    assert tasks and {t["weight_rule"] for t in tasks} == {"upstream"}


def test_the_connect_server_is_started_again_after_it_dies_and_serves_the_tasks_again(stack):
    stack.server_jvm().kill()  # kill -9
    stack.wait_for(lambda: "the Spark Connect server exited with code -9; started it again" in stack.text(), 60)
    stack.wait_for(lambda: "the Spark Connect server answers again" in stack.text(), 300)
    # A file dropped now is landed by the ingestion DAG's next run (every minute), through the new server.
    landing = stack.settings().landing_folder(MILAN)
    sample = next(p for p in (landing / "done").iterdir() if not p.name.startswith("live-"))
    (landing / ".late.nq").write_text("".join(sample.read_text().splitlines(keepends=True)[:20]))
    (landing / ".late.nq").rename(landing / "late.nq")
    version = delta.open_table(stack.warehouse.stream(MILAN)).version()
    stack.wait_for(lambda: (landing / "done" / "late.nq").exists(), 300)
    assert delta.open_table(stack.warehouse.stream(MILAN)).version() >= version + 1  # live files land too
    session = f"Spark: a session of the Spark Connect server sc://localhost:{stack.connect_port}"
    assert stack.task_logs(ingest_dag_id(MILAN), "ingest_landed_files").count(session) >= 2
    assert not stack.task_jvms, f"an Airflow task started a Spark of its own: {stack.task_jvms}"


def test_ctrl_c_stops_the_stack_leaving_no_process(stack):
    jvm = stack.server_jvm()
    started = [jvm, *jvm.children(recursive=True)]  # the JVM and its Python workers
    os.killpg(stack.process.pid, signal.SIGINT)  # what Ctrl-C in a terminal sends
    code = stack.process.wait(timeout=120)
    assert code == 0, stack.text()[-3000:]
    assert "stopped" in stack.text()
    components = stack.components()
    assert set(components) == {"api-server", "scheduler", "dag-processor", "triggerer"}
    assert not [name for name, group in components.items() if _group_alive(group)], "an Airflow process is left"
    left = [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]
    assert not left, f"Spark processes left: {[' '.join(p.cmdline())[:200] for p in left]}"
    with pytest.raises(AssertionError, match="0 Spark Connect server JVMs"):
        stack.server_jvm()


def _group_alive(group: int) -> bool:
    """Whether any process of the process group (a component and the workers it started) still runs."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    return True

"""How ``csparql stack`` wires Airflow to its Spark, checked without starting anything: with the default
``--spark connect`` every task's Spark is the stack's Connect server, reached through the Airflow connection
the product's operators resolve (token included); ``--spark local`` keeps a Spark inside each task; a mode the
stack cannot run is refused with one line; a backfill Airflow lost is created again; a server error of a busy
api-server during the start is reported and the step taken again. (``test_stack_command`` runs the real
stack.)"""

from __future__ import annotations

import io
import threading
from pathlib import Path

import pyarrow as pa
import pytest

from csparql.cli import main
from csparql.deploy.plan import ingest_dag_id
from csparql.deploy.settings import Settings
from csparql.samples import SampleFiles
from csparql.runtime.connect_server import ConnectServer
from csparql.stack import embedded as embedded_module
from csparql.stack.airflow_stack import AirflowStack, ServerError
from csparql.stack.embedded import MAX_BACKFILL_ATTEMPTS, EmbeddedStack, Progress
from csparql.storage import delta, schema
from csparql.core.windows import parse_instant

pytestmark = pytest.mark.airflow


@pytest.fixture
def settings(tmp_path):
    return Settings.from_environment({"CSPARQL_WAREHOUSE": str(tmp_path / "warehouse"),
                                      "CSPARQL_REGISTRY": str(tmp_path / "dags" / "queries")})


def test_tasks_reach_the_stacks_connect_server_through_their_airflow_connection(settings, tmp_path, monkeypatch):
    from csparql.orchestration.operators import connect_url

    monkeypatch.setenv("CSPARQL_SPARK_CONN_ID", "someone_elses_cluster")  # the stack's own server wins
    embedded = EmbeddedStack(settings, home=tmp_path / "airflow", spark="connect", connect_port=15099)
    embedded.server = ConnectServer(tmp_path / "connect", port=15099)  # not started: only its address matters
    environment = embedded.environment()
    assert environment["CSPARQL_SPARK"] == "connect"
    for name, value in embedded.connections().items():
        monkeypatch.setenv(name, value)
    task_settings = Settings.from_environment(environment)
    assert task_settings.spark == "connect"
    assert connect_url(task_settings) == embedded.server.url == f"sc://localhost:15099/;token={embedded.server.token}"


def test_local_spark_stays_available(settings, tmp_path):
    embedded = EmbeddedStack(settings, home=tmp_path / "airflow", spark="local")
    assert Settings.from_environment(embedded.environment()).spark == "local"
    assert embedded.connections() == {}


def test_a_spark_mode_the_stack_cannot_run_is_refused_in_one_line(monkeypatch, capsys):
    monkeypatch.setenv("CSPARQL_SPARK", "standalone")
    assert main(["stack"]) == 1
    error = capsys.readouterr().err.strip()
    assert error.startswith("csparql stack: CSPARQL_SPARK=standalone: the embedded stack has no cluster")
    assert len(error.splitlines()) == 1


# A backfill Airflow lost: stored, its runs never created (a 503 on SQLite), marked complete empty. Airflow cannot
# be made to lose one on demand, so the REST answers are scripted (``api`` and ``backfill`` are what is
# replaced); the runs table is a real Delta table.

START, END = "2010-03-22T10:50:00Z", "2010-03-22T11:00:00Z"


class ScriptedAirflow(AirflowStack):
    def __init__(self, backfills: dict[str, list[dict]]):
        super().__init__(home=Path("/nonexistent"), dags=Path("/nonexistent"), settings_environment={})
        self.backfills = backfills
        self.created: list[tuple] = []

    def api(self, method, path, body=None, allow=(), attempts=5):
        assert method == "GET" and path.startswith("backfills?dag_id=")
        return {"backfills": self.backfills[path.split("=", 1)[1]]}

    def backfill(self, dag_id, start, end, reprocess="none", max_active_runs=2, timeout=300):
        self.created.append((dag_id, start, end, reprocess))
        return {"id": len(self.created)}


def run_row(query: str, window_end: int, status: str) -> dict:
    return {"run_id": f"{query}-{window_end}", "query": query, "window_start": None, "window_end": window_end,
            "started_at": window_end, "status": status, "error": None if status == "succeeded" else "boom",
            "triples_read": None, "files_read": None, "rows_written": 0, "duration_ms": 5, "complete": True,
            "query_version": None}


def test_a_backfill_airflow_completed_without_any_of_its_windows_is_created_again(settings, tmp_path):
    end = parse_instant(END)
    delta.append(settings.warehouse.runs, pa.Table.from_pylist(
        [run_row("evaluated", end, "succeeded"), run_row("failed", end, "failed")], schema=schema.RUNS), schema.RUNS)
    completed = [{"id": 1, "completed_at": "2026-11-25T08:31:39Z"}]
    airflow = ScriptedAirflow({"lost": completed, "evaluated": completed, "failed": completed,
                               "running": [{"id": 2, "completed_at": None}]})
    out = io.StringIO()
    embedded = EmbeddedStack(settings, home=tmp_path / "airflow", out=out)
    embedded.stack = airflow
    progress = Progress(settings)
    for query in ("lost", "evaluated", "failed", "running"):
        progress.backfilled[query] = {end}
        embedded.backfill_ranges[query] = (START, END)

    embedded.recreate_lost_backfills(progress)
    assert airflow.created == [("lost", START, END, "failed")]
    assert "the backfill of lost ended with none of its windows evaluated" in out.getvalue()
    for _ in range(5):  # lost again and again: given up after a few attempts
        embedded.recreate_lost_backfills(progress)
    assert [c[0] for c in airflow.created] == ["lost"] * (MAX_BACKFILL_ATTEMPTS - 1)


class BusyAirflow(AirflowStack):
    """An api-server whose first POST fails as a database locked past its timeout does (500), and which
    records the calls; ``stopping`` is set once the ingestion DAG has been triggered."""

    def __init__(self, stopping: threading.Event):
        super().__init__(home=Path("/nonexistent"), dags=Path("/nonexistent"), settings_environment={})
        self.stopping = stopping
        self.calls: list[tuple[str, str]] = []

    def restart_exited(self):
        return []

    def api(self, method, path, body=None, allow=(), attempts=5):
        self.calls.append((method, path))
        if method == "POST" and len([c for c in self.calls if c[0] == "POST"]) == 1:
            raise ServerError(f"POST {path} answered 500: database is locked")
        if method == "POST":
            self.stopping.set()
        return {}


def test_a_server_error_of_airflow_during_the_start_is_reported_and_the_step_taken_again(settings, tmp_path,
                                                                                         monkeypatch):
    monkeypatch.setattr(embedded_module, "TICK_SECONDS", 0.01)
    stopping = threading.Event()
    out = io.StringIO()
    embedded = EmbeddedStack(settings, home=tmp_path / "airflow", out=out, spark="local")
    embedded.stack = airflow = BusyAirflow(stopping)
    milan = "http://streams.org/milantollgates.trdf"
    files = SampleFiles(streams={milan: tmp_path / "milan.nq"})
    embedded.supervise(stopping, [], files, first_start=False)
    dag = f"dags/{ingest_dag_id(milan)}"
    assert airflow.calls == [("GET", dag), ("PATCH", dag), ("POST", f"{dag}/dagRuns"),
                             ("GET", dag), ("PATCH", dag), ("POST", f"{dag}/dagRuns")]
    assert "answered 500: database is locked; trying again" in out.getvalue()


def test_the_progress_says_once_what_changed_in_the_runs_table(settings):
    first, second = parse_instant(START), parse_instant(END)
    progress = Progress(settings, backfilled={"q": {first, second}, "r": {second}}, since=first)
    assert progress.changes() == []  # no runs table yet

    def append(*rows):
        delta.append(settings.warehouse.runs, pa.Table.from_pylist(list(rows), schema=schema.RUNS), schema.RUNS)

    append(run_row("q", first, "succeeded"), run_row("q", second, "succeeded"))
    append(run_row("r", second, "failed"))
    assert progress.changes() == ["window evaluations written: 2 (median 0.0 s each)",
                                  "evaluation failed: r, window ending 2010-03-22T11:00:00Z: boom",
                                  "backfills done: 1 of 2"]
    assert progress.changes() == []
    append({**run_row("r", second, "succeeded"), "started_at": second + 60_000_000})  # the retry, a minute later
    assert progress.changes() == ["window evaluations written: 3 (median 0.0 s each)", "backfills done: 2 of 2"]


def test_a_restarted_stack_reports_only_the_failures_of_evaluations_started_since_it_started(settings):
    end = parse_instant(END)
    previous = run_row("old", end, "failed")  # the previous start's failure, started a minute before this one
    delta.append(settings.warehouse.runs, pa.Table.from_pylist([previous], schema=schema.RUNS), schema.RUNS)
    progress = Progress(settings, since=end + 60_000_000)
    assert progress.changes() == []
    delta.append(settings.warehouse.runs, pa.Table.from_pylist(
        [{**run_row("new", end, "failed"), "started_at": end + 120_000_000}], schema=schema.RUNS), schema.RUNS)
    assert progress.changes() == ["evaluation failed: new, window ending 2010-03-22T11:00:00Z: boom"]
    assert Progress(settings).since > end  # a start's progress begins now: the 2010 failures are history


def test_airflow_s_own_configuration_shows_the_settings_the_stack_runs_with(settings, tmp_path, monkeypatch):
    # the stack's shell: `airflow config get-value csparql warehouse` is the stack's warehouse (a caller's
    # AIRFLOW__CSPARQL__* does not win over it), and csparql commands there use the stack's Connect server
    import stat
    import subprocess

    monkeypatch.setenv("AIRFLOW__CSPARQL__WAREHOUSE", str(tmp_path / "someone-elses"))
    embedded = EmbeddedStack(settings, home=tmp_path / "airflow", spark="connect", connect_port=15098)
    embedded.server = ConnectServer(tmp_path / "connect", port=15098)  # not started: only its address matters
    embedded.stack = AirflowStack(home=embedded.home, dags=tmp_path / "dags", port=18643,
                                  settings_environment=embedded.environment(),
                                  extra_environment=embedded.connections())
    environment = embedded.stack.environment()
    assert environment["AIRFLOW__CSPARQL__WAREHOUSE"] == str(settings.warehouse.root)
    assert environment["AIRFLOW__CSPARQL__REGISTRY"] == str(settings.registry)
    assert environment["AIRFLOW__CSPARQL__SPARK"] == "connect"
    assert environment["AIRFLOW__CSPARQL__SPARK_CONN_ID"] == "spark_connect_default"
    embedded.banner([])
    env_file = embedded.home / "env.sh"
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600  # it holds the server's token
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}
    shown = subprocess.run(
        ["bash", "-c", f"source {env_file} && airflow config get-value csparql warehouse && "
                       "airflow config get-value csparql spark && echo $CSPARQL_SPARK_MASTER"],
        env=clean, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [str(settings.warehouse.root), "connect", embedded.server.url]


def test_the_stack_tells_how_to_reach_its_airflow_from_another_shell(settings, tmp_path):
    # `airflow backfill create` in a new shell talks to ~/airflow unless it is given the stack's AIRFLOW_HOME
    # and settings: the stack writes them to env.sh and prints the line that sources it.
    import subprocess
    import sys

    embedded = EmbeddedStack(settings, home=tmp_path / "airflow", spark="local")
    embedded.stack = AirflowStack(home=embedded.home, dags=tmp_path / "dags",
                                  settings_environment=embedded.environment(), port=18642)
    lines = embedded.banner(["ex04_cars_per_district"])
    env_file = embedded.home / "env.sh"
    assert f"export AIRFLOW_HOME={embedded.home}; source {env_file}" in "\n".join(lines)
    assert any("starts paused" in line and "airflow dags unpause" in line for line in lines)
    assert any("ex04_cars_per_district" in line for line in lines)
    clean = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)}  # a new shell: nothing of the stack's environment
    shown = subprocess.run(
        ["bash", "-c", f"source {env_file} && airflow config get-value database sql_alchemy_conn && "
                       "airflow config get-value core plugins_folder && echo $CSPARQL_WAREHOUSE"],
        env=clean, capture_output=True, text=True, timeout=300)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.split() == [f"sqlite:///{embedded.home / 'airflow.db'}",
                                    str(Path(sys.modules["csparql"].__file__).parents[1]),
                                    str(settings.warehouse.root)]

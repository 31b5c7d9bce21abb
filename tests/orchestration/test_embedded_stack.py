"""How ``csparql stack`` wires Airflow to its Spark, checked without starting anything: with the default
``--spark connect`` every task's Spark is the stack's Connect server, reached through the Airflow connection
the product's operators resolve (token included); ``--spark local`` keeps a Spark inside each task; a mode the
stack cannot run is refused with one line. (``test_stack_command`` runs the real stack.)"""

from __future__ import annotations

import pytest

from csparql.cli import main
from csparql.deployment import Settings
from csparql.orchestration.embedded import EmbeddedStack
from csparql.spark.connect_server import ConnectServer


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

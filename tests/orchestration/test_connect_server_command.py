"""``csparql connect-server``: the Spark Connect server for an Airflow of one's own, run as a user runs it (a
new process, stopped with Ctrl-C), and the ``airflow connections add`` command it prints: the connection it
describes, resolved by the Spark provider's hook as the operators resolve it, reaches the server, token
included."""

from __future__ import annotations

import shlex
import signal
import subprocess
import sys
import time

import psutil
import pytest

from orchestration.spark_cluster import free_port, spark_environment

pytestmark = [pytest.mark.spark, pytest.mark.airflow]

# A client as an Airflow task is one: the connection the printed command adds, its URL from the provider's
# hook (csparql.orchestration.connections.connect_url), one request through a Connect session.
_CLIENT = """
import os
import sys

from airflow.models import Connection
from csparql.deploy.settings import Settings
from csparql.orchestration.connections import connect_url
from csparql.runtime.connect_server import close_session
from pyspark.sql.connect.session import SparkSession

conn_id, conn_type, host, port, password = sys.argv[1:]
os.environ[f"AIRFLOW_CONN_{conn_id.upper()}"] = Connection(conn_id=conn_id, conn_type=conn_type, host=host,
                                                          port=int(port), password=password).get_uri()
settings = Settings.from_environment({"CSPARQL_SPARK": "connect", "CSPARQL_SPARK_CONN_ID": conn_id})
session = SparkSession(connection=connect_url(settings))
print("COUNT", session.range(3).count())
close_session(session)
"""


def command_line(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # a launcher's helper that has exited meanwhile
        return ""


def option(arguments: list[str], name: str) -> str:
    return arguments[arguments.index(name) + 1]


def test_the_printed_connection_reaches_the_server_and_ctrl_c_stops_it(tmp_path):
    env = spark_environment(tmp_path)
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    env["CSPARQL_CONNECT_SESSION_TIMEOUT"] = "45s"
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "csparql.cli", "connect-server", "--port", str(port),
                               "--master", "local[1]", "--memory", "1g", "--work", str(tmp_path / "server")],
                              env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              stdin=subprocess.DEVNULL)
    try:
        lines = []
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not any("airflow connections add" in line for line in lines):
            line = server.stdout.readline()
            if not line and server.poll() is not None:
                break
            lines.append(line)
        [command] = [shlex.split(line) for line in lines if "airflow connections add" in line] or [None]
        assert command, "".join(lines)
        conn_id = command[3]
        client = subprocess.run(
            [sys.executable, "-c", _CLIENT, conn_id, option(command, "--conn-type"), option(command, "--conn-host"),
             option(command, "--conn-port"), option(command, "--conn-password")],
            env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL)
        assert client.returncode == 0 and "COUNT 3" in client.stdout, client.stderr[-3000:]
        jvm = [line for line in map(command_line, psutil.Process(server.pid).children(recursive=True))
               if "SparkConnectServer" in line]
        assert jvm and "spark.connect.session.manager.defaultSessionTimeout=45000ms" in jvm[0]  # the setting's
    finally:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            raise
    assert server.returncode == 0
    assert "stopped" in server.stderr.read()

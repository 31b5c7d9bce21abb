"""A real Spark Connect server on 127.0.0.1 for tests, and one window evaluated through it in a fresh process.

``connect_server(work)`` starts ``SparkConnectServer`` with the pyspark wheel's ``spark-submit`` (``local[1]``,
1 GB driver) on a free port, as its own process group, waits until the port accepts connections, yields the
client URL ``sc://127.0.0.1:PORT`` and stops the group on exit (SIGTERM, SIGKILL after a grace period).

A Connect client sends only ``spark.sql.*`` settings, so the server is started with every other setting the
engine's results depend on — the driver's UTC zone and quiet log4j configuration, the raw local file system,
no ``_SUCCESS`` files — taken from ``csparql.spark.session.session_settings``, as a local session gets them.

``evaluate_over_connect(url, ...)`` evaluates one window with ``Engine.evaluate`` on a session from
``spark_session(url)`` in a new Python process: a process that holds a classic SparkSession (the test suite's)
cannot also open a Connect one (PySpark's builder refuses with ``SESSION_ALREADY_EXIST``).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from csparql.spark.session import session_settings
from orchestration.spark_cluster import HOST, VENV_BIN, RESULT_PREFIX, _Daemon, _tail, free_port, spark_environment

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SERVER_MASTER = "local[1]"
DRIVER_MEMORY = "1g"


class ConnectServerError(RuntimeError):
    """The server did not come up, or an evaluation through it failed; the message carries the log tail."""


def server_settings(master: str = SERVER_MASTER) -> dict[str, str]:
    """The ``--conf`` settings of the server: what a local session of the project gets, less the driver
    memory (given as ``--driver-memory``)."""
    settings = session_settings(master, app_name="csparql-connect", launch=True)
    settings.pop("spark.driver.memory", None)
    return settings


def server_command(port: int) -> list[str]:
    command = [
        str(VENV_BIN / "spark-submit"),
        "--class", SERVER_CLASS,
        "--master", SERVER_MASTER,
        "--driver-memory", DRIVER_MEMORY,
        "--conf", f"spark.connect.grpc.binding.address={HOST}",
        "--conf", f"spark.connect.grpc.binding.port={port}",
        "--conf", "spark.ui.enabled=false",
    ]
    for key, value in server_settings().items():
        command += ["--conf", f"{key}={value}"]
    return command


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


@contextmanager
def connect_server(work: Path, timeout: float = 120.0) -> Iterator[str]:
    """A Spark Connect server on 127.0.0.1; yields its client URL ``sc://127.0.0.1:PORT``."""
    work = Path(work)
    env = spark_environment(work)
    # The launcher sizes a Connect server's heap by SPARK_DAEMON_MEMORY (as a Thrift server's) before
    # --driver-memory.
    env.pop("SPARK_DAEMON_MEMORY", None)
    logs = Path(env["SPARK_LOG_DIR"])
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / "connect-server.log"
    port = free_port()
    with open(log, "wb") as out:
        process = subprocess.Popen(
            server_command(port), env=env, cwd=work, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group: stopping it stops the launcher and the JVM
        )
    server = _Daemon("connect-server", process, log)
    try:
        deadline = time.monotonic() + timeout
        while not _accepts(port):
            if process.poll() is not None or time.monotonic() > deadline:
                why = (f"it exited with status {process.returncode}" if process.poll() is not None
                       else f"port {port} not accepting connections after {timeout:.0f} s")
                raise ConnectServerError(f"the Spark Connect server did not start: {why}\n"
                                         f"--- server log ({log}):\n{_tail(log)}")
            time.sleep(0.5)
        yield f"sc://{HOST}:{port}"
    finally:
        server.stop(grace=15)


# Run in a fresh interpreter: compile the query file, evaluate one window through the Connect server, print
# the outcome as one CSPARQL_RESULT line.
_EVALUATE = """
import json, sys
from pathlib import Path
from csparql.compiler import compile_query
from csparql.engine.runner import Engine
from csparql.spark.session import spark_session
from csparql.storage.warehouse import Warehouse

url, query, name, at, warehouse = sys.argv[1:6]
plan = compile_query(Path(query).read_text(encoding="utf-8"), query)
spark = spark_session(url)
evaluation = Engine(Warehouse(Path(warehouse)), spark).evaluate(plan, int(at), name)
record = {"connect": type(spark).__module__, "window_start": evaluation.window.start,
          "window_end": evaluation.window.end, "rows_written": evaluation.rows_written,
          "run_id": evaluation.run_id, "duration_ms": evaluation.duration_ms}
print(RESULT_PREFIX + json.dumps(record), flush=True)
spark.stop()
"""


def evaluate_over_connect(url: str, query: Path, name: str, at: int, warehouse: Path, work: Path,
                          timeout: float = 240.0) -> dict:
    """Evaluate the window of ``query`` at ``at`` through the server at ``url`` in a new Python process,
    writing its results and run into ``warehouse``; the process's CSPARQL_RESULT record."""
    env = spark_environment(Path(work))
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    code = f"RESULT_PREFIX = {RESULT_PREFIX!r}\n{_EVALUATE}"
    try:
        finished = subprocess.run([sys.executable, "-c", code, url, str(query), name, str(at), str(warehouse)],
                                  env=env, cwd=work, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as error:
        raise ConnectServerError(f"the evaluation over {url} did not finish in {timeout:.0f} s\n"
                                 f"{(error.stderr or '')[-3000:]}") from None
    record = None
    for line in finished.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            record = json.loads(line[len(RESULT_PREFIX):])
    if finished.returncode != 0 or record is None:
        raise ConnectServerError(f"the evaluation over {url} exited with status {finished.returncode}\n"
                                 f"--- stdout:\n{finished.stdout[-3000:]}\n--- stderr:\n{finished.stderr[-4000:]}")
    return record

"""A real Spark Connect server on 127.0.0.1 for tests, and windows evaluated through it in a fresh process.

``connect_server(work)`` starts ``SparkConnectServer`` with the pyspark wheel's ``spark-submit`` (``local[1]``,
1 GB driver) on a free port as its own process group, waits until the port accepts connections, yields the
client URL ``sc://127.0.0.1:PORT`` and stops the group on exit (SIGTERM, SIGKILL after a grace period).
``ConnectServer`` takes the same steps one at a time (``start``, ``wait``, ``stop``): a test can start it early.

A Connect client sends only ``spark.sql.*`` settings, so the server is started with every other setting the
engine's results depend on — the driver's UTC zone and quiet log4j configuration, the raw local file system,
no ``_SUCCESS`` files — taken from ``csparql.spark.session.session_settings``, as a local session gets them.

``evaluate_over_connect(url, ...)`` evaluates windows with ``Engine.evaluate`` on a session from
``spark_session(url)`` in a new Python process: a process that holds a classic SparkSession (the test suite's)
cannot also open a Connect one (PySpark's builder refuses with ``SESSION_ALREADY_EXIST``, and
``spark_session(url)`` returns the active classic session).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from csparql.spark.session import session_settings
from orchestration.spark_cluster import HOST, RESULT_PREFIX, VENV_BIN, _Daemon, _tail, free_port, spark_environment

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
SERVER_MASTER = "local[1]"
DRIVER_MEMORY = "1g"


class ConnectServerError(RuntimeError):
    """The server did not come up, or an evaluation through it failed; the message carries the log tail."""


def server_settings(master: str = SERVER_MASTER) -> dict[str, str]:
    """The ``--conf`` settings of the server: what a local session of the project gets, less the driver
    memory (given as ``--driver-memory``), with the JIT tuned for a short life."""
    settings = session_settings(master, app_name="csparql-connect", launch=True)
    settings.pop("spark.driver.memory", None)
    # A short-lived test JVM spends much of its CPU in the C2 JIT compiler: C1 alone serves a test faster.
    settings["spark.driver.extraJavaOptions"] += " -XX:TieredStopAtLevel=1"
    return settings


def server_command(port: int) -> list[str]:
    settings = {
        **server_settings(),
        "spark.connect.grpc.binding.address": HOST,
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
    }
    command = [str(VENV_BIN / "spark-submit"), "--class", SERVER_CLASS, "--master", SERVER_MASTER,
               "--driver-memory", DRIVER_MEMORY]
    for key, value in settings.items():
        command += ["--conf", f"{key}={value}"]
    return command


def _accepts(port: int) -> bool:
    try:
        with socket.create_connection((HOST, port), timeout=1):
            return True
    except OSError:
        return False


class ConnectServer:
    """A Spark Connect server process on 127.0.0.1 (``start``, ``wait``, ``stop``); its logs under ``work``."""

    def __init__(self, work: Path):
        self.work = Path(work)
        self.port = free_port()
        self.url = f"sc://{HOST}:{self.port}"
        self.log = self.work / "logs" / "connect-server.log"
        self._daemon: _Daemon | None = None

    def start(self) -> None:
        """Start the server (as its own process group, so stopping it stops the launcher and the JVM)."""
        env = spark_environment(self.work)
        # The launcher sizes a Connect server's heap by SPARK_DAEMON_MEMORY (as a Thrift server's) before
        # --driver-memory.
        env.pop("SPARK_DAEMON_MEMORY", None)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as out:
            process = subprocess.Popen(server_command(self.port), env=env, cwd=self.work, stdout=out,
                                       stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self._daemon = _Daemon("connect-server", process, self.log)

    def wait(self, timeout: float = 120.0) -> str:
        """Wait until the server accepts connections; its URL ``sc://127.0.0.1:PORT``."""
        process = self._daemon.process
        deadline = time.monotonic() + timeout
        while not _accepts(self.port):
            if process.poll() is not None or time.monotonic() > deadline:
                why = (f"it exited with status {process.returncode}" if process.poll() is not None
                       else f"port {self.port} not accepting connections after {timeout:.0f} s")
                raise ConnectServerError(f"the Spark Connect server did not start: {why}\n"
                                         f"--- server log ({self.log}):\n{_tail(self.log)}")
            time.sleep(0.5)
        return self.url

    def stop(self) -> None:
        """SIGTERM to the server's process group, SIGKILL after 15 s."""
        if self._daemon is not None:
            self._daemon.stop(grace=15)


@contextmanager
def connect_server(work: Path, timeout: float = 120.0) -> Iterator[str]:
    """A Spark Connect server on 127.0.0.1; yields its client URL ``sc://127.0.0.1:PORT`` once it accepts
    connections, and stops it on exit."""
    server = ConnectServer(work)
    server.start()
    try:
        yield server.wait(timeout)
    finally:
        server.stop()


# Run in a fresh interpreter: compile each query file, evaluate its window through the Connect server (results
# and run written), print one CSPARQL_RESULT line per evaluation.
_EVALUATE = """
import json, sys
from pathlib import Path
from csparql.compiler import compile_query
from csparql.engine.runner import Engine
from csparql.spark.session import spark_session
from csparql.storage.warehouse import Warehouse

url, warehouse, at, *pairs = sys.argv[1:]
spark = spark_session(url)
engine = Engine(Warehouse(Path(warehouse)), spark)
for query, name in zip(pairs[::2], pairs[1::2]):
    plan = compile_query(Path(query).read_text(encoding="utf-8"), query)
    evaluation = engine.evaluate(plan, int(at), name)
    record = {"name": name, "session": type(spark).__module__, "window_start": evaluation.window.start,
              "window_end": evaluation.window.end, "rows_written": evaluation.rows_written,
              "run_id": evaluation.run_id, "duration_ms": evaluation.duration_ms}
    print(RESULT_PREFIX + json.dumps(record), flush=True)
spark.stop()
"""


def evaluate_over_connect(url: str, queries: Sequence[tuple[Path, str]], at: int, warehouse: Path, work: Path,
                          timeout: float = 240.0) -> dict[str, dict]:
    """Evaluate the window at ``at`` of each (query file, result name) through the server at ``url``, in one
    new Python process, writing results and runs into ``warehouse``; the CSPARQL_RESULT record of each name."""
    env = spark_environment(Path(work))
    for key in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "PYSPARK_GATEWAY_PORT"):
        env.pop(key, None)
    arguments = [url, str(warehouse), str(at)]
    for query, name in queries:
        arguments += [str(query), name]
    code = f"RESULT_PREFIX = {RESULT_PREFIX!r}\n{_EVALUATE}"
    try:
        finished = subprocess.run([sys.executable, "-c", code, *arguments], env=env, cwd=work, capture_output=True,
                                  text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as error:
        stderr = error.stderr.decode(errors="replace") if isinstance(error.stderr, bytes) else error.stderr or ""
        raise ConnectServerError(f"the evaluation over {url} did not finish in {timeout:.0f} s\n"
                                 f"{stderr[-3000:]}") from None
    records = {}
    for line in finished.stdout.splitlines():
        if line.startswith(RESULT_PREFIX):
            record = json.loads(line[len(RESULT_PREFIX):])
            records[record["name"]] = record
    if finished.returncode != 0 or len(records) != len(queries):
        raise ConnectServerError(f"the evaluation over {url} exited with status {finished.returncode}\n"
                                 f"--- stdout:\n{finished.stdout[-3000:]}\n--- stderr:\n{finished.stderr[-4000:]}")
    return records

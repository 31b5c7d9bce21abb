"""One warm Spark for a machine: a local Spark Connect server that evaluations and ingests reach as clients.

``ConnectServer(work, port)`` runs ``org.apache.spark.sql.connect.service.SparkConnectServer`` with the pyspark
wheel's ``spark-submit`` (``local[2]`` and a 2 GB driver by default: sized for a small machine) on
``127.0.0.1:port``, as its own process group, logging to ``work/spark-connect.log``. ``start`` returns at once
(the JVM takes 10–30 s to come up); ``wait_until_answering`` returns once the server has run a real request
(``range(1).count()`` through a Connect session); ``restart_if_exited`` starts it again after it died; ``stop``
stops the launcher, the JVM and its Python workers.

What the server is told, since a Connect client can only set ``spark.sql.*`` settings of its session: every
other setting the engine's results and table layout depend on, as a local session gets them
(``csparql.runtime.session.session_settings``: the driver's UTC zone, the raw local file system, no
``_SUCCESS`` files, quiet log4j), and the Python its workers run: this interpreter, with the folder
holding this csparql package first on ``PYTHONPATH``, so that the ingest's parsers (``mapInArrow`` over ``csparql.engine``
functions) import the same csparql as the client. Its files are read and written by path, so clients must
share its file system (they do: it runs on this machine).

Only clients holding the server's token get in (``spark.connect.authenticate.token``, given to the server in
its environment, never on its command line): anyone who can reach a Connect server runs code as its user.
With a token, pyspark's client speaks to ``localhost`` over gRPC's local credentials, so the client URL names
``localhost`` (``url``), not 127.0.0.1.

No Airflow here: ``csparql.stack.embedded`` supervises the server beside the Airflow components.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from importlib import resources
from pathlib import Path

import pyspark

from csparql.runtime.session import session_settings

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
HOST = "127.0.0.1"
DEFAULT_PORT = 15002
DEFAULT_MASTER = "local[2]"
SESSION_TIMEOUT_SECONDS = 600.0
"""How long the server keeps a session nobody uses, by default (``[csparql] connect_session_timeout``). Airflow
tasks end without releasing theirs, so each would otherwise hold its analyzer and caches for Spark's default of
an hour. A client whose session the server dropped opens a new one (``csparql.runtime.session``)."""
SPARK_HOME = Path(pyspark.__file__).resolve().parent


def package_folder() -> Path:
    """The folder the running csparql package was imported from (``site-packages`` of an installed wheel),
    which the server's Python workers put first on their path."""
    return Path(str(resources.files("csparql"))).parent

TOKEN_VARIABLE = "SPARK_CONNECT_AUTHENTICATE_TOKEN"
CLIENT_MODE_VARIABLES = ("SPARK_CONNECT_MODE_ENABLED", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE")
"""What pyspark sets in a process's environment once it opens a Connect session: it makes every later
PySpark call in the process (and in processes started from it) a Connect call."""


class ConnectServerError(RuntimeError):
    """The server did not come up or does not answer; the message says why and carries its log's tail."""


def port_in_use(port: int, host: str = HOST) -> bool:
    """Whether something on this machine already listens on ``host:port``."""
    return _accepts(port, host)


def driver_memory() -> str:
    """The server's driver memory: ``CSPARQL_DRIVER_MEMORY``, else 2g (as a local session's)."""
    return os.environ.get("CSPARQL_DRIVER_MEMORY") or "2g"


def server_settings(port: int, master: str = DEFAULT_MASTER, jvm_options: str = "",
                    session_timeout: float = SESSION_TIMEOUT_SECONDS) -> dict[str, str]:
    """The ``--conf`` settings of a server on ``127.0.0.1:port``: what a local session of the project gets
    (``session_settings``) less the driver memory (given as ``--driver-memory``), the gRPC address, the idle
    timeout of a session (``session_timeout`` seconds, looked for a tenth of it apart: between 1 and 30 s),
    and a JVM that exits on running out of memory (so that its supervisor starts it again) with
    ``jvm_options`` added."""
    timeout_ms = max(1000, int(session_timeout * 1000))
    settings = session_settings(master, app_name="csparql-connect", launch=True)
    settings.pop("spark.driver.memory", None)
    settings["spark.driver.extraJavaOptions"] = " ".join(
        filter(None, [settings["spark.driver.extraJavaOptions"], "-XX:+ExitOnOutOfMemoryError", jvm_options]))
    settings.update({
        "spark.connect.grpc.binding.address": HOST,
        "spark.connect.grpc.binding.port": str(port),
        "spark.connect.session.manager.defaultSessionTimeout": f"{timeout_ms}ms",
        "spark.connect.session.manager.maintenanceInterval": f"{min(30_000, max(1000, timeout_ms // 10))}ms",
        "spark.ui.enabled": "false",
    })
    return settings


def server_command(port: int, master: str = DEFAULT_MASTER, memory: str | None = None,
                   jvm_options: str = "", session_timeout: float = SESSION_TIMEOUT_SECONDS) -> list[str]:
    """The ``spark-submit`` command line of a server (no secret in it: the token goes in the environment)."""
    command = [str(Path(sys.executable).with_name("spark-submit")), "--class", SERVER_CLASS, "--master", master,
               "--name", "csparql-connect", "--driver-memory", memory or driver_memory()]
    for key, value in server_settings(port, master, jvm_options, session_timeout).items():
        command += ["--conf", f"{key}={value}"]
    return command


def server_environment(token: str | None) -> dict[str, str]:
    """The server's environment: the wheel as SPARK_HOME with its own configuration folder, as the local
    sessions have (the wheel ships none, so no spark-defaults.conf or spark-env.sh from elsewhere: a caller's
    SPARK_CONF_DIR is dropped), everything on 127.0.0.1, UTC, this interpreter for Python workers with the
    folder of this csparql package first on their path, and the token."""
    env = dict(os.environ)
    for key in (*CLIENT_MODE_VARIABLES, "PYSPARK_SUBMIT_ARGS", "PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET",
                "SPARK_CONF_DIR", TOKEN_VARIABLE):
        env.pop(key, None)
    # The launcher sizes a Connect server's heap by SPARK_DAEMON_MEMORY (as a Thrift server's) before
    # --driver-memory.
    env.pop("SPARK_DAEMON_MEMORY", None)
    path = [str(package_folder()), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env.update({
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_HOSTNAME": "localhost",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "PYTHONPATH": os.pathsep.join(dict.fromkeys(path)),
        "TZ": "UTC",
    })
    if token:
        env[TOKEN_VARIABLE] = token
    return env


class ConnectServer:
    """A Spark Connect server on ``127.0.0.1:port`` (see the module docstring); ``work`` holds its
    configuration folder and is its working directory."""

    def __init__(self, work: Path, port: int = DEFAULT_PORT, master: str = DEFAULT_MASTER, memory: str | None = None,
                 log: Path | None = None, token: str | None = "", jvm_options: str = "",
                 session_timeout: float = SESSION_TIMEOUT_SECONDS):
        self.work = Path(work)
        self.port = port
        self.master = master
        self.memory = memory or driver_memory()
        self.log = Path(log) if log else self.work / "spark-connect.log"
        self.token = secrets.token_urlsafe(24) if token == "" else token  # "": a fresh one; None: no token
        self.jvm_options = jvm_options
        self.session_timeout = session_timeout  # seconds a session nobody uses is kept
        self.process: subprocess.Popen | None = None
        self._asking: threading.Thread | None = None  # the request of answers_within

    @property
    def url(self) -> str:
        """The client URL: ``sc://localhost:PORT/;token=…`` (``sc://127.0.0.1:PORT`` without a token)."""
        if self.token:
            return f"sc://localhost:{self.port}/;token={self.token}"
        return f"sc://{HOST}:{self.port}"

    @property
    def address(self) -> str:
        return f"{HOST}:{self.port}"

    def command(self) -> list[str]:
        return server_command(self.port, self.master, self.memory, self.jvm_options, self.session_timeout)

    def start(self) -> None:
        """Start the server as its own process group (so stopping it stops the launcher and the JVM);
        returns at once."""
        self.work.mkdir(parents=True, exist_ok=True)
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.process = subprocess.Popen(
                self.command(), env=server_environment(self.token), cwd=self.work, stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)

    def exit_code(self) -> int | None:
        """The server's exit code once it has exited (negative: killed by that signal); None while it runs."""
        return None if self.process is None else self.process.poll()

    def wait_until_answering(self, timeout: float = 180.0) -> str:
        """Wait until the server runs a request; its client URL. ``ConnectServerError`` when it exits first
        or does not answer within ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            code = self.exit_code()
            if code is not None:
                raise ConnectServerError(f"the Spark Connect server exited with code {code}\n{self.log_tail()}")
            if _accepts(self.port):
                try:
                    self.ask()
                    return self.url
                except Exception as error:  # pyspark raises several kinds while the server finishes starting
                    last = f"it accepts connections but a request failed: {' '.join(str(error).split())[:300]}"
            else:
                last = f"port {self.port} accepts no connection"
            if time.monotonic() > deadline:
                raise ConnectServerError(f"the Spark Connect server did not answer within {timeout:.0f} s ({last})"
                                         f"\n{self.log_tail()}")
            time.sleep(0.5)

    def answers(self) -> bool:
        """Whether the server accepts connections and runs a request now."""
        if not _accepts(self.port):
            return False
        try:
            self.ask()
        except Exception:  # pyspark raises several kinds while the server finishes starting
            return False
        return True

    def answers_within(self, timeout: float = 10.0) -> bool:
        """Whether the server accepts connections and runs a request within ``timeout`` seconds: the request is
        made in a thread of its own, so a server that hangs holds up no caller; while a request of an earlier
        call has not come back, the server does not answer."""
        if self._asking is not None and self._asking.is_alive():
            return False
        if not _accepts(self.port):
            return False
        answered: list[bool] = []

        def ask() -> None:
            try:
                self.ask()
                answered.append(True)
            except Exception:  # noqa: BLE001 - any failure counts as no answer
                pass

        self._asking = threading.Thread(target=ask, name="spark-connect-health", daemon=True)
        self._asking.start()
        self._asking.join(timeout)
        return bool(answered)

    def ask(self) -> None:
        """One real request through a new Connect session, closed after: ``spark.range(1).count()``. Leaves
        this process's environment as it was (pyspark would switch the whole process to Connect)."""
        from pyspark.sql.connect.session import SparkSession as ConnectSession

        with connect_mode_left_alone():
            session = ConnectSession(connection=self.url)
            try:
                if session.range(1).count() != 1:
                    raise ConnectServerError("the Spark Connect server counted range(1) wrong")
            finally:
                close_session(session)

    def restart_if_exited(self) -> int | None:
        """Start the server again if it has exited (what is left of its process group is killed first);
        returns the exit code it had, None when it is running."""
        code = self.exit_code()
        if code is None:
            return None
        _signal_group(self.process.pid, signal.SIGKILL)
        self.start()
        return code

    def stop(self, grace: float = 20.0) -> None:
        """SIGTERM to the server's process group, SIGKILL after ``grace`` seconds. Its Python workers (a group
        of their own) exit with the JVM: the JVM stops them, or they see its end of their pipe close."""
        if self.process is None:
            return
        if self.process.poll() is None:
            _signal_group(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                pass
        _signal_group(self.process.pid, signal.SIGKILL)  # the launcher or anything else left in the group
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass

    def log_tail(self, lines: int = 25) -> str:
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return f"(no log at {self.log})"
        return f"--- {self.log}:\n" + "\n".join(text[-lines:])


def close_session(session) -> None:
    """Close a Connect session's channel and leave the session to the server, which drops it after
    its idle timeout: releasing it at once races pyspark's own release of the session's last requests,
    which the server then logs as errors."""
    session.release_session_on_close = False
    session.stop()


@contextmanager
def connect_mode_left_alone():
    """Restores the variables pyspark sets in ``os.environ`` when it opens a Connect session."""
    saved = {key: os.environ.get(key) for key in CLIENT_MODE_VARIABLES}
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _accepts(port: int, host: str = HOST) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def _signal_group(group: int, sig: int) -> None:
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass

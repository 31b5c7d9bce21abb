"""A real Spark standalone cluster on 127.0.0.1 for tests, and spark-submit of the packaged ``csparql/jobs/evaluate_window.py``.

``standalone_cluster(tmp)`` starts one master and one worker (1 core, 1 GB) on free ports with the pyspark
wheel's ``spark-class`` (the wheel ships no ``sbin/start-*.sh``), waits until the master lists the worker
ALIVE, yields the master URL and stops both process groups — executors and their Python workers included —
on exit. ``submit_evaluation(url, ...)`` runs the job in client mode, the driver bound to 127.0.0.1, and
returns its ``CSPARQL_RESULT`` record.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

import pyspark

from csparql.runtime.session import LOG4J_CONFIGURATION
from csparql.jobs import job_path
from csparql.jobs.evaluate_window import job_arguments

VENV_BIN = Path(sys.executable).parent
SPARK_HOME = Path(pyspark.__file__).resolve().parent
EVALUATE_WINDOW = job_path()
RESULT_PREFIX = "CSPARQL_RESULT "
HOST = "127.0.0.1"
DRIVER_JAVA_OPTIONS = f"-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{LOG4J_CONFIGURATION}"


class ClusterError(RuntimeError):
    """The cluster did not come up, or a submitted application failed; the message carries the log tail."""


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def spark_environment(work: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every Spark process started here: ``base`` (this process's environment unless
    given) with the wheel as SPARK_HOME, everything on 127.0.0.1, this interpreter for Python workers, UTC, and
    the work and log folders under ``work``; with the wheel's own configuration folder (it ships none: no
    spark-defaults.conf or spark-env.sh from elsewhere), as the project's sessions and Connect servers have."""
    env = {
        **(os.environ if base is None else base),
        "SPARK_HOME": str(SPARK_HOME),
        "SPARK_LOCAL_IP": HOST,
        "SPARK_LOCAL_HOSTNAME": "localhost",
        "SPARK_WORKER_DIR": str(work / "worker"),
        "SPARK_LOG_DIR": str(work / "logs"),
        "SPARK_PID_DIR": str(work),
        "SPARK_DAEMON_MEMORY": "256m",
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
        "TZ": "UTC",
    }
    for name in ("SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS", "CSPARQL_SPARK_MASTER"):
        env.pop(name, None)
    return env


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return f"({path} missing)"
    return "\n".join(text[-lines:])


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen
    log: Path

    def stop(self, grace: float = 10.0) -> None:
        """SIGTERM to the daemon's process group (its executors too), SIGKILL after ``grace`` seconds."""
        if not _group_alive(self.process):
            return
        _signal_group(self.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and _group_alive(self.process):
            time.sleep(0.2)
        if _group_alive(self.process):
            _signal_group(self.process.pid, signal.SIGKILL)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        pass


def _group_alive(process: subprocess.Popen) -> bool:
    """Whether any process of the group ``process`` leads is left (the leader is reaped first, as a zombie
    would otherwise keep the group alive)."""
    process.poll()
    try:
        os.killpg(process.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _start(name: str, arguments: Sequence[str], env: dict[str, str], logs: Path,
           hidden: Sequence[Path] = ()) -> _Daemon:
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{name}.log"
    command = [str(VENV_BIN / "spark-class"), *arguments]
    if hidden:
        mounts = " && ".join(f"mount -t tmpfs csparql-hidden {shlex.quote(str(folder))}" for folder in hidden)
        command = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
                   f'{mounts} && exec "$@"', "worker", *command]
    with open(log, "wb") as out:
        process = subprocess.Popen(
            command,
            env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,  # its own process group, so stopping it stops its executors too
        )
    return _Daemon(name, process, log)


def _master_state(ui_port: int) -> dict | None:
    try:
        with urllib.request.urlopen(f"http://{HOST}:{ui_port}/json/", timeout=2) as response:
            return json.load(response)
    except (OSError, ValueError, urllib.error.URLError):
        return None


@contextmanager
def standalone_cluster(work: Path, timeout: float = 90.0, worker_memory: str = "1g", workers: int = 1,
                       hidden: Sequence[Path] = (), environment: Mapping[str, str] | None = None) -> Iterator[str]:
    """A master and ``workers`` workers (1 core each) on 127.0.0.1, each worker with a working folder of its
    own (``work/worker-N`` from the second on); yields the master URL ``spark://127.0.0.1:PORT``. The workers,
    and so their executors, run where the ``hidden`` folders are empty (an empty file system mounted over
    each, in a mount namespace of their own: ``hides_folders``), as on machines that share no disk with
    the driver. The daemons' environment is built on ``environment`` (this process's unless given)."""
    work = Path(work)
    env = spark_environment(work, environment)
    logs = Path(env["SPARK_LOG_DIR"])
    port, ui_port = free_port(), free_port()
    url = f"spark://{HOST}:{port}"
    with ExitStack() as stack:
        master = _start("master", ["org.apache.spark.deploy.master.Master", "--host", HOST, "--port", str(port),
                                   "--webui-port", str(ui_port)], env, logs)
        stack.callback(master.stop)
        daemons = [master]
        for number in range(workers):
            folder = Path(env["SPARK_WORKER_DIR"]) if number == 0 else work / f"worker-{number + 1}"
            folder.mkdir(parents=True, exist_ok=True)
            worker = _start(f"worker-{number + 1}" if number else "worker",
                            ["org.apache.spark.deploy.worker.Worker", url, "--host", HOST, "--cores", "1",
                             "--memory", worker_memory, "--webui-port", str(free_port()), "--work-dir", str(folder)],
                            {**env, "SPARK_WORKER_DIR": str(folder)}, logs, hidden)
            stack.callback(worker.stop)  # runs first: the workers go before their master
            daemons.append(worker)
        deadline = time.monotonic() + timeout
        while True:
            state = _master_state(ui_port)
            if state is not None and _alive_workers(state) >= workers:
                break
            dead = [d for d in daemons if d.process.poll() is not None]
            if dead or time.monotonic() > deadline:
                if dead:
                    why = f"the {dead[0].name} exited with status {dead[0].process.returncode}"
                else:
                    why = f"fewer than {workers} worker(s) ALIVE after {timeout:.0f} s"
                raise ClusterError(
                    f"the standalone cluster at {url} did not start: {why}\n" + "\n".join(
                        f"--- {d.name} log ({d.log}):\n{_tail(d.log)}" for d in daemons))
            time.sleep(0.5)
        yield url


def hides_folders() -> bool:
    """Whether this machine lets a process run in a mount namespace of its own with folders hidden (``unshare``
    as root), as ``standalone_cluster``'s ``hidden`` needs."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            "mount -t tmpfs csparql-hidden /mnt"], capture_output=True, timeout=30)
    return probe.returncode == 0


def _alive_workers(state: dict) -> int:
    if "aliveworkers" in state:
        return int(state["aliveworkers"])
    return sum(1 for w in state.get("workers", ()) if w.get("state") == "ALIVE")


def spark_submit(master: str, application: Path, arguments: Sequence[str], work: Path, name: str = "csparql",
                 timeout: float = 240.0) -> subprocess.CompletedProcess:
    """``spark-submit --deploy-mode client`` of ``application`` with small memory, the driver on 127.0.0.1,
    no UI, quiet logs; the completed process with its output (not checked)."""
    work = Path(work)
    env = spark_environment(work)
    command = [
        str(VENV_BIN / "spark-submit"),
        "--master", master,
        "--deploy-mode", "client",
        "--name", name,
        "--driver-memory", "512m",
        "--executor-memory", "512m",
        "--total-executor-cores", "1",
        # As --conf (what SparkSubmitHook can pass): in client mode the launcher applies it to the driver JVM.
        "--conf", f"spark.driver.extraJavaOptions={DRIVER_JAVA_OPTIONS}",
        "--conf", f"spark.driver.host={HOST}",
        "--conf", f"spark.driver.bindAddress={HOST}",
        "--conf", "spark.ui.enabled=false",
        "--conf", "spark.sql.shuffle.partitions=2",
        "--conf", f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}",
        "--conf", "spark.executorEnv.TZ=UTC",
        str(application),
        *arguments,
    ]
    process = subprocess.Popen(command, env=env, cwd=work, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # The driver JVM and its Python process share the group: stop them all.
        _Daemon("spark-submit", process, Path(os.devnull)).stop(grace=5)
        stdout, stderr = process.communicate()
        raise ClusterError(f"spark-submit of {application} did not finish in {timeout:.0f} s\n{stdout[-3000:]}"
                           f"\n{stderr[-3000:]}") from None
    return subprocess.CompletedProcess(command, process.returncode, stdout, stderr)


def result_record(output: str) -> dict | None:
    """The CSPARQL_RESULT record in the job's output, None without one."""
    for line in output.splitlines():
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    return None


def submit_evaluation(master: str, query: Path, name: str, at: int, warehouse: Path, work: Path,
                      complete: bool | None = None) -> dict:
    """Evaluate one window on ``master`` through spark-submit of evaluate_window.py; its CSPARQL_RESULT."""
    finished = spark_submit(master, EVALUATE_WINDOW, job_arguments(query, name, at, warehouse, complete=complete), work,
                            name=f"csparql-{name}")
    record = result_record(finished.stdout)
    if finished.returncode != 0 or record is None:
        raise ClusterError(
            f"spark-submit of {EVALUATE_WINDOW.name} exited with status {finished.returncode}"
            + ("" if record is None else " after printing its result")
            + f"\n--- stdout:\n{finished.stdout[-3000:]}\n--- stderr:\n{finished.stderr[-3000:]}"
        )
    return record

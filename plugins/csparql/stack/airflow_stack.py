"""The embedded Airflow stack: scheduler, DAG processor, triggerer and api-server on loopback, SQLite and the
LocalExecutor, supervised by this process (``csparql stack``, and the end-to-end tests).

Why not ``airflow standalone``: it does not stop cleanly on Ctrl-C (its LocalExecutor workers outlive it), and
it prints the login only in some cases. Here each component runs in its own process group, is stopped with
SIGTERM (then SIGKILL after a grace period), and the login is fixed by a passwords file written before start.
This module imports no Airflow: it drives the ``airflow`` command and the REST API.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from csparql.deploy.settings import OPTIONS, Settings
from csparql.core.windows import parse_instant

COMPONENTS = {
    "api-server": ["api-server"],
    "scheduler": ["scheduler", "--skip-serve-logs"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer", "--skip-serve-logs"],
}
"""Each component's arguments to the ``airflow`` command."""

LAUNCHERS = {"dag-processor": "csparql.orchestration.dag_processor"}
"""Components run by a module of csparql that runs Airflow's command with a change (``python -m <module>
<arguments>``): the DAG processor without a DAG-file parse per task a trigger ends
(``csparql.orchestration.dag_processor``)."""

ISOLATED_VARIABLES = ("PATH", "HOME", "USER", "LANG", "LC_ALL", "TMPDIR", "JAVA_HOME", "TZ")
"""What an isolated stack's components inherit of this process's environment (``AirflowStack.isolated``)."""

DAG_FOLDER_REFRESH_SECONDS = 5
"""How often the DAG processor lists the DAG folder for new and removed DAG files: a query registered on the
pages has its DAG within seconds. Listing the folder reads no file."""

DAG_FILE_REPARSE_SECONDS = 600
"""How often the DAG processor parses a DAG file that did not change (``min_file_process_interval``; Airflow's
default is 30 s). A changed file is parsed at the processor's next loop (``file_parsing_sort_mode`` =
``modified_time``), and registering or removing a query touches every DAG file it alters
(``csparql.deploy.registry.dependent_dag_files``), so this only bounds how long a change made another way
(a registry file edited by hand without ``csparql register --sync``) takes to show. Each parse is a process
of its own that imports csparql and builds the DAG (seconds of CPU, docs/orchestration.md): parsing 100
unchanged query files every 10 s (the former setting) asked for more CPU than the two parsing processes
have; every 600 s it costs a small share of one core."""

DAGRUNS_PER_LOOP = 512
"""Running DAG runs the scheduler examines per loop (Airflow's default is 20). It examines the runs that are
not backfills first, and every query DAG keeps up to ``MAX_ACTIVE_RUNS`` scheduled runs waiting, deferred, for
their windows: with the default, more than five queries starve every backfill. Keep it above the number of
queries × ``MAX_ACTIVE_RUNS`` plus the backfill runs in flight (docker-compose sets the same)."""


EVALUATION_POOL_DESCRIPTION = "Spark evaluations of windows and revisions (csparql)"
INGEST_POOL_DESCRIPTION = "Spark ingests of landed files (csparql): fresh data never waits behind evaluations"
API_CONNECTION_ID = "csparql_airflow_api"
"""The connection to the stack's own REST API (``[csparql] api_conn_id``), as its service login: through it a
``REGISTER STREAM`` run evaluated on the triggerer records its output stream's Asset event, with no worker."""


def rolled_back(answer: str) -> bool:
    """Whether an api-server's error answer is its "Database error": the request's database transaction failed
    and was rolled back (SQLite busy under load, or refused at once by ``sqlite_settings``), so nothing of the
    request was stored and sending it again cannot make a second copy."""
    try:
        detail = json.loads(answer).get("detail")
    except (ValueError, AttributeError):
        return False
    return isinstance(detail, dict) and detail.get("reason") == "Database error"


class StackError(RuntimeError):
    """The stack could not be set up or did not become healthy; the message says which component and why."""


class NoAnswer(StackError):
    """The api-server did not answer in time."""


class ServerError(StackError):
    """The api-server answered a request with a server error (5xx): on SQLite, mostly a database locked for
    longer than its timeout; the same request may succeed later."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@dataclass
class AirflowStack:
    """One Airflow installation under ``home`` serving ``dags`` on ``http://127.0.0.1:port``."""

    home: Path
    dags: Path
    settings_environment: dict[str, str]
    port: int = 8080
    username: str = "admin"
    password: str = "admin"
    pool_slots: int = 2
    """Slots of the evaluations' pool (``Settings.pool``): Spark evaluations run at once."""
    ingest_pool_slots: int = 2
    """Slots of the ingests' pool (``Settings.ingest_pool``): ingests never wait behind evaluations."""
    extra_environment: dict[str, str] = field(default_factory=dict)
    other_users: dict[str, tuple[str, str]] = field(default_factory=dict)
    """More logins besides the admin: user name → (SimpleAuthManager role, password), e.g. a viewer."""
    service_username: str = "csparql_service"
    """The login of ``API_CONNECTION_ID`` (role ``op``: it may write Asset events); its password is drawn anew
    for every stack object and written with the others at ``set_up``."""
    service_password: str = field(default_factory=lambda: secrets.token_urlsafe(18), repr=False)
    python: Path = field(default_factory=lambda: Path(sys.executable))
    """The interpreter of the environment Airflow is installed in: its ``airflow`` runs every component."""
    isolated: bool = False
    """Whether the components get only the system's basic variables (``ISOLATED_VARIABLES``) instead of this
    process's environment (no ``PYTHONPATH``, ``CSPARQL_*`` or ``AIRFLOW__*`` of the caller), and run in
    ``home`` rather than the caller's working directory: Airflow as a user of the installed package runs it."""
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    restarts: list[tuple[str, int]] = field(default_factory=list)
    _token: str | None = None
    _supervising: threading.Event | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def airflow(self) -> str:
        return str(self.python.with_name("airflow"))

    def command(self, name: str) -> list[str]:
        """The command line of component ``name``."""
        if name in LAUNCHERS:
            return [str(self.python), "-m", LAUNCHERS[name], *COMPONENTS[name][1:]]
        return [self.airflow, *COMPONENTS[name]]

    @property
    def working_directory(self) -> Path | None:
        return self.home if self.isolated else None

    def environment(self) -> dict[str, str]:
        """The environment every component and ``airflow`` command runs with."""
        from csparql.runtime.connect_server import CLIENT_MODE_VARIABLES

        if self.isolated:
            env = {key: value for key, value in os.environ.items() if key in ISOLATED_VARIABLES}
        else:
            env = dict(os.environ)
        for key in CLIENT_MODE_VARIABLES:  # left by a Connect session of this process: not for Airflow's
            env.pop(key, None)
        bin_folder = str(self.python.parent)
        env.update(self.settings_environment)
        env.setdefault("CSPARQL_API_CONN_ID", API_CONNECTION_ID)
        # Airflow's own configuration says what the components use (`airflow config get-value csparql …`): the
        # stack's settings override an AIRFLOW__CSPARQL__* of the caller, a CSPARQL_* of the caller does not
        for option in OPTIONS:
            value = env.get(option.variable)
            if value and option.variable in self.settings_environment:
                env[option.airflow_variable] = value
            elif value:
                env.setdefault(option.airflow_variable, value)
        env.update({
            "AIRFLOW_HOME": str(self.home),
            "AIRFLOW__CORE__DAGS_FOLDER": str(self.dags),
            # The plugin comes through its entry point; a plugins folder is Airflow's own setting.
            "AIRFLOW__CORE__PLUGINS_FOLDER": env.get("AIRFLOW__CORE__PLUGINS_FOLDER") or str(self.home / "plugins"),
            "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": f"sqlite:///{self.home / 'airflow.db'}",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS": "csparql.stack.sqlite_settings.CONNECT_ARGS",
            "AIRFLOW__DATABASE__SQL_ALCHEMY_CONNECT_ARGS_ASYNC": "csparql.stack.sqlite_settings.CONNECT_ARGS",
            "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
            "AIRFLOW__CORE__PARALLELISM": "4",
            # Finish the runs already started before starting more: a task's priority is the tasks upstream of
            # it, so a run's evaluation goes before the waits of runs not yet begun (with Airflow's default,
            # "downstream", every run's wait went first and the first results came last).
            "AIRFLOW__CORE__DEFAULT_TASK_WEIGHT_RULE": "upstream",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": ",".join(
                [f"{self.username}:admin", f"{self.service_username}:op"]
                + [f"{name}:{role}" for name, (role, _) in self.other_users.items()]),
            f"AIRFLOW_CONN_{API_CONNECTION_ID.upper()}": json.dumps(
                {"conn_type": "http", "host": self.url, "login": self.service_username,
                 "password": self.service_password}),
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(self.home / "passwords.json"),
            "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{self.url}/execution/",
            "AIRFLOW__API__HOST": "127.0.0.1",
            "AIRFLOW__API__PORT": str(self.port),
            "AIRFLOW__API__BASE_URL": self.url,
            # A changed DAG file is parsed at once, an unchanged one every DAG_FILE_REPARSE_SECONDS.
            "AIRFLOW__DAG_PROCESSOR__REFRESH_INTERVAL": str(DAG_FOLDER_REFRESH_SECONDS),
            "AIRFLOW__DAG_PROCESSOR__MIN_FILE_PROCESS_INTERVAL": str(DAG_FILE_REPARSE_SECONDS),
            "AIRFLOW__DAG_PROCESSOR__FILE_PARSING_SORT_MODE": "modified_time",
            "AIRFLOW__SCHEDULER__SCHEDULER_HEARTBEAT_SEC": "2",
            "AIRFLOW__SCHEDULER__MAX_DAGRUNS_PER_LOOP_TO_SCHEDULE": str(DAGRUNS_PER_LOOP),
            "AIRFLOW__TRIGGERER__JOB_HEARTBEAT_SEC": "2",
            "AIRFLOW__LOGGING__LOGGING_LEVEL": "INFO",
            "PATH": bin_folder + os.pathsep + env.get("PATH", ""),
            "PYSPARK_PYTHON": str(self.python),
            "PYSPARK_DRIVER_PYTHON": str(self.python),
            "NO_PROXY": "127.0.0.1,localhost",
            "no_proxy": "127.0.0.1,localhost",
        })
        env.update(self.extra_environment)
        return env

    def shell_environment(self) -> str:
        """A shell script of ``export`` lines that gives another shell this installation's ``airflow`` command:
        ``AIRFLOW_HOME``, every ``AIRFLOW__*`` setting the components run with, the csparql settings (with
        ``CSPARQL_SPARK_MASTER``, if the stack gives it, so that ``csparql`` commands there use the stack's
        Spark), and the virtual environment's ``bin`` first on ``PATH``. Airflow connections are left out."""
        import shlex

        env = self.environment()
        keys = sorted(k for k in env if k == "AIRFLOW_HOME" or k.startswith(("AIRFLOW__", "CSPARQL_")))
        lines = ["# The environment of the csparql stack's Airflow: `source` this file, then run `airflow ...`."]
        lines += [f"export {key}={shlex.quote(env[key])}" for key in keys]
        lines.append(f"export PATH={shlex.quote(str(Path(sys.executable).parent))}:\"$PATH\"")
        return "\n".join(lines) + "\n"

    def write_shell_environment(self) -> Path:
        """Write ``shell_environment`` to ``home/env.sh`` (readable by its owner only: it may carry the Spark
        Connect server's token) and return its path."""
        self.home.mkdir(parents=True, exist_ok=True)
        path = self.home / "env.sh"
        path.touch(mode=0o600)
        path.chmod(0o600)
        path.write_text(self.shell_environment(), encoding="utf-8")
        return path

    # set-up

    def run_airflow(self, *arguments: str, timeout: float = 300) -> str:
        """Run one ``airflow`` command to completion; ``StackError`` with its output when it fails."""
        try:
            done = subprocess.run([self.airflow, *arguments], env=self.environment(), capture_output=True,
                                  text=True, timeout=timeout, cwd=self.working_directory)
        except subprocess.TimeoutExpired:
            raise StackError(f"`airflow {' '.join(arguments)}` did not finish within {timeout:.0f} s") from None
        if done.returncode != 0:
            raise StackError(f"`airflow {' '.join(arguments)}` failed:\n{(done.stdout + done.stderr)[-3000:]}")
        return done.stdout

    def set_up(self) -> None:
        """Create the metadata database, the login and the pools of the evaluations and of the ingests
        (idempotent)."""
        self.home.mkdir(parents=True, exist_ok=True)
        passwords = ({self.username: self.password, self.service_username: self.service_password}
                     | {name: secret for name, (_, secret) in self.other_users.items()})
        (self.home / "passwords.json").write_text(json.dumps(passwords), encoding="utf-8")
        self.run_airflow("db", "migrate")
        with sqlite3.connect(self.home / "airflow.db") as database:  # readers no longer block the writer
            database.execute("PRAGMA journal_mode=WAL")
        environment = self.environment()
        settings = Settings.from_environment(environment)
        pool = environment.get("AIRFLOW__CSPARQL__POOL") or settings.pool
        ingest_pool = environment.get("AIRFLOW__CSPARQL__INGEST_POOL") or settings.ingest_pool
        self.run_airflow("pools", "set", pool, str(self.pool_slots), EVALUATION_POOL_DESCRIPTION)
        self.run_airflow("pools", "set", ingest_pool, str(self.ingest_pool_slots), INGEST_POOL_DESCRIPTION)

    # processes

    def start(self, components: Iterable[str] = tuple(COMPONENTS)) -> None:
        """Start each of ``components`` (every one by default) in its own process group, logging to
        ``home/logs/<component>.log``."""
        for name in components:
            if name not in COMPONENTS:
                raise ValueError(f"{name!r} is not a component of the stack: {', '.join(COMPONENTS)}")
            self._start_component(name)

    def _start_component(self, name: str) -> None:
        logs = self.home / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        with open(logs / f"{name}.log", "ab") as log:
            self.processes[name] = subprocess.Popen(
                self.command(name), env=self.environment(), stdout=log, stderr=subprocess.STDOUT,
                cwd=self.working_directory,
                stdin=subprocess.DEVNULL, start_new_session=True,
            )
        # Airflow's components overwrite their command line and environment (setproctitle): record their
        # process groups so that what is left of a stack can be found.
        (self.home / "components.json").write_text(
            json.dumps({n: process.pid for n, process in self.processes.items()}), encoding="utf-8")

    def restart_exited(self) -> list[tuple[str, int]]:
        """Start again every component that has exited (as a process manager would: Airflow's scheduler exits
        on an unexpected database error and expects to be restarted); returns each one's name and exit code."""
        restarted = []
        for name, process in list(self.processes.items()):
            code = process.poll()
            if code is not None:
                _kill_group(process.pid)  # what the component had started: its task runners, its workers
                self._start_component(name)
                restarted.append((name, code))
        return restarted

    def supervise_in_background(self, interval: float = 2.0) -> None:
        """Restart every component that exits, every ``interval`` seconds, until ``stop`` (for stacks without
        a supervisor of their own, as tests and benchmarks run them; ``csparql stack`` restarts components in
        its own loop, to say so). Each restart is logged in ``home/logs/supervisor.log`` and kept in
        ``restarts``."""
        self._supervising = threading.Event()

        def watch() -> None:
            while not self._supervising.wait(interval):
                for name, code in self.restart_exited():
                    self.restarts.append((name, code))
                    with open(self.home / "logs" / "supervisor.log", "a", encoding="utf-8") as log:
                        log.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} the {name} exited with code {code}; "
                                  "started again\n")

        threading.Thread(target=watch, name="airflow-supervisor", daemon=True).start()

    def log_tail(self, name: str, lines: int = 40) -> str:
        path = self.home / "logs" / f"{name}.log"
        if not path.exists():
            return "(no log)"
        return "\n".join(path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:])

    def answers(self) -> bool:
        """Whether the api-server answers (its health endpoint, which needs no login)."""
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as response:
                json.load(response)
            return True
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def wait_until_healthy(self, timeout: float = 240) -> None:
        """Wait until the api-server answers and reports the scheduler, DAG processor and triggerer healthy."""
        deadline = time.monotonic() + timeout
        last = "no answer"
        while time.monotonic() < deadline:
            for name, process in self.processes.items():
                if process.poll() is not None:
                    raise StackError(f"the Airflow {name} exited with code {process.returncode}:\n{self.log_tail(name)}")
            try:
                with urllib.request.urlopen(f"{self.url}/api/v2/monitor/health", timeout=5) as response:
                    health = json.load(response)
                states = {k: (v or {}).get("status") for k, v in health.items()}
                if all(states.get(k) == "healthy" for k in ("metadatabase", "scheduler", "triggerer", "dag_processor")):
                    return
                last = json.dumps(states)
            except (urllib.error.URLError, OSError, ValueError) as error:
                last = str(error)
            time.sleep(2)
        raise StackError(f"Airflow did not become healthy within {timeout:.0f} s (last: {last})\n"
                         + "\n".join(f"--- {n}\n{self.log_tail(n, 15)}" for n in self.processes))

    def stop(self, grace: float = 30) -> None:
        """Stop every component: SIGTERM to its process group, SIGKILL after ``grace`` seconds."""
        if self._supervising is not None:
            self._supervising.set()
        for process in self.processes.values():
            if process.poll() is None:
                try:
                    os.killpg(process.pid, signal.SIGTERM)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + grace
        for process in self.processes.values():
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for process in self.processes.values():
            try:
                os.killpg(process.pid, signal.SIGKILL)  # also workers a component left behind
            except (ProcessLookupError, PermissionError):
                pass
            process.wait()
        _wait_for_groups_to_end([process.pid for process in self.processes.values()], timeout=10)
        self.processes.clear()

    # REST API

    def token(self) -> str:
        """The admin's API token (fetched once)."""
        if self._token is None:
            self._token = self.token_for(self.username, self.password)
        return self._token

    def token_for(self, username: str, password: str) -> str:
        """A fresh API token for a login (``POST /auth/token``)."""
        body = json.dumps({"username": username, "password": password}).encode()
        request = urllib.request.Request(f"{self.url}/auth/token", data=body,
                                         headers={"Content-Type": "application/json"}, method="POST")
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.load(response)["access_token"]

    def api(self, method: str, path: str, body: dict | None = None, allow: tuple[int, ...] = (),
            attempts: int = 5, idempotent: bool | None = None) -> dict:
        """Call the REST API (``/api/v2/...``) as the admin; ``StackError`` on an unexpected status. Reads and
        idempotent writes (GET, PATCH, or a call said to be ``idempotent``) are tried again on a server error
        (SQLite busy under load); every call when the api-server refused it with its "Database error" (the
        request's transaction was rolled back, so nothing of it was stored) or did not answer in time."""
        if idempotent is None:
            idempotent = method in ("GET", "PATCH")
        attempt = 0
        while True:
            attempt += 1
            request = urllib.request.Request(
                f"{self.url}/api/v2/{path.lstrip('/')}", method=method,
                data=json.dumps(body).encode() if body is not None else None,
                headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token()}"},
            )
            try:
                with urllib.request.urlopen(request, timeout=60) as response:
                    text = response.read()
                    return json.loads(text) if text else {}
            except urllib.error.HTTPError as error:
                if error.code in allow:
                    return {"status": error.code}
                detail = error.read().decode(errors="replace")[:2000]
                if error.code >= 500 and (idempotent or rolled_back(detail)) and attempt < attempts:
                    time.sleep(2)
                    continue
                kind = ServerError if error.code >= 500 else StackError
                raise kind(f"{method} {path} answered {error.code}: {detail}") from None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                # An api-server slow under load: try again (a POST that did land shows as 409 to backfill()).
                if attempt < attempts:
                    time.sleep(3)
                    continue
                raise NoAnswer(f"{method} {path}: no answer from the api-server at {self.url} ({error})") from None

    def wait_for_dags(self, dag_ids: list[str], timeout: float = 180) -> None:
        """Wait until the DAG processor has parsed every DAG in ``dag_ids``."""
        deadline = time.monotonic() + timeout
        missing = list(dag_ids)
        while time.monotonic() < deadline:
            missing = [d for d in dag_ids if self.api("GET", f"dags/{d}", allow=(404,)).get("status") == 404]
            if not missing:
                return
            time.sleep(2)
        errors = self.api("GET", "importErrors").get("import_errors", [])
        raise StackError(f"DAGs not parsed within {timeout:.0f} s: {missing}; import errors: {errors}")

    def unpause(self, dag_id: str) -> None:
        self.api("PATCH", f"dags/{dag_id}", {"is_paused": False})

    def backfill(self, dag_id: str, start: str, end: str, reprocess: str = "none", max_active_runs: int = 2,
                 timeout: float = 300) -> dict:
        """Create a backfill of the DAG's runs with instants in [start, end] (ISO 8601). Tries again while
        the api-server refuses it for a passing reason: on SQLite (503, or 500 when the database stayed locked
        past its timeout) while the scheduler holds the database, and (409) while the DAG's previous backfill
        is not yet marked complete (the scheduler does that every 30 s)."""
        body = {"dag_id": dag_id, "from_date": start, "to_date": end, "reprocess_behavior": reprocess,
                "max_active_runs": max_active_runs, "run_backwards": False, "dag_run_conf": {}}
        earlier = {b["id"] for b in self.api("GET", f"backfills?dag_id={dag_id}").get("backfills", [])}
        deadline = time.monotonic() + timeout
        refused_busy = False
        while time.monotonic() < deadline:
            try:
                answer = self.api("POST", "backfills", body, allow=(409, 500, 503), attempts=1)
            except NoAnswer:
                answer = {"status": 503}  # it may have been stored, as after a 503
            if answer.get("status") == 500:
                answer = {"status": 503}  # "database is locked" past SQLite's timeout: as busy as a 503
            if answer.get("status") == 409 and refused_busy:
                # A 503 can come after the backfill was stored: then the 409 is about ours, which is new. An
                # older backfill of the same range (not yet marked complete) is not ours.
                ours = [b for b in self.api("GET", f"backfills?dag_id={dag_id}").get("backfills", [])
                        if b["id"] not in earlier and _same_instant(b["from_date"], start)
                        and _same_instant(b["to_date"], end)]
                if ours:
                    return self._complete(ours[0], body, timeout=max(deadline - time.monotonic(), 60))
            if answer.get("status") not in (409, 503):
                return answer
            refused_busy = refused_busy or answer.get("status") == 503
            time.sleep(2)
        return self.api("POST", "backfills", body)

    def _complete(self, backfill: dict, body: dict, timeout: float) -> dict:
        """Make sure every window of a backfill stored during a 503 has its run. The api-server commits the
        backfill before it creates the runs, and when SQLite stays locked it can keep some of them and fail to
        remove the rest (seen: two runs of three). The windows still without a run are backfilled once the
        partial backfill is complete (Airflow allows one active backfill per DAG); the last backfill created is
        returned."""
        missing = self.api("POST", "backfills/dry_run", {**body, "reprocess_behavior": "none"},
                           idempotent=True).get("backfills", [])
        if not missing:
            return backfill
        self.wait_for_backfills(backfill["dag_id"], timeout=timeout)
        return self.backfill(backfill["dag_id"], body["from_date"], body["to_date"], reprocess="none",
                             max_active_runs=body["max_active_runs"], timeout=timeout)

    def wait_for_backfills(self, dag_id: str, timeout: float = 300) -> None:
        """Wait until every backfill of the DAG is marked complete."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            backfills = self.api("GET", f"backfills?dag_id={dag_id}").get("backfills", [])
            if all(b.get("completed_at") for b in backfills):
                return
            time.sleep(3)
        raise StackError(f"{dag_id}: a backfill was not marked complete within {timeout:.0f} s")

    def dag_runs(self, dag_id: str) -> list[dict]:
        return self.api("GET", f"dags/{dag_id}/dagRuns?limit=100&order_by=run_after").get("dag_runs", [])

    def wait_for_runs(self, dag_id: str, count: int, timeout: float = 600, run_type: str | None = None) -> list[dict]:
        """Wait until ``count`` runs (of ``run_type`` when given) have finished; ``StackError`` if one failed."""
        deadline = time.monotonic() + timeout
        runs: list[dict] = []
        while time.monotonic() < deadline:
            runs = [r for r in self.dag_runs(dag_id) if run_type is None or r["run_type"] == run_type]
            failed = [r for r in runs if r["state"] == "failed"]
            if failed:
                raise StackError(f"{dag_id}: run {failed[0]['dag_run_id']} failed:\n{self.task_log_tail(dag_id, failed[0])}")
            finished = [r for r in runs if r["state"] == "success"]
            if len(finished) >= count:
                return finished
            time.sleep(3)
        raise StackError(f"{dag_id}: {count} run(s) did not finish within {timeout:.0f} s: "
                         f"{[(r['dag_run_id'], r['state']) for r in runs]}\n" + self.log_tail("scheduler", 20))

    def task_log_tail(self, dag_id: str, run: dict, lines: int = 30) -> str:
        folder = self.home / "logs" / f"dag_id={dag_id}" / f"run_id={run['dag_run_id']}"
        texts = []
        for path in sorted(folder.glob("task_id=*/attempt=*.log")):
            events = []
            for line in path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]:
                try:
                    events.append(json.loads(line).get("event", line))
                except ValueError:
                    events.append(line)
            texts.append(f"--- {path.parent.name}/{path.name}\n" + "\n".join(map(str, events)))
        return "\n".join(texts) or "(no task log)"


def _wait_for_groups_to_end(groups: list[int], timeout: float) -> None:
    """Wait (up to ``timeout`` seconds) until no process of the groups is left: a worker killed with its
    component's group is gone only once the system has reaped it."""
    deadline = time.monotonic() + timeout
    for group in groups:
        while time.monotonic() < deadline:
            try:
                os.killpg(group, 0)
            except (ProcessLookupError, PermissionError):
                break
            time.sleep(0.1)


def _same_instant(a: str, b: str) -> bool:
    return parse_instant(a) == parse_instant(b)


def _kill_group(group: int) -> None:
    """SIGKILL to what is left of a process group (none of it may be running any more)."""
    try:
        os.killpg(group, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass

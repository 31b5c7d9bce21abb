"""``csparql stack``: the embedded product on one machine — one warm Spark (a local Spark Connect server),
Airflow on SQLite, the example queries registered, the sample streams landing through their ingestion DAGs,
and each query backfilled over its last sample windows.

The order is chosen so that a new user waits as little as possible: the Spark Connect server starts first (its
JVM takes 15–30 s, while the examples are registered and Airflow's database is set up), the address and the
login are printed as soon as Airflow's api-server answers, and everything after that — the static graphs
loaded through the server, the ingestion DAGs started, the sample history declared complete once it landed,
the backfills created — happens in a loop that also supervises every process (a component or the Connect
server that exits is started again, and the stack says so) and prints, one line each, what changed: files
landed, window evaluations written, backfills done.

With ``spark="connect"`` (the default) every evaluation and every ingest is a client of that one server
(``CSPARQL_SPARK=connect`` and the Airflow connection ``spark_connect_default`` in Airflow's environment); with
``spark="local"`` each task starts a Spark of its own inside its process, as before.

Scheduled runs of the examples evaluate windows of *now*. Once the sample history has landed and is
backfilled, the stack plays the sample streams live (``LiveSamples``: every ``LIVE_SECONDS`` a small file of
sample events timestamped now in each landing folder), so those windows fill as the clock passes and the
runs waiting for them (deferred, holding no worker) evaluate on their schedule. The stack sets the wait
timeout to a day unless ``CSPARQL_WAIT_TIMEOUT`` says otherwise, so that a run over a stream where nothing
lands does not evaluate an empty window every minute.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import statistics
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from csparql.deploy.plan import Deployment, deployment_of, ingest_dag_id, ingested_streams
from csparql.deploy.registration import register
from csparql.deploy.registry import RegistrationError, registry_snapshot
from csparql.deploy.settings import Settings
from csparql.examples import examples_folder
from csparql.core.frontend import compile_query
from csparql.core.language.errors import QueryError
from csparql.samples import SampleFiles
from csparql.core.schedule import EvaluationWindow
from csparql.stack.airflow_stack import AirflowStack, NoAnswer, ServerError, StackError
from csparql.runtime.connect_server import (DEFAULT_MASTER, DEFAULT_PORT, ConnectServer, close_session,
                                         connect_mode_left_alone, port_in_use)
from csparql.storage.watermarks import advance_watermark, read_watermarks
from csparql.core.windows import format_instant, to_micros

EXAMPLES = examples_folder("queries")
STACK_DEFAULTS = {"CSPARQL_WAIT_TIMEOUT": "1d"}
SPARK_MODES = ("connect", "local")
CONNECTION_ID = "spark_connect_default"
TICK_SECONDS = 5
"""How often the stack supervises its processes and looks for progress."""
STARTUP_TIMEOUT = 300
"""Seconds Airflow's api-server and the Spark Connect server each have to answer after they are started."""
BACKFILL_CHECK_SECONDS = 60
"""How often the stack looks for backfills Airflow lost (``EmbeddedStack.recreate_lost_backfills``)."""
HEALTH_CHECK_SECONDS = 30
"""How often the stack asks its running Spark Connect server for an answer (``EmbeddedStack.check_health``)."""
HEALTH_TIMEOUT = 20.0
"""How long the server has to answer before the stack says it does not."""
MAX_BACKFILL_ATTEMPTS = 3
LIVE_SECONDS = 30
"""How often the stack lands a file of live sample events in each sample stream's landing folder."""
STREAM_DAGS = """# Airflow DAGs of csparql but the query DAGs, which the registry's loaders build: the ingestion DAGs and
# the revision DAGs (written by `csparql stack` into a DAGs folder that had none).
from csparql.orchestration.factory import csparql_dags

csparql_dags(queries=False)
"""
"""The DAG file of the ingestion and revision DAGs the stack writes into a DAGs folder that has none."""
SAMPLES_TIMEOUT = 1800
"""Seconds the sample streams have to land once their ingestion DAGs are started."""


def example_name(path: Path) -> str:
    """The registration name of an example: ``ex`` and its file stem, e.g. ``ex02_cars_per_tollgate``."""
    return "ex" + re.sub(r"[^A-Za-z0-9_]", "_", path.stem)


@dataclass(frozen=True)
class BackfillPlan:
    """A registered example's deployment and the sample windows its backfill evaluates, in order."""

    deployment: Deployment
    windows: list[EvaluationWindow]


def backfill_windows(deployment: Deployment, files: SampleFiles, count: int) -> list[EvaluationWindow]:
    """The last ``count`` windows of a scheduled query that hold sample data: up to the first one closing after
    the data ends (none for a one-shot query)."""
    if deployment.schedule is None:
        return []
    period = deployment.schedule.period
    return deployment.schedule.evaluations(files.start + 1, files.end + period - 1)[-count:]


def history_watermarks(plans: list[BackfillPlan], files: SampleFiles) -> dict[str, int]:
    """The watermark that declares each sample stream's history complete: the latest end of the windows the
    backfills evaluate over it plus the lateness its query allows the stream (so each of those windows counts
    as complete), and at least the end of the data."""
    marks = {iri: files.end for iri in files.streams}
    for plan in plans:
        for stream in plan.deployment.inputs:
            if stream.iri in marks and plan.windows:
                marks[stream.iri] = max(marks[stream.iri], plan.windows[-1].end + stream.lateness)
    return marks


class LiveSamples:
    """The sample streams played live: each ``land`` writes, into each stream's landing folder, one small
    file of the sample events timestamped since the previous one up to now (``csparql.samples.
    live_sample_texts``: the same city, cars and brokers, so the static graphs hold), which the stream's
    ingestion DAG lands as it lands any file. Windows of now then fill as the wall clock passes, so a query
    registered over the sample streams shows results on its schedule."""

    def __init__(self, settings: Settings, streams: set[str], every: float = LIVE_SECONDS,
                 clock=time.time) -> None:
        """``streams``: the IRIs of the sample streams to play (those the registered queries read);
        ``every``: seconds between two files; ``clock``: the wall clock, seconds since the epoch."""
        self.settings = settings
        self.streams = set(streams)
        self.every = every
        self.clock = clock
        self.last: int | None = None  # the instant (µs) the previous files' events reach
        self.files = 0

    def due(self) -> bool:
        return self.last is None or self.clock() * 1_000_000 - self.last >= self.every * 1_000_000

    def land(self) -> list[Path]:
        """Write the files of the events since the previous call (on the first, those of the last ``every``
        seconds), one per stream, each under a name that sorts after the previous ones; the files written.
        Each file is written under a hidden name and renamed, so an ingest never reads half of one."""
        from csparql.samples import live_sample_texts

        now = int(self.clock() * 1_000_000)
        after = self.last if self.last is not None else now - int(self.every * 1_000_000)
        written = []
        for iri, text in live_sample_texts(after, now).items():
            if iri not in self.streams:
                continue
            folder = self.settings.landing_folder(iri)
            folder.mkdir(parents=True, exist_ok=True)
            name = f"live-{format_instant(now).replace(':', '-')}.tnq"
            hidden = folder / f".{name}"
            hidden.write_text(text, encoding="utf-8")
            hidden.replace(folder / name)
            written.append(folder / name)
        self.last = now
        self.files += len(written)
        return written


def write_stream_dags(dags: Path) -> Path | None:
    """Write the ingestion and revision DAGs' file (``STREAM_DAGS``) into the DAGs folder ``dags`` unless one of
    its files already builds them (calls ``csparql_dags``); the file written, or None."""
    for path in dags.rglob("*.py") if dags.is_dir() else []:
        try:
            if "csparql_dags(" in path.read_text(encoding="utf-8", errors="replace"):
                return None
        except OSError:
            continue
    target = dags / "csparql_streams.py"
    dags.mkdir(parents=True, exist_ok=True)
    target.write_text(STREAM_DAGS, encoding="utf-8")
    return target


@dataclass
class Progress:
    """What the stack has done since its start, as the terminal shows it: each call of ``changes`` returns one
    line per thing that changed since the previous call."""

    settings: Settings
    dropped: dict[str, Path] = field(default_factory=dict)
    """The sample files dropped in landing folders by this start, by stream IRI."""
    backfilled: dict[str, set[int] | None] = field(default_factory=dict)
    """Query → the window ends its backfill evaluates (None: a one-shot query, run once)."""
    since: int = field(default_factory=lambda: int(time.time() * 1_000_000))
    """When this start of the stack began (µs): failures of evaluations started before it (a previous start's)
    are not reported again."""
    _landed: int = 0
    _written: int = 0
    _done: int = 0
    _failures: set[tuple[str, int]] = field(default_factory=set)
    _runs: list[dict] = field(default_factory=list)
    _runs_table: object = None  # the Arrow rows ``_runs`` was made of

    def landed_files(self) -> int:
        """How many of the dropped sample files have landed (moved to ``done/``) or been refused."""
        return sum(1 for iri, path in self.dropped.items()
                   for outcome in ("done", "rejected")
                   if (self.settings.landing_folder(iri) / outcome / path.name).exists())

    def refused_files(self) -> list[str]:
        reasons = []
        for iri, path in self.dropped.items():
            reason = self.settings.landing_folder(iri) / "rejected" / f"{path.name}.reason"
            if reason.exists():
                reasons.append(f"{path.name}: {reason.read_text(encoding='utf-8', errors='replace').strip()}")
        return reasons

    def runs(self) -> list[dict]:
        """The rows of the runs table (``delta.SNAPSHOTS.rows``: a new version's new files only are read; the
        table grows by a file per evaluation, and the stack looks every few seconds for days)."""
        from csparql.storage import delta, schema

        path = self.settings.warehouse.runs
        if not delta.exists(path):
            return []
        try:
            rows = delta.SNAPSHOTS.rows(path, schema.RUNS)
            if rows is not self._runs_table:
                self._runs, self._runs_table = rows.to_pylist(), rows
        except Exception:  # a commit in flight: the next look reads it
            pass
        return self._runs

    def without_runs(self) -> list[str]:
        """The backfilled queries none of whose windows has a run in the runs table, succeeded or failed."""
        seen = {(r["query"], _micros(r["window_end"])) for r in self.runs()}
        queries = {query for query, _ in seen}
        return [query for query, ends in self.backfilled.items()
                if (query not in queries if ends is None else not any((query, end) in seen for end in ends))]

    def changes(self) -> list[str]:
        lines = []
        if self.dropped:
            landed = self.landed_files()
            if landed != self._landed:
                self._landed = landed
                lines.append(f"sample files landed: {landed} of {len(self.dropped)}")
        runs = self.runs()
        succeeded = {(r["query"], _micros(r["window_end"])): r for r in runs if r["status"] == "succeeded"}
        if len(succeeded) != self._written:
            self._written = len(succeeded)
            durations = [r["duration_ms"] for r in succeeded.values() if r.get("duration_ms") is not None]
            median = f" (median {statistics.median(durations) / 1000:.1f} s each)" if durations else ""
            lines.append(f"window evaluations written: {len(succeeded)}{median}")
        latest: dict[tuple[str, int], dict] = {}
        for r in sorted(runs, key=lambda r: r["started_at"]):
            latest[(r["query"], _micros(r["window_end"]))] = r
        for key, r in sorted(latest.items()):
            if (r["status"] not in ("succeeded", "running") and key not in self._failures
                    and _micros(r["started_at"]) >= self.since):
                self._failures.add(key)
                error = " ".join(str(r.get("error") or r["status"]).split())[:200]
                lines.append(f"evaluation failed: {key[0]}, window ending {format_instant(key[1])}: {error}")
        if self.backfilled:
            done = sum(1 for query, ends in self.backfilled.items()
                       if (any(q == query for q, _ in succeeded) if ends is None
                           else ends <= {end for q, end in succeeded if q == query}))
            if done != self._done:
                self._done = done
                lines.append(f"backfills done: {done} of {len(self.backfilled)}")
        return lines


def _micros(value) -> int:
    """A runs-table timestamp (a datetime read from Parquet) as epoch microseconds."""
    return value if isinstance(value, int) else to_micros(value)


class EmbeddedStack:
    def __init__(self, settings: Settings, port: int = 8080, home: Path | None = None, windows: int = 3,
                 examples: list[str] | None = None, out=sys.stdout, spark: str = "connect",
                 connect_port: int | None = None, live_every: float = LIVE_SECONDS) -> None:
        """``live_every``: seconds between two files of live sample events (``LiveSamples``); 0: none."""
        if spark not in SPARK_MODES:
            raise StackError(f"the embedded stack runs Spark as one of {', '.join(SPARK_MODES)}, not {spark!r}")
        self.settings = settings
        self.port = port
        self.home = (home or Path.cwd() / ".airflow").resolve()
        self.windows = windows
        self.live_every = live_every
        self.live: LiveSamples | None = None
        self.examples = examples
        self.out = out
        self.spark = spark
        self.connect_port = connect_port or DEFAULT_PORT
        self.stack: AirflowStack | None = None
        self.server: ConnectServer | None = None  # with spark="connect"
        self.server_answered = False  # the server has answered once: from then on it is started again when it exits
        self.server_restarted: float | None = None  # when the server was last started again, until it answers
        self.server_silent: float | None = None  # since when the running server has not answered
        self.next_health_check = 0.0
        self.started = time.monotonic()
        self.backfill_ranges: dict[str, tuple[str, str]] = {}  # query → the instants its backfill covers
        self.backfill_attempts: dict[str, int] = {}

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

    def report(self, text: str) -> None:
        """A line of what happens while the stack runs, with the time of day."""
        self.say(f"  {time.strftime('%H:%M:%S')}  {text}")

    # the steps

    def register_examples(self) -> list[str]:
        names = []
        for path in sorted(EXAMPLES.glob("*.rq")):
            if self.examples and not any(path.name.startswith(n.zfill(2)) for n in self.examples):
                continue
            try:
                compile_query(path.read_text(encoding="utf-8"), path.name)
            except QueryError:
                self.say(f"  {path.name}: not registered (the specification expects it to be refused)")
                continue
            name = example_name(path)
            try:
                register(path, self.settings, name=name, replace=True)
            except RegistrationError as error:
                self.say(f"  {path.name}: not registered: {error}")
                continue
            names.append(name)
        self.say(f"registered {len(names)} example queries in {self.settings.registry}")
        return names

    def drop_samples(self, streams: set[str]) -> tuple[SampleFiles, bool]:
        """Write the sample files and drop those of ``streams`` (the ones the registered queries read) in their
        landing folders, unless they landed on an earlier start; the files, and whether the static graphs
        must be loaded (on a first start)."""
        from csparql.samples import write_samples

        # local files, beside the landing folders when the warehouse is in S3
        root = self.settings.landing.parent if self.settings.warehouse.remote else self.settings.warehouse.root
        files = write_samples(root / "samples")
        files.streams = {iri: path for iri, path in files.streams.items() if iri in streams}
        marks = read_watermarks(self.settings.warehouse)
        first = not all(iri in marks for iri in files.streams)
        for iri, path in files.streams.items():
            if iri not in marks:
                landing = self.settings.landing_folder(iri)
                landing.mkdir(parents=True, exist_ok=True)
                (landing / path.name).write_bytes(path.read_bytes())
        return files, first

    def load_static_graphs(self, files: SampleFiles) -> None:
        """Load the sample static graphs (through the Connect server, else with a local Spark)."""
        from csparql.ingest.ingest import load_static
        from csparql.runtime.session import spark_session

        if self.server is not None:
            with connect_mode_left_alone():
                spark = spark_session(self.server.url)
                try:
                    for iri, path in files.graphs.items():
                        load_static(spark, self.settings.warehouse, iri, [path], replace=True)
                finally:
                    close_session(spark)
            return
        handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        spark = spark_session()
        try:
            for iri, path in files.graphs.items():
                load_static(spark, self.settings.warehouse, iri, [path], replace=True)
        finally:
            spark.stop()
            for s, handler in handlers.items():  # PySpark installs a SIGINT handler of its own
                signal.signal(s, handler)

    def environment(self) -> dict[str, str]:
        """The csparql settings every Airflow component runs with (``AirflowStack`` gives Airflow's
        configuration the same values, ``AIRFLOW__CSPARQL__*``), and, with the stack's Connect server, its URL
        and token as ``CSPARQL_SPARK_MASTER``: the ``csparql`` commands of the stack's shell (``env.sh``) use
        the stack's Spark instead of starting one of their own."""
        env = {k: v for k, v in os.environ.items() if k.startswith("CSPARQL_")}
        for key, value in STACK_DEFAULTS.items():
            env.setdefault(key, value)
        env["CSPARQL_REGISTRY"] = str(self.settings.registry)
        env["CSPARQL_WAREHOUSE"] = str(self.settings.warehouse.root)
        env["CSPARQL_LANDING"] = str(self.settings.landing)
        env["CSPARQL_SPARK"] = self.spark
        env.pop("CSPARQL_SPARK_CONN_ID", None)
        if self.server is not None:
            env["CSPARQL_SPARK_CONN_ID"] = CONNECTION_ID
            env["CSPARQL_SPARK_MASTER"] = self.server.url
        return env

    def connections(self) -> dict[str, str]:
        """The Airflow connection to the stack's Connect server, as an ``AIRFLOW_CONN_*`` variable (its
        password is the server's token; ``SparkConnectHook`` makes it ``sc://localhost:PORT/;token=…``)."""
        if self.server is None:
            return {}
        uri = f"spark-connect://:{self.server.token}@localhost:{self.server.port}"
        return {f"AIRFLOW_CONN_{CONNECTION_ID.upper()}": uri}

    def password(self) -> str:
        stored = self.home / "passwords.json"
        if stored.exists():
            try:
                return json.loads(stored.read_text(encoding="utf-8"))["admin"]
            except (ValueError, KeyError):
                pass
        return secrets.token_urlsafe(12)

    def check_ports(self) -> None:
        if port_in_use(self.port):
            raise StackError(f"port {self.port} is in use (another csparql stack or Airflow?): pass --port to use "
                             "another one")
        if self.spark == "connect" and port_in_use(self.connect_port):
            raise StackError(f"port {self.connect_port} is in use (another Spark Connect server?): pass "
                             "--connect-port to use another one, or --spark local")

    def start_connect_server(self) -> None:
        self.server = ConnectServer(self.home / "spark-connect", port=self.connect_port,
                                    log=self.home / "logs" / "spark-connect.log",
                                    session_timeout=self.settings.connect_session_timeout / 1e6)
        self.server.start()
        self.say(f"starting the Spark Connect server on {self.server.address} ({DEFAULT_MASTER}, driver memory "
                 f"{self.server.memory}; log in {self.server.log}) …")

    def run(self, stopping: threading.Event) -> None:
        dags = Path(os.environ.get("AIRFLOW__CORE__DAGS_FOLDER") or Path.cwd() / "dags").resolve()
        if dags not in self.settings.registry.parents:
            raise StackError(f"the registry {self.settings.registry} is not inside the DAGs folder {dags}: "
                             "Airflow would not see its queries (set CSPARQL_REGISTRY or AIRFLOW__CORE__DAGS_FOLDER)")
        self.check_ports()
        written = write_stream_dags(dags)
        if written is not None:
            self.say(f"the DAGs folder {dags} had no ingestion DAGs: wrote {written} (the ingestion and revision "
                     "DAGs of every stream the registered queries read)")
        self.started = time.monotonic()
        self.say(f"settings: defaults under {self.settings.defaults}; the warehouse {self.settings.warehouse.root}, "
                 f"the registry {self.settings.registry} (`csparql settings` shows every one and where it comes from)")
        if self.spark == "connect":
            self.start_connect_server()
        names = self.register_examples()
        files, first_start = self.drop_samples(set(ingested_streams(self.settings)))
        self.stack = stack = AirflowStack(home=self.home, dags=dags, settings_environment=self.environment(),
                                          port=self.port, password=self.password(),
                                          extra_environment=self.connections())
        self.say(f"starting Airflow in {self.home} (logs in {self.home / 'logs'}) …")
        stack.set_up()
        stack.start()
        self.wait_for_api_server(stopping)
        if stopping.is_set():
            return
        for line in self.banner(names):
            self.say(line)
        self.supervise(stopping, names, files, first_start)

    def banner(self, names: list[str]) -> list[str]:
        """What the terminal shows once Airflow answers: the address and login, how to reach the stack's
        Airflow from another shell (it writes ``home/env.sh``: ``AIRFLOW_HOME`` and the stack's settings), that
        queries registered meanwhile start paused, and where the results are."""
        stack = self.stack
        env_file = stack.write_shell_environment()
        example = names[0] if names else "NAME"
        return [
            "",
            f"Airflow is up: {stack.url}   login: {stack.username} / {stack.password}",
            f"  the C-SPARQL pages: {stack.url}/plugin/csparql (Browse → C-SPARQL; every DAG has a Query tab)",
            f"  {len(names)} query DAGs; meanwhile the sample streams land through their ingestion DAGs and "
            f"each query replays its last {self.windows} sample window(s): progress below, "
            "first results within a few minutes",
            f"  this stack's airflow command in another shell:  export AIRFLOW_HOME={stack.home}; source {env_file}",
            "  a query registered now (csparql register) starts paused: unpause it on its page or with "
            "`airflow dags unpause NAME`",
            "  query results with SQL:  .venv/bin/csparql sql \"SELECT query, window_end, rows_written "
            "FROM runs ORDER BY started_at DESC LIMIT 20\"",
            f"  (the examples' results are named after their DAGs, e.g. {example.lower()}, in {self.settings.warehouse.root})",
            "Ctrl-C stops the stack.",
            "",
        ]

    def wait_for_api_server(self, stopping: threading.Event) -> None:
        """Wait until the api-server answers (a component that exits meanwhile stops the stack: it failed to
        start, and starting it again would fail again)."""
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while not stopping.is_set():
            exited = [(n, p.returncode) for n, p in self.stack.processes.items() if p.poll() is not None]
            if exited:
                name, code = exited[0]
                raise StackError(f"the Airflow {name} exited with code {code}:\n{self.stack.log_tail(name)}")
            if self.server is not None and self.server.exit_code() is not None:
                raise StackError(f"the Spark Connect server exited with code {self.server.exit_code()} as it "
                                 f"started:\n{self.server.log_tail()}")
            if self.stack.answers():
                return
            if time.monotonic() > deadline:
                raise StackError(f"Airflow's api-server did not answer within {STARTUP_TIMEOUT} s:\n"
                                 + self.stack.log_tail("api-server", 15))
            stopping.wait(1)

    def supervise(self, stopping: threading.Event, names: list[str], files: SampleFiles, first_start: bool) -> None:
        """Until ``stopping``: every ``TICK_SECONDS``, start again whatever exited, take each step of the start
        that has become due, and report what changed.

        The steps: once Spark is ready (the Connect server answers) and Airflow has parsed the DAGs, the
        ingestion DAGs are unpaused and triggered, and on a first start the static graphs are loaded meanwhile;
        once both the graphs and the sample streams have landed, the sample history is declared complete and
        the query DAGs are unpaused and backfilled."""
        progress = Progress(self.settings, dropped={iri: p for iri, p in files.streams.items()
                                                    if (self.settings.landing_folder(iri) / p.name).exists()})
        ingest = [ingest_dag_id(iri) for iri in files.streams]
        spark_ready = ingesting = backfilled = False
        static_loaded = not first_start
        next_check = 0.0
        samples_deadline = time.monotonic() + SAMPLES_TIMEOUT
        while not stopping.is_set():
            self.restart_exited()
            try:
                spark_ready = spark_ready or self.spark_ready()
                if spark_ready and not ingesting and self.dags_parsed(names + ingest):
                    for dag_id in ingest:
                        self.stack.unpause(dag_id)
                        self.stack.api("POST", f"dags/{dag_id}/dagRuns", {"logical_date": None})
                    if progress.dropped:
                        self.report(f"ingestion DAGs started: {len(progress.dropped)} sample file(s) to land")
                    ingesting = True
                    samples_deadline = time.monotonic() + SAMPLES_TIMEOUT
                if spark_ready and not static_loaded:
                    began = time.monotonic()
                    self.load_static_graphs(files)
                    self.report(f"static graphs loaded ({time.monotonic() - began:.1f} s)")
                    static_loaded = True
                if static_loaded and ingesting and not backfilled:
                    backfilled = self.backfill_when_landed(names, files, progress, samples_deadline)
                    next_check = time.monotonic() + BACKFILL_CHECK_SECONDS
                if backfilled and time.monotonic() > next_check:
                    self.recreate_lost_backfills(progress)
                    next_check = time.monotonic() + BACKFILL_CHECK_SECONDS
                if backfilled:
                    self.play_live(files)
            except (NoAnswer, ServerError) as error:  # the api-server busy or restarting: the step is taken again
                self.report(f"{' '.join(str(error).split())[:300]}; trying again")
            for line in progress.changes():
                self.report(line)
            stopping.wait(TICK_SECONDS)

    def play_live(self, files: SampleFiles) -> None:
        """Land the live sample events that are due (``LiveSamples``), once the sample history is complete; the
        first files are announced."""
        if not self.live_every:
            return
        if self.live is None:
            self.live = LiveSamples(self.settings, set(files.streams), self.live_every)
        if self.live.due():
            first = self.live.files == 0
            try:
                self.live.land()
            except OSError as error:  # a landing folder that cannot be written: said, and tried again next time
                self.live.last = int(self.live.clock() * 1_000_000)
                self.report(f"live sample events not landed: {error}")
                return
            if first:
                self.report(f"the sample streams play live: a file of events timestamped now every "
                            f"{self.live_every:g} s in each landing folder; a query registered over them shows "
                            "results on its schedule")

    def backfill_when_landed(self, names: list[str], files: SampleFiles, progress: Progress, deadline: float) -> bool:
        """Once every sample stream has landed, declare the history complete and backfill; whether it did."""
        if all(iri in read_watermarks(self.settings.warehouse) for iri in files.streams):
            plans = self.backfill_plans(names, files)
            self.declare_samples_complete(files, plans)
            self.backfill(plans, progress.backfilled)
            self.report(f"the sample history is complete; {len(progress.backfilled)} queries replay their last "
                        "sample windows")
            return True
        refused = progress.refused_files()
        if refused:
            raise StackError("a sample file was refused: " + "; ".join(refused))
        if time.monotonic() > deadline:
            raise StackError(f"the sample streams did not land within {SAMPLES_TIMEOUT // 60} minutes: see the "
                             "ingest_* DAGs")
        return False

    def restart_exited(self) -> None:
        for name, code in self.stack.restart_exited():
            self.report(f"the Airflow {name} exited with code {code}; started it again "
                        f"(its log: {self.home / 'logs' / (name + '.log')})")
        if self.server is None:
            return
        if not self.server_answered and self.server.exit_code() is not None:
            raise StackError(f"the Spark Connect server exited with code {self.server.exit_code()} before it "
                             f"answered:\n{self.server.log_tail()}")
        code = self.server.restart_if_exited()
        if code is not None:
            self.server_restarted = time.monotonic()
            self.report(f"the Spark Connect server exited with code {code}; started it again "
                        f"(its log: {self.server.log})")
        elif self.server_restarted is not None and self.server.answers():
            self.report(f"the Spark Connect server answers again "
                        f"({time.monotonic() - self.server_restarted:.0f} s after its restart)")
            self.server_restarted = None
            self.server_silent = None
        elif self.server_answered and self.server_restarted is None:
            self.check_health()

    def check_health(self) -> None:
        """Every ``HEALTH_CHECK_SECONDS``, ask the running Connect server for an answer; say when it stops
        answering (it runs, but a request gets no answer within ``HEALTH_TIMEOUT``) and when it answers again."""
        now = time.monotonic()
        if now < self.next_health_check:
            return
        self.next_health_check = now + HEALTH_CHECK_SECONDS
        answers = self.server.answers_within(HEALTH_TIMEOUT)
        if not answers and self.server_silent is None:
            self.server_silent = now
            self.report(f"the Spark Connect server on {self.server.address} does not answer within "
                        f"{HEALTH_TIMEOUT:.0f} s; evaluations and ingests wait for it (its log: {self.server.log})")
        elif answers and self.server_silent is not None:
            self.report(f"the Spark Connect server answers again ({now - self.server_silent:.0f} s without an "
                        "answer)")
            self.server_silent = None

    def spark_ready(self) -> bool:
        """Whether Spark is ready for ingests and evaluations: the Connect server answers (local Spark always
        is); ``StackError`` when the server has not answered within ``STARTUP_TIMEOUT``."""
        if self.server is None:
            return True
        elapsed = time.monotonic() - self.started
        if not self.server.answers():
            if elapsed > STARTUP_TIMEOUT:
                raise StackError(f"the Spark Connect server did not answer within {STARTUP_TIMEOUT} s:\n"
                                 f"{self.server.log_tail()}")
            return False
        self.server_answered = True
        self.report(f"the Spark Connect server answers on {self.server.address} ({elapsed:.0f} s after the start); "
                    "evaluations and ingests run on it")
        return True

    def dags_parsed(self, dag_ids: list[str]) -> bool:
        return all(self.stack.api("GET", f"dags/{d}", allow=(404,)).get("status") != 404 for d in dag_ids)

    def declare_samples_complete(self, files: SampleFiles, plans: dict[str, BackfillPlan]) -> None:
        """Declare the sample history complete: no triple will ever arrive for it, so each stream's watermark
        moves to where the windows the backfills evaluate count as complete (``history_watermarks``), and no
        further: a query up to date with the history shows no lag."""
        for iri, mark in history_watermarks(list(plans.values()), files).items():
            advance_watermark(self.settings.warehouse, iri, mark, "csparql stack: sample history")

    def backfill_plans(self, names: list[str], files: SampleFiles) -> dict[str, BackfillPlan]:
        """Each registered example's deployment and the sample windows its backfill evaluates
        (``backfill_windows``)."""
        registry = registry_snapshot(self.settings)
        plans = {}
        for name in names:
            deployment = deployment_of(self.settings.registry / f"{name}.rq", self.settings, registry)
            plans[name] = BackfillPlan(deployment, backfill_windows(deployment, files, self.windows))
        return plans

    def recreate_lost_backfills(self, progress: Progress) -> None:
        """Create again a backfill Airflow marked complete without any of its windows evaluated. On SQLite under
        load, the api-server can store a backfill, fail to create its runs (503: the database is locked), and
        not manage to remove it either: the retry then takes that empty backfill for the new one."""
        for query in progress.without_runs():
            if query not in self.backfill_ranges or self.backfill_attempts.get(query, 1) >= MAX_BACKFILL_ATTEMPTS:
                continue
            backfills = self.stack.api("GET", f"backfills?dag_id={query}").get("backfills", [])
            if backfills and all(b.get("completed_at") for b in backfills):
                start, end = self.backfill_ranges[query]
                self.stack.backfill(query, start, end, reprocess="failed")
                self.backfill_attempts[query] = self.backfill_attempts.get(query, 1) + 1
                self.report(f"the backfill of {query} ended with none of its windows evaluated (Airflow lost its "
                            "runs); created it again")

    def backfill(self, plans: dict[str, BackfillPlan], backfilled: dict[str, set[int] | None]) -> None:
        """Unpause each query DAG and backfill the windows of its plan (a one-shot query is triggered once),
        recording in ``backfilled`` query → the window ends evaluated (None for a one-shot query); the queries
        already in it are left alone (a second call resumes an interrupted one)."""
        for name, plan in plans.items():
            if name in backfilled:
                continue
            self.stack.unpause(name)
            if plan.deployment.schedule is None:
                self.stack.api("POST", f"dags/{name}/dagRuns", {"logical_date": None})
                backfilled[name] = None
                continue
            if not plan.windows:
                continue
            self.backfill_ranges[name] = (format_instant(plan.windows[0].at), format_instant(plan.windows[-1].at))
            self.stack.backfill(name, *self.backfill_ranges[name])
            backfilled[name] = {window.end for window in plan.windows}

    def stop(self) -> None:
        if self.stack is not None:
            self.stack.stop()
        if self.server is not None:
            self.server.stop()

"""``csparql stack``: the embedded product on one machine — Airflow on SQLite with local Spark, the example
queries registered, the sample streams landing through their ingestion DAGs, and each query backfilled over
its last sample windows.

Scheduled runs of the examples evaluate windows of *now*, for which the 2010 sample streams have no data:
they wait (deferred, holding no worker) for the streams' watermarks. The stack sets the wait timeout to a day
unless ``CSPARQL_WAIT_TIMEOUT`` says otherwise, so that they do not evaluate empty windows every minute.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import sys
import threading
import time
from pathlib import Path

from csparql.compiler import compile_query
from csparql.deployment import RegistrationError, Settings, deployment_of, ingest_dag_id, ingested_streams, register
from csparql.language.errors import QueryError
from csparql.orchestration.stack import AirflowStack, StackError
from csparql.storage.warehouse import project_root
from csparql.samples import SampleFiles
from csparql.storage.watermarks import advance_watermark, read_watermarks
from csparql.windows import format_instant

EXAMPLES = project_root() / "examples" / "queries"
STACK_DEFAULTS = {"CSPARQL_WAIT_TIMEOUT": "1d"}


def example_name(path: Path) -> str:
    """The registration name of an example: ``ex`` and its file stem, e.g. ``ex02_cars_per_tollgate``."""
    return "ex" + re.sub(r"[^A-Za-z0-9_]", "_", path.stem)


class EmbeddedStack:
    def __init__(self, settings: Settings, port: int = 8080, home: Path | None = None, windows: int = 3,
                 examples: list[str] | None = None, out=sys.stdout) -> None:
        self.settings = settings
        self.port = port
        self.home = (home or project_root() / ".airflow").resolve()
        self.windows = windows
        self.examples = examples
        self.out = out
        self.stack: AirflowStack | None = None

    def say(self, text: str) -> None:
        print(text, file=self.out, flush=True)

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

    def land_samples(self, streams: set[str]) -> SampleFiles:
        """Write the sample files, load the static graphs, and drop the files of ``streams`` (those the
        registered queries read) in their landing folders, unless they landed on an earlier start."""
        from csparql.samples import write_samples

        folder = self.settings.warehouse.root / "samples"
        files = write_samples(folder)
        files.streams = {iri: path for iri, path in files.streams.items() if iri in streams}
        marks = read_watermarks(self.settings.warehouse)
        if not all(iri in marks for iri in files.streams):
            from csparql.engine.ingest import load_static
            from csparql.spark.session import spark_session

            handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
            spark = spark_session()
            for iri, path in files.graphs.items():
                load_static(spark, self.settings.warehouse, iri, [path], replace=True)
            spark.stop()
            for s, handler in handlers.items():  # PySpark installs a SIGINT handler of its own
                signal.signal(s, handler)
            for iri, path in files.streams.items():
                if iri not in marks:
                    landing = self.settings.landing_folder(iri)
                    landing.mkdir(parents=True, exist_ok=True)
                    (landing / path.name).write_bytes(path.read_bytes())
            self.say(f"sample streams dropped in {self.settings.landing}; static graphs loaded")
        return files

    def environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k.startswith("CSPARQL_")}
        for key, value in STACK_DEFAULTS.items():
            env.setdefault(key, value)
        env["CSPARQL_REGISTRY"] = str(self.settings.registry)
        env["CSPARQL_WAREHOUSE"] = str(self.settings.warehouse.root)
        env["CSPARQL_LANDING"] = str(self.settings.landing)
        return env

    def password(self) -> str:
        stored = self.home / "passwords.json"
        if stored.exists():
            try:
                return json.loads(stored.read_text(encoding="utf-8"))["admin"]
            except (ValueError, KeyError):
                pass
        return secrets.token_urlsafe(12)

    def run(self, stopping: threading.Event) -> None:
        dags = Path(os.environ.get("AIRFLOW__CORE__DAGS_FOLDER") or project_root() / "dags").resolve()
        if dags not in self.settings.registry.parents:
            raise StackError(f"the registry {self.settings.registry} is not inside the DAGs folder {dags}: "
                             "Airflow would not see its queries (set CSPARQL_REGISTRY or AIRFLOW__CORE__DAGS_FOLDER)")
        names = self.register_examples()
        files = self.land_samples(set(ingested_streams(self.settings)))
        self.stack = stack = AirflowStack(home=self.home, dags=dags,
                                          settings_environment=self.environment(), port=self.port,
                                          password=self.password())
        self.say(f"starting Airflow in {self.home} (logs in {self.home / 'logs'}) …")
        stack.set_up()
        stack.start()
        stack.wait_until_healthy()
        ingest = [ingest_dag_id(iri) for iri in files.streams]
        stack.wait_for_dags(names + ingest)
        for dag_id in ingest:
            stack.unpause(dag_id)
            stack.api("POST", f"dags/{dag_id}/dagRuns", {"logical_date": None})
        self.say(f"Airflow answers at {stack.url}; landing the sample streams through their ingestion DAGs …")
        self.wait_for_samples(files, stopping)
        backfilled = self.backfill(names, files)
        self.say("")
        self.say(f"Airflow is up: {stack.url}   login: {stack.username} / {stack.password}")
        self.say(f"  the C-SPARQL pages: {stack.url}/plugin/csparql (Browse → C-SPARQL; every DAG has a Query tab)")
        self.say(f"  {len(names)} query DAGs; {backfilled} backfills replaying the sample history; "
                 "results land in the warehouse as the runs finish")
        self.say(f"  query results with SQL:  .venv/bin/csparql sql \"SELECT query, window_end, rows_written "
                 f"FROM runs ORDER BY started_at DESC LIMIT 20\"")
        self.say("Ctrl-C stops the stack.")
        reported = -1
        while not stopping.wait(10):
            for name, code in stack.restart_exited():
                self.say(f"  the Airflow {name} exited with code {code}; started it again "
                         f"(its log: {self.home / 'logs' / (name + '.log')})")
            done = self.succeeded_runs()
            if done != reported:
                self.say(f"  {done} window evaluation(s) written so far")
                reported = done

    def wait_for_samples(self, files: SampleFiles, stopping: threading.Event) -> None:
        """Wait until every sample stream has landed, then declare the sample history complete: no triple
        will ever arrive for it, so its watermarks move a day past its end (windows closing after the data,
        such as the daily ones, then count as complete)."""
        deadline = time.monotonic() + 1800
        while not stopping.is_set():
            marks = read_watermarks(self.settings.warehouse)
            if all(iri in marks for iri in files.streams):
                break
            if time.monotonic() > deadline:
                raise StackError("the sample streams did not land within 30 minutes: see the ingest_* DAGs")
            stopping.wait(5)
        for iri in files.streams:
            advance_watermark(self.settings.warehouse, iri, files.end + 86_400_000_000, "csparql stack: sample history")

    def backfill(self, names: list[str], files: SampleFiles) -> int:
        count = 0
        for name in names:
            deployment = deployment_of(self.settings.registry / f"{name}.rq", self.settings)
            self.stack.unpause(name)
            if deployment.schedule is None:
                self.stack.api("POST", f"dags/{name}/dagRuns", {"logical_date": None})
                continue
            # The last windows holding sample data: up to the first one closing after the data ends.
            period = deployment.schedule.period
            chosen = deployment.schedule.evaluations(files.start + 1, files.end + period - 1)[-self.windows:]
            if not chosen:
                continue
            self.stack.backfill(name, format_instant(chosen[0].at), format_instant(chosen[-1].at))
            count += 1
        return count

    def succeeded_runs(self) -> int:
        from csparql.storage import delta
        from csparql.storage.statistics import read_table

        if not delta.exists(self.settings.warehouse.runs):
            return 0
        try:
            return sum(1 for r in read_table(self.settings.warehouse.runs).to_pylist() if r["status"] == "succeeded")
        except Exception:  # a commit in flight; the next poll reads it
            return 0

    def stop(self) -> None:
        if self.stack is not None:
            self.stack.stop()

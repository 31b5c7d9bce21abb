"""How a registered query runs in production, decided without Airflow or Spark.

The registry is a folder of ``.rq`` files (``$CSPARQL_REGISTRY``, default ``dags/queries/``); the file's stem
is the registration's identity: its Airflow DAG id and the name of its result tables. ``deployment_of`` reads
one file and returns everything the Airflow layer needs to build its DAG — schedule, windows, the streams it
waits for, the tables it writes, the task settings — or raises ``RegistrationError`` with the file name and the
parser's message. ``Settings`` gathers the deployment-wide knobs from the environment, so that the embedded
stack, docker-compose and the tests configure the same code the same way.

A deployment also depends on the other registry files (which of them produces a stream the query reads). So
that building one does not compile the whole registry, each file is compiled once per content in a process,
and what the others need of it (``QueryFacts``) is kept per content in the warehouse (``_csparql/query_facts``):
Airflow's DAG processor parses each DAG file in a process of its own, which then compiles only its own query.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import json
import os
import re
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import rdflib
from rdflib import URIRef

from csparql.algebra.operators import QueryPlan
from csparql.compiler import compile_query
from csparql.language.errors import QueryError
from csparql.schedule import Schedule, evaluation_period
from csparql.storage.files import write_text_atomically
from csparql.storage.watermarks import MAX_FUTURE_SKEW
from csparql.storage.warehouse import (
    Warehouse,
    collision_message,
    name_collision,
    output_stream_iri,
    project_root,
    reserved_name_problem,
    slug,
)
from csparql.windows import format_duration, parse_duration

SPARK_MODES = ("local", "standalone", "connect")
"""Where evaluations run: Spark inside the Airflow task (local), a standalone cluster through spark-submit
(the Airflow connection ``$CSPARQL_SPARK_CONN_ID``, default ``spark_default``), or a Spark Connect server (the
connection ``$CSPARQL_SPARK_CONN_ID``, default ``spark_connect_default``)."""

DAG_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_FUTURE_SKEW_VARIABLE = "CSPARQL_MAX_FUTURE_SKEW"


class RegistrationError(Exception):
    """A registry file that cannot become a DAG; ``str()`` names the file and says why."""

    def __init__(self, path: str | os.PathLike, message: str):
        super().__init__(f"{path}: {message}")
        self.path = str(path)
        self.message = message


@dataclass(frozen=True)
class Settings:
    """Deployment-wide settings, read from the environment (each documented in docs/orchestration.md)."""

    registry: Path
    warehouse: Warehouse
    landing: Path
    spark: str = "local"
    spark_conn_id: str | None = None
    pool: str = "csparql_spark"
    allowed_lateness: int = 60_000_000
    wait_timeout: int = 600_000_000
    poll_interval: int = 10_000_000
    max_future_skew: int = MAX_FUTURE_SKEW
    retries: int = 2

    ENVIRONMENT = {
        "registry": "CSPARQL_REGISTRY",
        "warehouse": "CSPARQL_WAREHOUSE",
        "landing": "CSPARQL_LANDING",
        "spark": "CSPARQL_SPARK",
        "spark_conn_id": "CSPARQL_SPARK_CONN_ID",
        "pool": "CSPARQL_POOL",
        "allowed_lateness": "CSPARQL_ALLOWED_LATENESS",
        "wait_timeout": "CSPARQL_WAIT_TIMEOUT",
        "poll_interval": "CSPARQL_POLL_INTERVAL",
        "max_future_skew": MAX_FUTURE_SKEW_VARIABLE,
    }

    @classmethod
    def from_environment(cls, environ: dict[str, str] | None = None) -> Settings:
        """The settings the environment gives, with defaults for what it does not; ``ValueError`` naming the
        variable for a value that cannot be used."""
        env = os.environ if environ is None else environ
        names = cls.ENVIRONMENT
        warehouse = Warehouse(env[names["warehouse"]]) if env.get(names["warehouse"]) else Warehouse.locate()
        registry = Path(env.get(names["registry"]) or project_root() / "dags" / "queries").resolve()
        landing = Path(env.get(names["landing"]) or warehouse.root / "landing").resolve()
        spark = env.get(names["spark"]) or "local"
        if spark not in SPARK_MODES:
            raise ValueError(f"{names['spark']}={spark!r}: use one of {', '.join(SPARK_MODES)}")

        def duration(key: str, default: int) -> int:
            return duration_setting(names[key], default, env)

        return cls(
            registry=registry,
            warehouse=warehouse,
            landing=landing,
            spark=spark,
            spark_conn_id=env.get(names["spark_conn_id"]) or None,
            pool=env.get(names["pool"]) or "csparql_spark",
            allowed_lateness=duration("allowed_lateness", cls.allowed_lateness),
            wait_timeout=duration("wait_timeout", cls.wait_timeout),
            poll_interval=max(duration("poll_interval", cls.poll_interval), 1_000_000),
            max_future_skew=duration("max_future_skew", cls.max_future_skew),
        )

    def landing_folder(self, stream: str) -> Path:
        """Where files for a stream are dropped to be ingested by its ingestion DAG."""
        return self.landing / slug(stream)

    @property
    def connection_id(self) -> str | None:
        """The Airflow connection for the Spark mode (None for local Spark)."""
        if self.spark == "local":
            return None
        return self.spark_conn_id or ("spark_default" if self.spark == "standalone" else "spark_connect_default")


def duration_setting(variable: str, default: int, environ: dict[str, str] | None = None) -> int:
    """The duration (µs) the environment variable ``variable`` gives, ``default`` when it is unset or empty;
    ``ValueError`` naming the variable for a value that is not a duration or is negative."""
    env = os.environ if environ is None else environ
    text = env.get(variable)
    if not text:
        return default
    try:
        value = parse_duration(text)
    except ValueError as error:
        raise ValueError(f"{variable}={text!r}: {error}") from None
    if value < 0:
        raise ValueError(f"{variable}={text!r}: must not be negative")
    return value


def max_future_skew_setting(environ: dict[str, str] | None = None) -> int:
    """``$CSPARQL_MAX_FUTURE_SKEW`` in µs, else ``MAX_FUTURE_SKEW``; ``ValueError`` naming the variable."""
    return duration_setting(MAX_FUTURE_SKEW_VARIABLE, MAX_FUTURE_SKEW, environ)


@dataclass(frozen=True)
class StreamInput:
    """A stream the query reads. An ingested stream is complete for a window once its watermark passed the
    window's end plus ``lateness``; a derived stream (the output of a ``REGISTER STREAM`` query in the registry)
    once that query, ``producer``, has written every one of its windows that ends inside the window."""

    iri: str
    lateness: int
    producer: str | None = None
    producer_schedule: Schedule | None = field(default=None, compare=False)

    def to_dict(self) -> dict:
        """A JSON-ready form that ``from_dict`` reads back."""
        return {"iri": self.iri, "lateness": self.lateness, "producer": self.producer,
                "producer_schedule": self.producer_schedule.to_dict() if self.producer_schedule else None}

    @classmethod
    def from_dict(cls, data: dict) -> StreamInput:
        schedule = data.get("producer_schedule")
        return cls(data["iri"], int(data["lateness"]), data.get("producer"),
                   Schedule.from_dict(schedule) if schedule else None)


@dataclass(frozen=True)
class WindowRequirements:
    """What must have landed before one evaluation runs: a watermark threshold (µs) per ingested stream, and
    the window ends each producer must have written."""

    at: int
    window_end: int
    streams: dict[str, int]
    producer_windows: dict[str, list[int]]

    def to_dict(self) -> dict:
        return {"at": self.at, "window_end": self.window_end, "streams": self.streams,
                "producer_windows": self.producer_windows}


@dataclass(frozen=True)
class WindowWait:
    """What each window of a query waits for: its schedule and the streams it reads. Holds no query text, so
    that it travels to Airflow's triggerer in a trigger's arguments (``to_dict``/``from_dict``), where a run's
    requirements are worked out once its instant is known."""

    schedule: Schedule | None
    inputs: tuple[StreamInput, ...]

    def requirements(self, at: int) -> WindowRequirements:
        """What the evaluation at instant ``at`` waits for (see ``StreamInput``)."""
        evaluation = self.schedule.evaluation_at(at) if self.schedule else None
        streams: dict[str, int] = {}
        producers: dict[str, list[int]] = {}
        for stream in self.inputs:
            bounds = evaluation.streams[URIRef(stream.iri)] if evaluation else None
            end = bounds.end if bounds else at
            if stream.producer is None or stream.producer_schedule is None:
                streams[stream.iri] = end + stream.lateness
                continue
            start = bounds.start if bounds and bounds.start is not None else None
            written = stream.producer_schedule.evaluations(
                (start + 1) if start is not None else end - stream.producer_schedule.period + 1,
                end + stream.producer_schedule.period,
            )
            ends = [e.end for e in written if e.end <= end and (start is None or e.end > start)]
            if start is None:
                ends = ends[-1:]  # a count-based window needs the producer's latest window
            producers.setdefault(stream.producer, []).extend(ends)
        return WindowRequirements(at, evaluation.end if evaluation else at, streams, producers)

    def to_dict(self) -> dict:
        """A JSON-ready form that ``from_dict`` reads back."""
        return {"schedule": self.schedule.to_dict() if self.schedule else None,
                "inputs": [stream.to_dict() for stream in self.inputs]}

    @classmethod
    def from_dict(cls, data: dict) -> WindowWait:
        schedule = data.get("schedule")
        return cls(Schedule.from_dict(schedule) if schedule else None,
                   tuple(StreamInput.from_dict(stream) for stream in data["inputs"]))


@dataclass(frozen=True)
class Deployment:
    """Everything the DAG of one registered query is built from."""

    name: str
    path: Path
    text: str
    plan: QueryPlan = field(repr=False)
    schedule: Schedule | None
    inputs: tuple[StreamInput, ...]
    output_stream: str | None
    registered_as: str | None

    @property
    def dag_id(self) -> str:
        return self.name

    @property
    def version(self) -> str:
        """The version of the query text (``text_version``), recorded with every run and result row."""
        return text_version(self.text)

    @property
    def description(self) -> str:
        what = f"REGISTER {self.plan.registration.kind} {self.registered_as}" if self.registered_as else "one-shot query"
        if self.schedule is None:
            return f"{what}: runs when triggered"
        windows = ", ".join(f"<{iri}> [{window}]" for iri, window in self.schedule.windows)
        return f"{what}, computed every {format_duration(self.schedule.period)}" + (f" over {windows}" if windows else "")

    @property
    def wait(self) -> WindowWait:
        """What each of the query's windows waits for."""
        return WindowWait(self.schedule, self.inputs)

    def requirements(self, at: int) -> WindowRequirements:
        """What the evaluation at instant ``at`` waits for (see ``StreamInput``)."""
        return self.wait.requirements(at)


def registry_name(path: str | os.PathLike) -> str:
    """The registration name of a registry file: its stem, which must be a valid DAG id and table name."""
    stem = Path(path).stem
    if not DAG_ID.fullmatch(stem):
        raise RegistrationError(
            path,
            f"'{stem}' cannot name a registered query: rename the file to letters, digits and '_', starting with "
            "a letter or '_' (it becomes the DAG id and the result tables' name)",
        )
    return stem


def check_registry_name(name: str, settings: Settings) -> str:
    """``name`` itself when it can name a registered query (the ``DAG_ID`` rule: letters, digits and '_',
    no path separators, dots or spaces); ``RegistrationError`` saying so otherwise."""
    if not isinstance(name, str) or not DAG_ID.fullmatch(name) or len(name) > 200:
        shown = name if isinstance(name, str) and len(name) <= 200 else f"{str(name)[:200]}…"
        raise RegistrationError(
            settings.registry,
            f"'{shown}' cannot name a registered query: use letters, digits and '_', starting with a letter or "
            "'_' (it becomes the DAG id and the result tables' name)",
        )
    return name


def text_version(text: str) -> str:
    """The version of a query text: the first 12 hex digits of its SHA-256 (line endings as stored, LF)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]


def _content(path: Path) -> tuple[str, str]:
    """The text of a registry file (line endings read as LF, as ``Path.read_text`` reads them) and the SHA-256
    of its bytes; ``RegistrationError`` when it cannot be read."""
    try:
        data = path.read_bytes()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise RegistrationError(path, f"cannot be read: {error}") from None
    return text.replace("\r\n", "\n").replace("\r", "\n"), hashlib.sha256(data).hexdigest()


_COMPILED: dict[Path, tuple[str, QueryPlan | str]] = {}
"""Per registry file, in this process: the digest of the content last compiled and its plan, or the parser's
message. Plans are immutable (frozen dataclasses of tuples), so the deployments of one content share one."""


def _compile(path: Path, text: str, digest: str) -> QueryPlan | str:
    """The plan of ``text``, the content of ``path`` whose SHA-256 is ``digest``, or the parser's message (with
    line, column and caret); compiled once per content in this process."""
    key = path.absolute()
    cached = _COMPILED.get(key)
    if cached is None or cached[0] != digest:
        try:
            result: QueryPlan | str = compile_query(text, path.name)
        except QueryError as error:
            result = "\n" + error.render()
        cached = _COMPILED[key] = (digest, result)
    return cached[1]


def _compiled(path: Path) -> tuple[str, str, QueryPlan]:
    """The name, text and plan of a registry file; ``RegistrationError`` when its name cannot name a query,
    it cannot be read, or it is not a valid query."""
    name = registry_name(path)
    text, digest = _content(path)
    plan = _compile(path, text, digest)
    if isinstance(plan, str):
        raise RegistrationError(path, plan)
    return name, text, plan


def _output_stream(plan: QueryPlan) -> str | None:
    registration = plan.registration
    if registration is not None and registration.kind == "STREAM":
        return str(output_stream_iri(registration.name))
    return None


@dataclass(frozen=True)
class QueryFacts:
    """What compiling one registry file tells the deployments of the others: the stream it produces
    (``REGISTER STREAM``; None otherwise), its schedule (None for a one-shot query) and the streams it reads,
    in query order. Kept per file content, in memory and in the warehouse (``registry_facts``), so that
    building one query's deployment does not compile the whole registry."""

    output_stream: str | None
    schedule: Schedule | None
    streams: tuple[str, ...]

    @classmethod
    def of(cls, plan: QueryPlan) -> QueryFacts:
        return cls(
            output_stream=_output_stream(plan),
            schedule=Schedule.of(plan) if evaluation_period(plan) is not None else None,
            streams=tuple(str(stream.iri) for stream in plan.streams),
        )

    def to_dict(self) -> dict:
        """A JSON-ready form that ``from_dict`` reads back."""
        return {"output_stream": self.output_stream, "streams": list(self.streams),
                "schedule": self.schedule.to_dict() if self.schedule else None}

    @classmethod
    def from_dict(cls, data: dict) -> QueryFacts:
        """The facts ``to_dict`` gave; ``ValueError``, ``KeyError`` or ``TypeError`` for anything else (a
        damaged cache file)."""
        output, streams, schedule = data["output_stream"], data["streams"], data["schedule"]
        if not (output is None or isinstance(output, str)) or not _strings(streams):
            raise ValueError("not the facts of a query")
        if schedule is not None:
            if type(schedule["period"]) is not int or not _strings([w["stream"] for w in schedule["windows"]]):
                raise ValueError("not the schedule of a query")
            schedule = Schedule.from_dict(schedule)  # each window checks its own numbers
        return cls(output, schedule, tuple(streams))


def _strings(values: object) -> bool:
    return isinstance(values, list) and all(isinstance(value, str) for value in values)


_FACTS: dict[Path, tuple[str, QueryFacts | None]] = {}
"""Per registry file, in this process: the digest of its content and its facts (None: it does not compile)."""

FACTS_FORMAT = 1
"""The version of the compile cache's files (``Warehouse.query_facts``); part of ``code_version``."""


@functools.cache
def code_version() -> str:
    """Names the code that compiles: a digest of csparql's sources (path, size and modification time of each
    ``.py`` and ``.lark`` file), of rdflib's and Python's versions and of ``FACTS_FORMAT``. The compile cache
    keeps facts per code version: another compiler may read the same text differently."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256(f"{FACTS_FORMAT} {sys.version_info[:2]} rdflib {rdflib.__version__}\n".encode())
    for source in sorted(package.rglob("*")):
        if source.suffix in (".py", ".lark"):
            stat = source.stat()
            digest.update(f"{source.relative_to(package)} {stat.st_size} {stat.st_mtime_ns}\n".encode())
    return digest.hexdigest()[:16]


def _facts_file(digest: str, settings: Settings) -> Path:
    return settings.warehouse.query_facts / code_version() / f"{digest}.json"


def _stored_facts(digest: str, settings: Settings) -> tuple[bool, QueryFacts | None]:
    """``(True, facts)`` when the warehouse's compile cache holds the facts of the content ``digest``
    (``facts`` None: it does not compile); ``(False, None)`` when it does not, or when its file cannot be read
    back (cut short, damaged): such a file is recomputed and replaced."""
    try:
        data = json.loads(_facts_file(digest, settings).read_text(encoding="utf-8"))
        if data["digest"] != digest or type(data["compiles"]) is not bool:
            return False, None
        return True, QueryFacts.from_dict(data) if data["compiles"] else None
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return False, None


def _store_facts(digest: str, facts: QueryFacts | None, settings: Settings) -> None:
    """Keep the facts of the content ``digest`` in the warehouse's compile cache, written atomically: a reader
    never sees half a file, and concurrent writers write the same facts. The first write of a new
    ``code_version`` removes the facts of other code. A cache that cannot be written (a read-only warehouse)
    only costs compiling again."""
    target = _facts_file(digest, settings)
    data = {"digest": digest, "compiles": facts is not None, **(facts.to_dict() if facts else {})}
    try:
        if not target.parent.is_dir():
            target.parent.mkdir(parents=True, exist_ok=True)
            for other in target.parent.parent.iterdir():
                if other != target.parent and other.is_dir():
                    shutil.rmtree(other, ignore_errors=True)
        write_text_atomically(target, json.dumps(data))
    except OSError:
        pass


def _facts(path: Path, settings: Settings) -> QueryFacts | None:
    """What compiling the registry file ``path`` tells; None when it cannot be deployed on its own (its name,
    unreadable, not a valid query). From this process's memory, else from the warehouse's compile cache, else
    compiled (and then kept in both); keyed by the file's content, so that an edit is seen at once."""
    try:
        registry_name(path)
        text, digest = _content(path)
    except RegistrationError:
        return None
    key = path.absolute()
    cached = _FACTS.get(key)
    if cached is not None and cached[0] == digest:
        return cached[1]
    found, facts = _stored_facts(digest, settings)
    if not found:
        plan = _compile(path, text, digest)
        facts = None if isinstance(plan, str) else QueryFacts.of(plan)
        _store_facts(digest, facts, settings)
    _FACTS[key] = (digest, facts)
    return facts


def registry_facts(settings: Settings) -> list[tuple[Path, QueryFacts | None]]:
    """Each registry file in name order, with its facts (``_facts``): the registry as the deployment of any
    one of its queries sees it. Only files whose content is new to this process and to the warehouse's
    compile cache are compiled."""
    return [(path, _facts(path, settings)) for path in registry_files(settings)]


def deployment_of(path: str | os.PathLike, settings: Settings) -> Deployment:
    """The deployment of one registry file; ``RegistrationError`` when it cannot be read or is not a valid
    query (the parser's message, with line, column and caret, follows the file name), when its name would
    make SQL confuse its results with a warehouse table or with those of a registry file before it in name
    order (``check_name_is_free``), when another registry file already produces the stream it registers, or
    when it reads its own output."""
    path = Path(path)
    name, text, plan = _compiled(path)
    before = [other for other in registry_files(settings) if other.name < path.name]
    _check_name(path, name, before, [], settings)
    return _deployment(path, name, text, plan, settings)


def deployment_of_text(text: str, name: str, settings: Settings, source_name: str = "<query>") -> Deployment:
    """The deployment ``text`` would have if it were registered as ``name`` (nothing is written); the same
    ``RegistrationError``s as ``deployment_of``, and a name that collides with any other registered query or
    with the stored results of another query is refused too (``check_name_is_free``)."""
    check_name_is_free(name, settings)
    try:
        plan = compile_query(text, source_name)
    except QueryError as error:
        raise RegistrationError(source_name, "\n" + error.render()) from None
    return _deployment(settings.registry / f"{name}.rq", name, text, plan, settings)


def check_name_is_free(name: str, settings: Settings) -> str:
    """``name`` itself when a query may be registered under it: a valid name (``check_registry_name``) whose
    SQL result tables are neither the warehouse's own tables nor, compared in lower case, those of another
    registered query or of another query's stored results (``csparql.storage.warehouse.name_collision``).
    The same spelling is the same query (an edit), never a collision. ``RegistrationError`` naming the
    table or query it collides with otherwise."""
    check_registry_name(name, settings)
    _check_name(settings.registry / f"{name}.rq", name, registry_files(settings),
                settings.warehouse.result_names(), settings)
    return name


def _check_name(path: Path, name: str, registered: list[Path], stored: list[str], settings: Settings) -> None:
    problem = reserved_name_problem(name)
    if problem is None:
        collision = name_collision(name, [p.stem for p in registered if DAG_ID.fullmatch(p.stem)])
        if collision is not None:
            other, table = collision
            problem = collision_message(name, other, table, f"the registered query {other} ({other}.rq)")
    if problem is None:
        collision = name_collision(name, stored)
        if collision is not None:
            other, table = collision
            problem = collision_message(name, other, table, f"the stored results of the query {other} "
                                                             f"({settings.warehouse.root / 'results' / other})")
    if problem is not None:
        raise RegistrationError(path, problem)


def _deployment(path: Path, name: str, text: str, plan: QueryPlan, settings: Settings) -> Deployment:
    registration = plan.registration
    facts = QueryFacts.of(plan)
    return Deployment(
        name=name,
        path=path,
        text=text,
        plan=plan,
        schedule=facts.schedule,
        inputs=_inputs(path, facts, producers_of(settings), settings),
        output_stream=facts.output_stream,
        registered_as=registration.name if registration else None,
    )


def _inputs(path: Path, facts: QueryFacts, producers: dict[str, tuple[Path, Schedule | None]],
            settings: Settings) -> tuple[StreamInput, ...]:
    """The streams the query of ``path`` reads, each with its producer if a registry file produces it;
    ``RegistrationError`` when an earlier registry file already produces the stream it registers, or when it
    reads its own output."""
    output = facts.output_stream
    if output is not None and producers.get(output, (path,))[0] != path:
        raise RegistrationError(
            path, f"the stream <{output}> is already produced by {producers[output][0].name}: "
            "give this query another REGISTER STREAM name"
        )
    inputs = []
    for iri in facts.streams:
        if output is not None and iri == output:
            raise RegistrationError(path, f"the query reads the stream it produces (<{output}>)")
        if iri in producers:
            producer_path, producer_schedule = producers[iri]
            inputs.append(StreamInput(iri, 0, registry_name(producer_path), producer_schedule))
        else:
            inputs.append(StreamInput(iri, settings.allowed_lateness))
    return tuple(dict.fromkeys(inputs))


def registry_files(settings: Settings) -> list[Path]:
    """The registry's query files, in name order."""
    return sorted(settings.registry.glob("*.rq")) if settings.registry.is_dir() else []


def producers_of(settings: Settings) -> dict[str, tuple[Path, Schedule | None]]:
    """Which registry file produces each output stream (the first by file name wins), with its schedule;
    files that do not parse produce nothing."""
    return _producers(registry_facts(settings))


def _producers(registry: list[tuple[Path, QueryFacts | None]]) -> dict[str, tuple[Path, Schedule | None]]:
    producers: dict[str, tuple[Path, Schedule | None]] = {}
    for path, facts in registry:
        if facts is not None and facts.output_stream is not None and facts.output_stream not in producers:
            producers[facts.output_stream] = (path, facts.schedule)
    return producers


LOADER = """# Airflow DAG loader for the C-SPARQL query in {query} (written by `csparql register`; do not edit).
from csparql.orchestration.dags import registered_query_dag

dag = registered_query_dag(__file__)
"""
"""The DAG file beside each registry file (see ``csparql.orchestration.dags``)."""


def register(source: str | os.PathLike, settings: Settings, name: str | None = None, replace: bool = False,
             by: str | None = None) -> Path:
    """Copy a query into the registry as ``<name>.rq`` with its loader, after checking it deploys; the name
    defaults to the REGISTER name, else the file's stem. ``RegistrationError`` leaves the registry unchanged."""
    source = Path(source)
    try:
        text = source.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise RegistrationError(source, f"cannot be read: {error}") from None
    return register_text(text, settings, name=name or None, replace=replace, source_name=source.name,
                         default_name=source.stem, by=by)


def register_text(text: str, settings: Settings, name: str | None = None, replace: bool = False,
                  source_name: str = "<query>", default_name: str | None = None, by: str | None = None) -> Path:
    """Put a query text into the registry as ``<name>.rq`` with its loader, after checking it deploys, and
    record it as a new version (``versions``) when it differs from the latest one. The name defaults to the
    REGISTER name, else ``default_name``. ``RegistrationError`` (with the parser's line, column and caret for
    a query that does not parse) leaves the registry unchanged."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    try:
        plan = compile_query(text, source_name)
    except QueryError as error:
        raise RegistrationError(source_name, "\n" + error.render()) from None
    name = name or (plan.registration.name if plan.registration else default_name)
    if not name:
        raise RegistrationError(source_name, "give the query a name: it has no REGISTER clause")
    check_registry_name(name, settings)  # before the lock: a name with path tricks touches no folder
    target = settings.registry / f"{name}.rq"
    with registry_lock(settings):
        previous = target.read_text(encoding="utf-8") if target.exists() else None
        if previous is not None and not replace and previous != text:
            raise RegistrationError(target, "a different query is already registered under this name: "
                                            "unregister it first, pass --replace, or choose another name with --as")
        deployment_of_text(text, name, settings, source_name)  # e.g. its name collides, or its stream has a producer
        if previous is not None and not versions(name, settings):
            record_version(name, previous, settings, by=None)  # registered before versions were kept
        record_version(name, text, settings, by=by)
        write_text_atomically(target, text)
        _store_facts(hashlib.sha256(text.encode("utf-8")).hexdigest(), QueryFacts.of(plan), settings)
        write_loader(target)
    return target


@contextlib.contextmanager
def registry_lock(settings: Settings) -> Iterator[None]:
    """Hold the registry's lock (an exclusive ``flock`` on ``<registry>/.lock``, across processes and threads):
    registrations, replacements and removals that overlap — two saves in the UI, the CLI at the same time —
    happen one after the other, so each gets its own version number and none is lost."""
    settings.registry.mkdir(parents=True, exist_ok=True)
    with open(settings.registry / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def write_loader(query: Path) -> Path:
    loader = query.with_suffix(".py")
    write_text_atomically(loader, LOADER.format(query=query.name))
    return loader


def unregister(name: str, settings: Settings, by: str | None = None) -> list[Path]:
    """Remove a query and its loader from the registry (its results and its versions stay)."""
    check_registry_name(name, settings)
    removed = []
    with registry_lock(settings):
        for suffix in (".rq", ".py"):
            path = settings.registry / f"{name}{suffix}"
            if path.exists():
                path.unlink()
                removed.append(path)
        if not removed:
            raise RegistrationError(settings.registry / f"{name}.rq", "no query is registered under this name")
        if versions(name, settings):
            _log_event(name, settings, {"event": "unregistered", "at": time.time_ns() // 1000, "by": by})
    return removed


HISTORY = ".history"
"""The folder of the registry that keeps every version of every query (Airflow's DAG processor reads only
``.py`` files, so it never parses it)."""


@dataclass(frozen=True)
class QueryVersion:
    """One saved text of a registered query: its number (1, 2, …), its ``text_version`` digest, when and by
    whom it was saved, and the file holding the text."""

    number: int
    digest: str
    saved_at: int
    saved_by: str | None
    path: Path

    @property
    def text(self) -> str:
        return self.path.read_text(encoding="utf-8")


def history_folder(name: str, settings: Settings) -> Path:
    return settings.registry / HISTORY / check_registry_name(name, settings)


def _events(name: str, settings: Settings) -> list[dict]:
    log = history_folder(name, settings) / "log.jsonl"
    if not log.exists():
        return []
    events = []
    for line in log.read_text(encoding="utf-8").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue  # a line cut short by a crash: the versions before it stay readable
    return events


def _log_event(name: str, settings: Settings, event: dict) -> None:
    folder = history_folder(name, settings)
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "log.jsonl", "a", encoding="utf-8") as log:
        log.write(json.dumps(event) + "\n")


def versions(name: str, settings: Settings) -> list[QueryVersion]:
    """Every saved version of a query, oldest first (also after it was unregistered)."""
    folder = history_folder(name, settings)
    return [
        QueryVersion(e["version"], e["digest"], e["at"], e.get("by"), folder / f"v{e['version']}.rq")
        for e in _events(name, settings) if e.get("event") == "saved" and (folder / f"v{e['version']}.rq").exists()
    ]


def record_version(name: str, text: str, settings: Settings, by: str | None = None) -> QueryVersion:
    """Keep ``text`` as the query's next version, unless it is the latest version already. The caller holds
    ``registry_lock`` (``register_text`` does)."""
    saved = versions(name, settings)
    digest = text_version(text)
    if saved and saved[-1].digest == digest:
        return saved[-1]
    number = max((e.get("version", 0) for e in _events(name, settings)), default=0) + 1
    folder = history_folder(name, settings)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"v{number}.rq").write_text(text, encoding="utf-8")
    at = time.time_ns() // 1000
    _log_event(name, settings, {"event": "saved", "version": number, "digest": digest, "at": at, "by": by})
    return QueryVersion(number, digest, at, by, folder / f"v{number}.rq")


def sync_loaders(settings: Settings) -> tuple[list[Path], list[Path]]:
    """Write the loader of every registry file that lacks one (or has an outdated one) and remove loaders whose
    query is gone; returns (written, removed)."""
    written, removed = [], []
    for query in registry_files(settings):
        loader = query.with_suffix(".py")
        if not loader.exists() or loader.read_text(encoding="utf-8") != LOADER.format(query=query.name):
            written.append(write_loader(query))
    for loader in sorted(settings.registry.glob("*.py")) if settings.registry.is_dir() else []:
        if not loader.with_suffix(".rq").exists() and loader.read_text(encoding="utf-8").startswith("# Airflow DAG loader for the C-SPARQL"):
            loader.unlink()
            removed.append(loader)
    return written, removed


def ingested_streams(settings: Settings) -> list[str]:
    """The streams registered queries read that no registered query produces, in IRI order. Queries that
    cannot be deployed (``deployment_of`` refuses them) are left out: their own loaders report them."""
    registry = registry_facts(settings)
    producers = _producers(registry)
    streams: set[str] = set()
    for path, facts in registry:
        if facts is None:
            continue
        try:
            _check_name(path, path.stem, [other for other, _ in registry if other.name < path.name], [], settings)
            inputs = _inputs(path, facts, producers, settings)
        except RegistrationError:
            continue
        streams.update(stream.iri for stream in inputs if stream.producer is None)
    return sorted(streams)


def ingest_dag_id(stream: str) -> str:
    """The id of the DAG that ingests a stream's landing folder."""
    return "ingest_" + re.sub(r"[^A-Za-z0-9_]", "_", slug(stream))

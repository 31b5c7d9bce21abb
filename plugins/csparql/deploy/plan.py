"""How a registered query runs in production, decided without Airflow or Spark.

``deployment_of`` reads one registry file and returns everything the Airflow layer needs to build its DAG —
schedule, windows, the streams it waits for (and their producers in the registry), the tables it writes — or
raises ``RegistrationError`` with the file name and the parser's message. ``WindowWait`` is what each window
of a query waits for, in a form that travels to Airflow's triggerer.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING

from rdflib import URIRef

from csparql.deploy.file_settings import FileSettings
from csparql.deploy.history import text_version
from csparql.core.panes.modes import AUTO
from csparql.deploy.registry import (
    DAG_ID,
    CompiledQuery,
    QueryFacts,
    RegistrationError,
    RegistrySnapshot,
    check_registry_name,
    compiled_file,
    compiled_text,
    compile_text,
    read_registry_file,
    registry_files,
    registry_name,
    registry_snapshot,
)
from csparql.deploy.settings import Settings
from csparql.core.language.errors import QueryError
from csparql.core.schedule import Schedule
from csparql.storage.warehouse import (
    Warehouse, collision_message, name_collision, reserved_name_problem, slug,
)
from csparql.storage.watermarks import missing_for_window
from csparql.core.windows import format_duration

if TYPE_CHECKING:  # the algebra: compiling a query loads it, building its DAG from the kept facts does not
    from csparql.core.algebra.operators import QueryPlan


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

    def missing(self, warehouse: Warehouse, at: int) -> list[str]:
        """What the evaluation at instant ``at`` still waits for in ``warehouse``, in plain words (empty once
        its window is complete: ``csparql.storage.watermarks.missing_for_window``)."""
        requirements = self.requirements(at)
        return missing_for_window(warehouse, requirements.streams, requirements.producer_windows)

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
    """Everything the DAG of one registered query is built from. Building it needs only what the registry's
    facts say (``QueryFacts``); the query's ``plan``, which only an evaluation needs, is compiled on first use,
    so that Airflow's DAG processor — a process per parse and per task callback — never loads the parser for a
    query whose facts are known."""

    name: str
    path: Path
    text: str
    schedule: Schedule | None
    inputs: tuple[StreamInput, ...]
    output_stream: str | None
    registered_as: str | None
    registration_kind: str | None = None  # QUERY or STREAM (None: a one-shot query)
    revision_horizon: int | None = None  # the query's own CSPARQL_REVISION_HORIZON (``csparql.deploy.file_settings``)
    panes: str = AUTO  # how windows are computed from panes (``csparql.deploy.file_settings``; ``csparql.core.panes.PANE_MODES``)
    digest: str | None = field(default=None, repr=False)  # SHA-256 of the registry file's bytes, when read from one
    compiled: QueryPlan | None = field(default=None, repr=False, compare=False)  # the plan, when already compiled

    @functools.cached_property
    def plan(self) -> QueryPlan:
        """The query's plan: ``compiled``, else ``text`` compiled now (once per content in a process);
        ``RegistrationError`` if it is not a valid query (its facts said it was: another compiler)."""
        if self.compiled is not None:
            return self.compiled
        return compiled_text(self.path, self.text, self.digest or hashlib.sha256(self.text.encode()).hexdigest())

    @property
    def dag_id(self) -> str:
        return self.name

    @property
    def version(self) -> str:
        """The version of the query text (``text_version``), recorded with every run and result row."""
        return text_version(self.text)

    @property
    def description(self) -> str:
        what = f"REGISTER {self.registration_kind} {self.registered_as}" if self.registered_as else "one-shot query"
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


def deployment_of(path: str | os.PathLike, settings: Settings,
                  registry: RegistrySnapshot | None = None) -> Deployment:
    """The deployment of one registry file; ``RegistrationError`` when it cannot be read or is not a valid
    query (the parser's message, with line, column and caret, follows the file name), when its name would
    make SQL confuse its results with a warehouse table or with those of a registry file before it in name
    order (``check_name_is_free``), when another registry file already produces the stream it registers, or
    when it reads its own output. ``registry``: the registry of ``settings`` already looked at
    (``registry_snapshot``), as when deploying many of its queries; else it is looked at now."""
    path = Path(path)
    registry = registry_snapshot(settings) if registry is None else registry
    name = registry_name(path)
    content = registry.content(path)
    text, digest = content or read_registry_file(path)
    facts = registry.facts(path) if content else None
    compiled = None
    if facts is None:  # not in the snapshot, or not a valid query: compiling says why
        name, text, compiled = compiled_file(path, (text, digest))
        facts = QueryFacts.of(compiled, FileSettings.of(path, text))
    _check_name(path, name, registry.files_before(path), [], settings)
    return _deployment(path, name, text, facts, settings, registry, digest, compiled)


def deployment_of_query(query: str | os.PathLike, settings: Settings, name: str | None = None) -> Deployment:
    """The deployment of ``query``: a query file (a path, or text ending in ``.rq`` or holding a ``/``;
    relative paths are read from the current directory) or the name of a registered query (its file in
    ``settings.registry``). A query file's results are named ``name``, else the file's stem. ``RegistrationError``
    naming the file or the registry when there is no such file or name, or the name cannot name results, and
    the errors of ``deployment_of``."""
    text = os.fspath(query)
    if isinstance(query, os.PathLike) or text.endswith((".rq", ".sparql")) or "/" in text or os.sep in text:
        path = Path(text).expanduser().resolve()
        if not path.is_file():
            raise RegistrationError(path, "no such query file")
        if name is None and DAG_ID.fullmatch(path.stem):
            return deployment_of(path, settings)
        if name is None:
            raise RegistrationError(path, f"'{path.stem}' cannot name the query's results: give the query a name "
                                          "(letters, digits and '_', starting with a letter or '_')")
        try:
            source = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise RegistrationError(path, f"cannot be read: {error}") from None
        return replace(deployment_of_text(source, name, settings, source_name=path.name), path=path)
    check_registry_name(text, settings)
    path = settings.registry / f"{text}.rq"
    if not path.is_file():
        raise RegistrationError(settings.registry, f"no query is registered as {text!r} (there is no {text}.rq)")
    return deployment_of(path, settings)


def deployment_of_text(query: str | CompiledQuery, name: str, settings: Settings,
                       registry: RegistrySnapshot | None = None, source_name: str = "<query>") -> Deployment:
    """The deployment ``query`` (a text, named ``source_name`` in the parser's messages, or a text already
    compiled by ``compile_text``) would have if it were registered as ``name`` (nothing is written); the
    same ``RegistrationError``s as ``deployment_of``, and a name that collides with any other registered query
    or with the stored results of another query is refused too (``check_name_is_free``). ``registry``: the
    registry of ``settings`` already looked at (``registry_snapshot``)."""
    check_name_is_free(name, settings)
    if isinstance(query, CompiledQuery):
        compiled = query
    else:
        try:
            compiled = compile_text(query, source_name)
        except QueryError as error:
            raise RegistrationError(source_name, "\n" + error.render()) from None
    return _deployment(settings.registry / f"{name}.rq", name, compiled.text, compiled.facts, settings, registry,
                       compiled.digest, compiled.plan)


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


def _deployment(path: Path, name: str, text: str, facts: QueryFacts, settings: Settings,
                registry: RegistrySnapshot | None = None, digest: str | None = None,
                compiled: QueryPlan | None = None) -> Deployment:
    registry = registry_snapshot(settings) if registry is None else registry
    file_settings = facts.file_settings
    return Deployment(
        name=name,
        path=path,
        text=text,
        schedule=facts.schedule,
        inputs=_inputs(path, facts, registry.producers, settings),
        output_stream=facts.output_stream,
        registered_as=facts.registration[1] if facts.registration else None,
        registration_kind=facts.registration[0] if facts.registration else None,
        revision_horizon=file_settings.revision_horizon,
        panes=file_settings.panes or AUTO,
        digest=digest,
        compiled=compiled,
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


def ingested_streams(settings: Settings, registry: RegistrySnapshot | None = None) -> list[str]:
    """The streams registered queries read that no registered query produces, in IRI order. Queries that
    cannot be deployed (``deployment_of`` refuses them) are left out: their own loaders report them.
    ``registry``: the registry of ``settings`` already looked at (``registry_snapshot``)."""
    registry = registry_snapshot(settings) if registry is None else registry
    producers = registry.producers
    streams: set[str] = set()
    for path, facts in registry.entries:
        if facts is None:
            continue
        try:
            _check_name(path, path.stem, registry.files_before(path), [], settings)
            inputs = _inputs(path, facts, producers, settings)
        except RegistrationError:
            continue
        streams.update(stream.iri for stream in inputs if stream.producer is None)
    return sorted(streams)


def ingest_dag_id(stream: str) -> str:
    """The id of the DAG that ingests a stream's landing folder."""
    return "ingest_" + re.sub(r"[^A-Za-z0-9_]", "_", slug(stream))

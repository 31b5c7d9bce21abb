"""The registry: a folder of ``.rq`` files (``$CSPARQL_REGISTRY``, default ``dags/queries/``), each with the
Airflow DAG loader beside it, and what compiling each file tells the deployments of the others.

A file's stem is the registration's identity: its Airflow DAG id and the name of its result tables
(``registry_name``). A deployment depends on the other registry files (which of them produces a stream the
query reads). So that building one does not compile the whole registry, each file is compiled once per content
in a process, and what the others need of it (``QueryFacts``) is kept per content in the warehouse
(``_csparql/query_facts``): Airflow's DAG processor parses each DAG file in a process of its own, which then
compiles only its own query.
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
from importlib import resources
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import rdflib

from csparql.deploy.errors import RegistrationError
from csparql.deploy.file_settings import FileSettings
from csparql.deploy.settings import Settings
from csparql.core.language.errors import QueryError
from csparql.core.schedule import Schedule, evaluation_period
from csparql.storage.files import write_text_atomically
from csparql.storage.warehouse import output_stream_iri

if TYPE_CHECKING:  # the algebra: compiling a query loads it, building its DAG from the kept facts does not
    from csparql.core.algebra.operators import QueryPlan

DAG_ID = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
"""What can name a registered query: its DAG id and the name of its result tables."""


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


FileSignature = tuple[int, int, int, int, int]
"""What ``os.stat`` says of a file that any change to it alters: device, inode, size, modification and
status-change times (ns). Replacing a file (``write_text_atomically``, an editor's save-and-rename, ``git
checkout``) gives it another inode; writing it in place changes its modification time, and its status-change
time even when a tool sets the modification time back (``cp -p``, ``touch -d``): the kernel sets that one."""

RECENT_CHANGE_NS = 2_000_000_000
"""A file changed (modified or its status changed) less than this before it was read is read again next
time: a filesystem keeps times at a granularity (a clock tick; two seconds on FAT), so a second write within
the same tick, of the same size, would leave the signature as it was ("racy" entries, as git calls them)."""

_READ: dict[Path, tuple[FileSignature, str, str]] = {}
"""Per registry file, in this process: its signature when last read, its text and the SHA-256 of its bytes."""


def _signature(stat: os.stat_result) -> FileSignature:
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def _content(path: Path) -> tuple[str, str]:
    """The text of a registry file (line endings read as LF, as ``Path.read_text`` reads them) and the SHA-256
    of its bytes; ``RegistrationError`` when it cannot be read. A file whose signature (``FileSignature``) is
    the one it had when this process last read it, longer than ``RECENT_CHANGE_NS`` after its last change,
    is neither read nor hashed again."""
    key = path.absolute()
    try:
        cached = _READ.get(key)
        if cached is not None and cached[0] == _signature(os.stat(path)):
            return cached[1], cached[2]
        with open(path, "rb") as file:
            signature = _signature(os.fstat(file.fileno()))  # before reading: a later write changes it
            data = file.read()
        text = data.decode("utf-8")
    except (OSError, UnicodeDecodeError) as error:
        _READ.pop(key, None)
        raise RegistrationError(path, f"cannot be read: {error}") from None
    text, digest = text.replace("\r\n", "\n").replace("\r", "\n"), hashlib.sha256(data).hexdigest()
    if max(signature[3], signature[4]) < time.time_ns() - RECENT_CHANGE_NS:
        _READ[key] = (signature, text, digest)
    else:
        _READ.pop(key, None)
    return text, digest


def read_registry_file(path: str | os.PathLike) -> tuple[str, str]:
    """The text of a registry file and the SHA-256 of its bytes, read only when it changed since this process
    last read it (``_content``); ``RegistrationError`` when it cannot be read."""
    return _content(Path(path))


_COMPILED: dict[Path, tuple[str, QueryPlan | str]] = {}
"""Per registry file, in this process: the digest of the content last compiled and its plan, or the parser's
message. Plans are immutable (frozen dataclasses of tuples), so the deployments of one content share one."""


def _compile(path: Path, text: str, digest: str) -> QueryPlan | str:
    """The plan of ``text``, the content of ``path`` whose SHA-256 is ``digest``, or the parser's message (with
    line, column and caret); compiled once per content in this process."""
    key = path.absolute()
    cached = _COMPILED.get(key)
    if cached is None or cached[0] != digest:
        from csparql.core.frontend import compile_query  # the parser: loaded only where a query is compiled

        try:
            result: QueryPlan | str = compile_query(text, path.name)
        except QueryError as error:
            result = "\n" + error.render()
        cached = _COMPILED[key] = (digest, result)
    return cached[1]


def compiled_text(path: Path, text: str, digest: str) -> QueryPlan:
    """The plan of ``text``, the content of the registry file ``path`` whose SHA-256 is ``digest`` (compiled
    once per content in this process); ``RegistrationError`` when it is not a valid query."""
    plan = _compile(path, text, digest)
    if isinstance(plan, str):
        raise RegistrationError(path, plan)
    return plan


def compiled_file(path: Path, content: tuple[str, str] | None = None) -> tuple[str, str, QueryPlan]:
    """The name, text and plan of a registry file (``content``: its text and digest when already read);
    ``RegistrationError`` when its name cannot name a query, it cannot be read, or it is not a valid query."""
    name = registry_name(path)
    text, digest = _content(path) if content is None else content
    return name, text, compiled_text(path, text, digest)


def _output_stream(plan: QueryPlan) -> str | None:
    registration = plan.registration
    if registration is not None and registration.kind == "STREAM":
        return str(output_stream_iri(registration.name))
    return None


@dataclass(frozen=True)
class QueryFacts:
    """What compiling one registry file tells the deployments of the others and its own DAG: the stream it
    produces (``REGISTER STREAM``; None otherwise), its schedule (None for a one-shot query), the streams it
    reads, in query order, and its registration (``QUERY`` or ``STREAM`` and the name it registers; None for
    a one-shot query). Kept per file content, in memory and in the warehouse (``registry_facts``), so that
    building one query's deployment compiles neither the whole registry nor, once its content is known,
    the query itself."""

    output_stream: str | None
    schedule: Schedule | None
    streams: tuple[str, ...]
    registration: tuple[str, str] | None = None
    file_settings: FileSettings = FileSettings()

    @classmethod
    def of(cls, plan: QueryPlan, file_settings: FileSettings = FileSettings()) -> QueryFacts:
        """The facts of ``plan``, whose text sets ``file_settings`` (``FileSettings.of``)."""
        registration = plan.registration
        return cls(
            output_stream=_output_stream(plan),
            schedule=Schedule.of(plan) if evaluation_period(plan) is not None else None,
            streams=tuple(str(stream.iri) for stream in plan.streams),
            registration=(registration.kind, registration.name) if registration is not None else None,
            file_settings=file_settings,
        )

    def to_dict(self) -> dict:
        """A JSON-ready form that ``from_dict`` reads back."""
        return {"output_stream": self.output_stream, "streams": list(self.streams),
                "schedule": self.schedule.to_dict() if self.schedule else None,
                "registration": list(self.registration) if self.registration else None,
                "file_settings": self.file_settings.to_dict()}

    @classmethod
    def from_dict(cls, data: dict) -> QueryFacts:
        """The facts ``to_dict`` gave; ``ValueError``, ``KeyError`` or ``TypeError`` for anything else (a
        damaged cache file)."""
        output, streams, schedule = data["output_stream"], data["streams"], data["schedule"]
        registration = data["registration"]
        if not (output is None or isinstance(output, str)) or not _strings(streams):
            raise ValueError("not the facts of a query")
        if registration is not None and not (_strings(registration) and len(registration) == 2):
            raise ValueError("not the registration of a query")
        if schedule is not None:
            if type(schedule["period"]) is not int or not _strings([w["stream"] for w in schedule["windows"]]):
                raise ValueError("not the schedule of a query")
            schedule = Schedule.from_dict(schedule)  # each window checks its own numbers
        return cls(output, schedule, tuple(streams), tuple(registration) if registration else None,
                   FileSettings.from_dict(data["file_settings"]))


@dataclass(frozen=True)
class CompiledQuery:
    """A query text compiled once for every step that previews, registers and deploys it: the text with its
    line endings normalised, its SHA-256, its plan and its facts, with the settings of its own comment lines
    (``compile_text``)."""

    text: str
    digest: str
    plan: QueryPlan
    facts: QueryFacts

    @property
    def registered_name(self) -> str | None:
        """The name of its REGISTER clause (None for a one-shot query)."""
        return self.plan.registration.name if self.plan.registration else None


def normalized_text(text: str) -> str:
    """``text`` with its line endings as the registry stores them (a browser sends ``\\r\\n``)."""
    return text.replace("\r\n", "\n").replace("\r", "\n")


def compile_text(text: str, source_name: str = "<query>") -> CompiledQuery:
    """The compiled query of ``text``, compiled once per text in this process (the ``COMPILED_TEXTS`` most
    recent are kept): a register request previews, checks and deploys one compilation. ``QueryError`` (with
    line, column and caret, the text named ``source_name``) when it is not a valid query;
    ``RegistrationError`` naming ``source_name`` and the line when a settings line is not valid
    (``FileSettings``)."""
    text = normalized_text(text)
    compiled = _COMPILED_TEXTS.get(text)
    if compiled is None:
        from csparql.core.frontend import compile_query  # the parser: loaded only where a query is compiled

        plan = compile_query(text, source_name)
        facts = QueryFacts.of(plan, FileSettings.of(Path(source_name), text))
        compiled = CompiledQuery(text, hashlib.sha256(text.encode("utf-8")).hexdigest(), plan, facts)
        _COMPILED_TEXTS[text] = compiled
        while len(_COMPILED_TEXTS) > COMPILED_TEXTS:
            _COMPILED_TEXTS.popitem(last=False)
    _COMPILED_TEXTS.move_to_end(text)
    return compiled


COMPILED_TEXTS = 64
"""How many compiled texts a process keeps (``compile_text``); plans are immutable, so every user shares one."""

_COMPILED_TEXTS: OrderedDict[str, CompiledQuery] = OrderedDict()


def _strings(values: object) -> bool:
    return isinstance(values, list) and all(isinstance(value, str) for value in values)


_FACTS: dict[Path, tuple[str, QueryFacts | None]] = {}
"""Per registry file, in this process: the digest of its content and its facts (None: it does not compile)."""

FACTS_FORMAT = 3
"""The version of the compile cache's files (``Warehouse.query_facts``); part of ``code_version``."""


@functools.cache
def code_version() -> str:
    """Names the code that compiles: a digest of csparql's sources (path, size and modification time of each
    ``.py`` and ``.lark`` file), of rdflib's and Python's versions and of ``FACTS_FORMAT``. The compile cache
    keeps facts per code version: another compiler may read the same text differently."""
    package = Path(str(resources.files("csparql")))
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


def store_facts(digest: str, facts: QueryFacts | None, settings: Settings) -> None:
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


def _facts(path: Path, text: str, digest: str, settings: Settings) -> QueryFacts | None:
    """What compiling the registry file ``path``, whose content is ``text`` with SHA-256 ``digest``, tells;
    None when it is not a valid query. From this process's memory, else from the warehouse's compile cache,
    else compiled (and then kept in both); keyed by the file's content, so that an edit is seen at once."""
    key = path.absolute()
    cached = _FACTS.get(key)
    if cached is not None and cached[0] == digest:
        return cached[1]
    found, facts = _stored_facts(digest, settings)
    if not found:
        plan = _compile(path, text, digest)
        facts = None if isinstance(plan, str) else _facts_of(path, text, plan)
        store_facts(digest, facts, settings)
    _FACTS[key] = (digest, facts)
    return facts


def _facts_of(path: Path, text: str, plan: QueryPlan) -> QueryFacts | None:
    """The facts of the registry file ``path`` whose text ``text`` compiled to ``plan``; None when a settings
    line of it is not valid (its deployment says which)."""
    try:
        return QueryFacts.of(plan, FileSettings.of(path, text))
    except RegistrationError:
        return None


@dataclass(frozen=True)
class RegistrySnapshot:
    """The registry as one look at it found it: its query files in name order, each with its facts
    (``_facts``; None: it cannot be deployed on its own: its name, unreadable, not a valid query), and the
    text and digest of each readable file with a valid name. Taken once per request, command or DAG file
    (``registry_snapshot``) and handed to everything that needs the other queries (``deployment_of``,
    ``ingested_streams``), so that each file is read at most once, not once per query."""

    folder: Path
    entries: tuple[tuple[Path, QueryFacts | None], ...]
    contents: dict[Path, tuple[str, str]] = field(default_factory=dict, repr=False, compare=False)

    def content(self, path: Path) -> tuple[str, str] | None:
        """The text and digest of the registry file ``path`` as this snapshot read it; None when it did not
        (not one of its files, a name that cannot name a query, unreadable)."""
        return self.contents.get(Path(path).absolute())

    def facts(self, path: Path) -> QueryFacts | None:
        """The facts of the registry file ``path`` as this snapshot found them; None when it has none (not one
        of its files, or it cannot be deployed on its own)."""
        return self._facts_by_file.get(Path(path).absolute())

    @functools.cached_property
    def _facts_by_file(self) -> dict[Path, QueryFacts | None]:
        return {path.absolute(): facts for path, facts in self.entries}

    @property
    def files(self) -> list[Path]:
        """The registry's query files, in name order."""
        return [path for path, _ in self.entries]

    def files_before(self, path: Path) -> list[Path]:
        """The registry's query files whose names come before ``path``'s."""
        return [other for other, _ in self.entries if other.name < path.name]

    @functools.cached_property
    def producers(self) -> dict[str, tuple[Path, Schedule | None]]:
        """Which registry file produces each output stream (the first by file name wins), with its schedule;
        files that do not parse produce nothing."""
        return producers_in(list(self.entries))


def registry_snapshot(settings: Settings) -> RegistrySnapshot:
    """The registry of ``settings`` as it is now (``RegistrySnapshot``). Lists the folder and asks each file
    for its signature; only files new or changed since this process last read them are read (``_content``),
    and only contents new to this process and to the warehouse's compile cache are compiled. The files gone
    since are forgotten."""
    files = registry_files(settings)
    folder = settings.registry.absolute()
    present = {path.absolute() for path in files}
    for cache in (_READ, _FACTS, _COMPILED):
        for gone in [key for key in list(cache) if key.parent == folder and key not in present]:
            cache.pop(gone, None)  # another thread (the pages) may have forgotten it too
    entries, contents = [], {}
    for path in files:
        try:
            registry_name(path)
            text, digest = contents[path.absolute()] = _content(path)
        except RegistrationError:
            entries.append((path, None))  # its own deployment says why
            continue
        entries.append((path, _facts(path, text, digest, settings)))
    return RegistrySnapshot(settings.registry, tuple(entries), contents)


def registry_facts(settings: Settings) -> list[tuple[Path, QueryFacts | None]]:
    """Each registry file in name order, with its facts (``_facts``): the registry as the deployment of any
    one of its queries sees it (``registry_snapshot``)."""
    return list(registry_snapshot(settings).entries)


def registry_files(settings: Settings) -> list[Path]:
    """The registry's query files, in name order."""
    return sorted(settings.registry.glob("*.rq")) if settings.registry.is_dir() else []


def producers_of(settings: Settings) -> dict[str, tuple[Path, Schedule | None]]:
    """Which registry file produces each output stream (the first by file name wins), with its schedule;
    files that do not parse produce nothing."""
    return registry_snapshot(settings).producers


def producers_in(registry: list[tuple[Path, QueryFacts | None]]) -> dict[str, tuple[Path, Schedule | None]]:
    """``producers_of`` over registry files and their facts already read (``registry_facts``)."""
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


def sync_loaders(settings: Settings) -> tuple[list[Path], list[Path]]:
    """Write the loader of every registry file that lacks one (or has an outdated one) and remove loaders whose
    query is gone; returns (written, removed). When a registry file was changed by hand since its loader was
    written (or a loader was written or removed), every loader and the registry's shared DAG files are touched
    (``touch_dag_files``): Airflow's DAG processor then parses the whole registry again at once, a hand edit
    being able to change any query's DAG."""
    written, removed, edited = [], [], False
    for query in registry_files(settings):
        loader = query.with_suffix(".py")
        if not loader.exists() or loader.read_text(encoding="utf-8") != LOADER.format(query=query.name):
            written.append(write_loader(query))
        elif os.stat(query).st_mtime_ns > os.stat(loader).st_mtime_ns:
            edited = True
    for loader in sorted(settings.registry.glob("*.py")) if settings.registry.is_dir() else []:
        if not loader.with_suffix(".rq").exists() and loader.read_text(encoding="utf-8").startswith("# Airflow DAG loader for the C-SPARQL"):
            loader.unlink()
            removed.append(loader)
    if edited or written or removed:
        touch_dag_files([query.with_suffix(".py") for query in registry_files(settings)] + shared_dag_files(settings))
    return written, removed


def shared_dag_files(settings: Settings) -> list[Path]:
    """The DAG files beside the registry folder that build DAGs of the whole registry: those that call
    ``csparql_dags`` (``dags/csparql_streams.py``, the ingestion and revision DAGs; a one-line factory file)."""
    folder = settings.registry.parent
    found = []
    for path in sorted(folder.glob("*.py")) if folder.is_dir() else []:
        try:
            if "csparql_dags(" in path.read_text(encoding="utf-8", errors="replace"):
                found.append(path)
        except OSError:
            continue
    return found


def touch_dag_files(paths: list[Path]) -> list[Path]:
    """Set the modification time of each DAG file of ``paths`` that exists to now; returns those touched.
    Airflow's DAG processor (``[dag_processor] file_parsing_sort_mode = modified_time``, its default) parses a
    DAG file modified since its last parse at its next loop, without waiting for ``min_file_process_interval``."""
    touched = []
    for path in paths:
        with contextlib.suppress(OSError):
            os.utime(path)
            touched.append(path)
    return touched


def dependent_dag_files(before: RegistrySnapshot, path: Path, facts: QueryFacts | None,
                        settings: Settings) -> list[Path]:
    """The DAG files whose DAGs change when the registry file ``path`` goes from what ``before`` saw of it to
    ``facts`` (None: removed, or not a valid query): none when its facts stay the same (only its own DAG
    changes, and its loader is written anew); else the loaders of the other queries that read a stream it
    produced or produces (their producer), and the shared DAG files (``shared_dag_files``: which streams are
    ingested, which queries are revised)."""
    key = Path(path).absolute()
    existed = any(other.absolute() == key for other in before.files)
    old = next((old for other, old in before.entries if other.absolute() == key), None)
    if existed and old == facts:
        return []
    streams = {f.output_stream for f in (old, facts) if f is not None and f.output_stream is not None}
    consumers = [other.with_suffix(".py") for other, its in before.entries
                 if other.absolute() != key and its is not None and streams.intersection(its.streams)]
    return consumers + shared_dag_files(settings)

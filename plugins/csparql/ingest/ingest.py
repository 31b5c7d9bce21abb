"""Ingest: timestamped triples into stream tables, and static graphs into static tables, each in one commit.

``ingest_stream(spark, warehouse, iri, files, ...)`` lands RDF stream files in the stream's Delta table;
``load_static(spark, warehouse, graph, files, ...)`` loads a static graph (``graph=None``: the default one).
Both return an ``IngestReport``.

Inputs
    Timestamped N-Quads (``.nq``/``.tnq``): the fourth term is the triple's timestamp, an ``xsd:dateTime`` or
    epoch milliseconds (see ``csparql.ingest.lines``); lines without one take ``--timestamp`` if given.
    TriG, TriX, JSON-LD, standard N-Quads: timestamped named graphs (``csparql.ingest.graphs``). N-Triples and any
    other format rdflib reads (Turtle, RDF/XML, N3, ...; from the extension or ``format``) take ``--timestamp``.

Parallel parsing (line formats)
    Files are split into byte ranges. A first Spark pass (``mapInArrow`` over one row per range) counts the
    newlines of each range; prefix sums give each range's first line number. The second pass parses the lines
    that START in each range (reading past its end to finish the last one), so line numbers are exact, with
    no line loop in the driver and only the DataFrame API (it works over Spark Connect). The executors open
    the input files by path, so they must see them (local mode, or a filesystem shared with the cluster), as
    they see the table folder they write to. Other formats are parsed by rdflib in the driver; a file rdflib
    cannot parse is rejected whole, with the parser's message and position.

Rejects
    A malformed line never stops an ingest: it is written to the rejects file with its line number and the
    reason, and the good lines land. Rejects files are TSV without a header, one reject per line::

        file <TAB> line <TAB> reason <TAB> original line

    (backslash, tab, CR and LF escaped as ``\\\\ \\t \\r \\n``). By default each input's rejects go next to
    it, in ``<input>.rejects.tsv``; ``rejects=PATH`` collects them all in one file. Executors write each
    range's rejects to ``<table>/ingest-<id>-rejects/`` and the driver merges them in file and line order.

Timestamps in the future
    A stream's watermark is the greatest timestamp landed, and it never goes back, so one triple dated
    9999-12-31 would make every later window of its stream look complete. An ingest therefore accepts
    timestamps up to its ``FutureLimit``: the driver's wall clock when the ingest starts plus
    ``max_future_skew`` (default ``csparql.storage.watermarks.MAX_FUTURE_SKEW``, one hour; ``CSPARQL_MAX_FUTURE_SKEW``
    and ``--max-future-skew`` set it). The executors check it as they parse each timestamp: a later one
    rejects its line, with a reason naming the timestamp and the bound, and the good lines land. A
    ``--timestamp`` past the bound refuses the whole request. The watermark an ingest records never exceeds
    the bound. The skew is at most 100 years (``MAX_DURATION``) and the bound never passes 9500-01-01, the
    latest instant csparql evaluates, so no watermark leaves the instants it evaluates.

The same content lands once
    Each commit records what identifies its content (``CONTENT_SHA256``, ``content_digest``: the stream or
    graph, each input file's SHA-256, ``--timestamp``) and, for a stream, the watermark its ingest advances the
    stream to (``LANDED_WATERMARK``). An ingest of content a commit of the stream landed already (looked up in
    the table's Delta history, as far back as its log goes) reads and writes nothing but that watermark (the
    ingest that landed it may have stopped before recording it) and reports the commit (``already_landed``);
    so does a static append of content the graph holds since its latest replace. ``again=True`` lands it once
    more. The per-predicate statistics an ingest that stopped after its commit did not record stay missing.

Writes
    Spark writes the rows as Parquet into a stage folder inside the table folder, ``<table>/ingest-<id>/``
    (partitioned by hour bucket for streams); the files are then committed with delta-rs in ONE commit and
    stay where they are. Any failure before the commit deletes the stage folder: the table is left at the
    version it had. Statistics (triples per predicate) are recorded after the commit.

Arrival order (streams)
    ``arrival = batch << 40 | ordinal``: ``batch`` is the table's version when the ingest starts, plus one
    (the version its commit will normally get), so a later ingest has larger arrivals; ``ordinal`` numbers the
    lines of the ingest's files in order (file 2's lines follow all of file 1's; within a file, the line
    number), so file and line order hold. Room: 2^23 ingests per table, 2^40 lines per ingest. For rdflib
    formats a triple's ordinal follows the parser's order (timestamped graphs: by instant, then graph name).

Blank nodes
    Labels are scoped per ingest and file: ``_:b1`` of file 0 of ingest ``3f9c2a1b0e7d`` is stored as
    ``i3f9c2a1b0e7df0_b1``. Two ingests (or two files) never share a blank node, as RDF merging requires; a
    static graph loaded twice holds its blank-node triples twice (they are different nodes).

Static graphs
    A static table is a SET of triples (the compiler relies on it): a load drops duplicates within itself,
    and an append also drops the triples already stored. ``replace=True`` replaces the graph's content with
    the good triples of the input, in one commit (an empty input empties the graph; an input whose every
    line or file was rejected leaves it as it was). Two appends to the same graph running at the same time
    can both add a triple neither saw stored; loads of one graph are meant to run one at a time.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import rdflib
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from csparql.ingest import graphs
from csparql.ingest.lines import FutureLimit
from csparql.ingest.ranges import ByteRange, RangeJob, newline_counter, range_parser
from csparql.ingest.rejects import escape_field, line_text, parser_position, read_rejects, unescape_field
from csparql.spark.schema import STATIC_FILE_SCHEMA, STREAM_FILE_SCHEMA, spark_schema
from csparql.ingest.event_times import staged_event_times
from csparql.storage import delta, schema
from csparql.storage.instants import MAX_MICROS, MIN_MICROS, hour_buckets
from csparql.storage.statistics import record_statistics
from csparql.storage.tables import (
    CONTENT_SHA256, INGEST_ID, INPUTS, IRI_PROPERTY, KIND_PROPERTY, LANDED_WATERMARK, OPERATION, TARGET,
)
from csparql.storage.terms import BLANK, term_row
from csparql.storage.warehouse import Warehouse, iri_problem
from csparql.storage.watermarks import MAX_FUTURE_SKEW, advance_watermark, check_future_skew, future_bound
from csparql.windows import format_duration, format_instant, parse_instant

LINE_FORMATS = ("ntriples", "nquads")
QUAD_FORMATS = ("nquads", "trig", "trix", "json-ld", graphs.GRAPH_NQUADS)
GRAPH_FORMATS = ("trig", "trix", "json-ld", graphs.GRAPH_NQUADS)  # a stream's file in these: timestamped graphs
FORMAT_NAMES = {
    "nt": "ntriples", "ntriples": "ntriples", "n-triples": "ntriples",
    "nq": "nquads", "nquads": "nquads", "n-quads": "nquads", "tnq": "nquads",
    "ttl": "turtle", "turtle": "turtle",
    "n3": "n3",
    "xml": "xml", "rdf": "xml", "rdfxml": "xml", "rdf/xml": "xml", "owl": "xml", "application/rdf+xml": "xml",
    "trig": "trig", "trix": "trix",
    "json-ld": "json-ld", "jsonld": "json-ld", "json": "json-ld",
    "hext": "hext",
}
EXTENSIONS = {
    ".nt": "ntriples", ".nq": "nquads", ".tnq": "nquads", ".ttl": "turtle", ".n3": "n3", ".rdf": "xml",
    ".xml": "xml", ".owl": "xml", ".trig": "trig", ".trix": "trix", ".jsonld": "json-ld", ".json": "json-ld",
}
BATCH_SHIFT = 40
MAX_BATCH = (1 << (63 - BATCH_SHIFT)) - 1
MIN_RANGE_BYTES, MAX_RANGE_BYTES = 1 << 20, 64 << 20
SHOWN_REJECTS = 10


class InputError(Exception):
    """The command was used wrongly (a missing or unreadable file, an unknown format, a bad option): nothing
    was read or written."""


@dataclass(frozen=True)
class Reject:
    """One rejected line (or file, for formats parsed whole): fields as written in the rejects file."""

    file: str
    line: int
    reason: str
    text: str


@dataclass
class IngestReport:
    """What one ingest or static load did."""

    target: str  # the stream IRI, the graph IRI, or "" for the default graph
    table: Path
    landed: int = 0  # triples committed
    rejected: int = 0  # rejected lines (a file rdflib could not parse counts once)
    files: int = 0  # input files read
    rejects_paths: tuple[Path, ...] = ()
    min_ts: int | None = None  # microseconds, of the triples landed (streams)
    max_ts: int | None = None  # the stream's watermark after this ingest
    data_files: int = 0  # Parquet files committed
    version: int | None = None  # the table version committed (None: nothing to commit)
    counts: dict[str, int] = field(default_factory=dict)  # triples landed per predicate
    first_rejects: list[Reject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    already_landed: Landed | None = None  # the commit that landed the same content before: nothing landed now

    @property
    def rejects_path(self) -> Path | None:
        return self.rejects_paths[0] if self.rejects_paths else None

    @property
    def watermark(self) -> int | None:
        return self.max_ts


@dataclass(frozen=True)
class Landed:
    """A commit that landed some content: its table version, when it was committed (µs) and, for a stream,
    the watermark its ingest advances the stream to (None when the commit does not say)."""

    version: int
    committed_at: int
    watermark: int | None = None

    def describe(self) -> str:
        return f"version {self.version} at {format_instant(self.committed_at)}"


@dataclass(frozen=True)
class Input:
    index: int
    path: Path  # resolved
    format: str  # a FORMAT_NAMES value
    name: str = ""  # as given, for messages

    @property
    def line_based(self) -> bool:
        return self.format in LINE_FORMATS


# ---------------------------------------------------------------------------------------------------------
# Checking the request (before Spark starts)
# ---------------------------------------------------------------------------------------------------------

def check_iri(text: str, what: str) -> str:
    """An IRI as queries write it (``<...>`` accepted), or InputError (``csparql.storage.warehouse.iri_problem``).
    Relative IRIs are accepted, since a query without BASE keeps them as written (decision 5), e.g.
    ``www.uc.eu/tollgates.trdf``."""
    problem = iri_problem(text, what)
    if problem is not None:
        raise InputError(problem)
    iri = text.strip()
    return iri[1:-1] if iri.startswith("<") and iri.endswith(">") else iri


def format_of(path: Path, explicit: str | None) -> str:
    """The file's format: ``explicit`` (a name or an extension) or from the extension."""
    if explicit:
        name = FORMAT_NAMES.get(explicit.lower().lstrip("."))
        if name is None:
            known = ", ".join(sorted(set(FORMAT_NAMES.values())))
            raise InputError(f"unknown format '{explicit}'; use one of {known}")
        return name
    name = EXTENSIONS.get(path.suffix.lower())
    if name is None:
        raise InputError(
            f"{path}: cannot tell the format from the extension '{path.suffix}'; pass --format "
            "(nquads, ntriples, turtle, xml, n3, trig, json-ld, ...)"
        )
    return name


def check_inputs(files: Sequence[str | os.PathLike], format: str | None) -> list[Input]:
    """The input files with their formats; InputError for a missing, unreadable or unknown one."""
    if not files:
        raise InputError("no input files")
    inputs = []
    for index, name in enumerate(files):
        path = Path(name)
        if not path.exists():
            raise InputError(f"{name}: no such file")
        if path.is_dir():
            raise InputError(f"{name}: is a directory, not an RDF file")
        if not os.access(path, os.R_OK):
            raise InputError(f"{name}: cannot read it (permission denied)")
        inputs.append(Input(index, path.resolve(), format_of(path, format), str(name)))
    return inputs


def future_limit(max_future_skew: int, now: int | None = None) -> FutureLimit:
    """The latest timestamp an ingest starting at ``now`` (µs; default: the wall clock) accepts: ``now`` plus
    ``max_future_skew``, and never past the latest instant csparql evaluates
    (``csparql.storage.watermarks.future_bound``); InputError for a skew that is negative or longer than 100
    years."""
    try:
        check_future_skew(max_future_skew)
    except ValueError as error:
        raise InputError(f"the maximum future skew {error} (--max-future-skew, CSPARQL_MAX_FUTURE_SKEW)") from None
    latest = future_bound(max_future_skew, now)
    return FutureLimit(latest, f"{format_instant(latest)}, the ingest's clock plus the maximum future skew "
                                  f"of {format_duration(max_future_skew)} (--max-future-skew, CSPARQL_MAX_FUTURE_SKEW)")


def check_timestamp(text: str | None, future: FutureLimit | None = None) -> int | None:
    """``--timestamp`` in microseconds (ISO 8601 with a zone, or epoch milliseconds), or InputError (also
    when it is later than ``future``)."""
    if text is None:
        return None
    try:
        micros = parse_instant(text)
    except ValueError as error:
        raise InputError(f"--timestamp: {error}") from None
    if not MIN_MICROS <= micros <= MAX_MICROS:
        raise InputError(f"--timestamp: {text} is outside years 1..9999")
    if future is not None and micros > future.latest:
        raise InputError(f"--timestamp: {text} is too far in the future: later than {future.described}")
    return micros


def rejects_targets(inputs: list[Input], rejects: str | os.PathLike | None) -> dict[int, Path]:
    """Where each input's rejects go (all to ``rejects`` when given), checked to be writable."""
    targets = {i.index: Path(rejects).resolve() if rejects else i.path.with_name(i.path.name + ".rejects.tsv")
               for i in inputs}
    for target in set(targets.values()):
        folder = target.parent
        if not folder.is_dir():
            raise InputError(f"cannot write the rejects file {target}: no folder {folder}")
        if target.is_dir():
            raise InputError(f"cannot write the rejects file {target}: it is a directory")
        if not os.access(folder, os.W_OK) or (target.exists() and not os.access(target, os.W_OK)):
            raise InputError(f"cannot write the rejects file {target}: permission denied")
    return targets


# ---------------------------------------------------------------------------------------------------------
# Content landed once
# ---------------------------------------------------------------------------------------------------------


def sha256_of(path: str | os.PathLike) -> str:
    """The file's SHA-256, in hex."""
    with open(path, "rb") as stream:
        return hashlib.file_digest(stream, "sha256").hexdigest()


def content_digest(target: str, files: Sequence[str | os.PathLike], timestamp: int | None = None,
                   timestamp_predicates: Sequence[str] = graphs.DEFAULT_TIMESTAMP_PREDICATES) -> str:
    """What identifies the content an ingest or a static load lands (``CONTENT_SHA256``): the SHA-256 of the
    stream's or graph's IRI (``<...>`` or not; "" for the default graph), of each input file's bytes in order,
    of the ``--timestamp`` its timestamp-less triples take (µs, None when not given) and of the predicates that
    timestamp named graphs when they are not the default ones."""
    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    record = {"target": target, "files": [sha256_of(f) for f in files], "timestamp": timestamp}
    if tuple(timestamp_predicates) != graphs.DEFAULT_TIMESTAMP_PREDICATES:
        record["timestamp_predicates"] = sorted(set(timestamp_predicates))
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode("utf-8")).hexdigest()


def landed_commit(path: str | os.PathLike, matches: Callable[[dict], bool],
                  after_version: int = -1) -> Landed | None:
    """The latest commit of the table newer than ``after_version`` whose history entry (with its commit
    metadata) ``matches``, None when there is none. A commit that replaced the table's content (a static load
    with ``replace``) hides the commits before it: what they landed is gone. Reads as far back as the table's
    log goes."""
    if not delta.exists(path):
        return None
    table = delta.open_table(path)
    newer = table.version() - after_version
    if newer <= 0:
        return None
    for commit in table.history(newer):  # newest first
        if matches(commit):
            mark = commit.get(LANDED_WATERMARK)
            return Landed(int(commit["version"]), int(commit["timestamp"]) * 1000,
                          int(mark) if mark is not None else None)
        if (commit.get("operationParameters") or {}).get("mode") == "Overwrite":
            return None
    return None


def landed_content(path: str | os.PathLike, digest: str, after_version: int = -1) -> Landed | None:
    """The latest commit of the table newer than ``after_version`` that landed the content ``digest``
    (``content_digest``), None when it has not landed (or a replace removed it since)."""
    return landed_commit(path, lambda commit: commit.get(CONTENT_SHA256) == digest, after_version)


def complete_watermark(warehouse: Warehouse, iri: str, landed: Landed, bound: int) -> None:
    """Advance the stream's watermark to where the ingest that committed ``landed`` advances it, as it would
    have done had it not stopped first; for a commit that does not record it, to the table's latest timestamp;
    never past ``bound`` (the clock plus the maximum future skew). A no-op when the watermark is there already."""
    mark = landed.watermark
    if mark is None:
        path = warehouse.stream(iri)
        latest = [f.max_ts for f in delta.live_files(delta.open_table(path), path) if f.max_ts is not None]
        mark = max(latest) if latest else None
    if mark is not None:
        advance_watermark(warehouse, iri, min(mark, bound), "ingest")


# ---------------------------------------------------------------------------------------------------------
# Ingest and load
# ---------------------------------------------------------------------------------------------------------


def check_stream_request(iri, files, timestamp=None, format=None, rejects=None, max_future_skew=MAX_FUTURE_SKEW,
                         timestamp_predicates=graphs.DEFAULT_TIMESTAMP_PREDICATES):
    """The checked arguments of ``ingest_stream`` (IRI, inputs, --timestamp in µs, rejects targets, and the
    latest timestamp accepted, from now and ``max_future_skew``), or InputError: everything that can be wrong
    with the request is found before Spark starts."""
    iri = check_iri(iri, "stream")
    if not timestamp_predicates:
        raise InputError("give at least one timestamp predicate")
    for predicate in timestamp_predicates:
        check_iri(predicate, "timestamp predicate")
    future = future_limit(max_future_skew)
    inputs = [dataclasses.replace(i, format=graphs.GRAPH_NQUADS) if i.format == "nquads" and graphs.names_graphs(i.path)
              else i for i in check_inputs(files, format)]
    default_micros = check_timestamp(timestamp, future)
    if default_micros is None:
        for item in inputs:
            if item.format != "nquads" and item.format not in GRAPH_FORMATS:
                raise InputError(
                    f"{item.name}: {item.format} has no timestamps; pass --timestamp T to give its triples one"
                )
    return iri, inputs, default_micros, rejects_targets(inputs, rejects), future


def check_static_request(graph, files, format=None, rejects=None):
    """The checked arguments of ``load_static`` (graph IRI or None, inputs, rejects targets), or InputError."""
    graph = None if graph is None else check_iri(graph, "graph")
    inputs = check_inputs(files, format)
    return graph, inputs, rejects_targets(inputs, rejects)


def ingest_stream(
    spark: SparkSession | None,
    warehouse: Warehouse,
    iri: str,
    files: Sequence[str | os.PathLike],
    timestamp: str | None = None,
    format: str | None = None,
    rejects: str | os.PathLike | None = None,
    commit_metadata: Mapping[str, str] | None = None,
    max_future_skew: int = MAX_FUTURE_SKEW,
    again: bool = False,
    timestamp_predicates: Sequence[str] = graphs.DEFAULT_TIMESTAMP_PREDICATES,
) -> IngestReport:
    """Land stream files in the stream's table in one commit (see the module docstring); ``commit_metadata``
    is recorded with the commit, beside what the ingest records itself. Triples timestamped later than the
    wall clock plus ``max_future_skew`` (µs) are rejected, and the watermark never passes that bound.

    The same content (``content_digest``) lands once: when a commit of the stream landed it already, nothing
    is read or written but the watermark that commit's ingest advances the stream to (it may have stopped
    before), and the report's ``already_landed`` names that commit; ``again=True`` lands it once more. ``spark``
    may be None only when the content has landed (nothing else needs Spark then). A TriG, TriX, JSON-LD or N-Quads
    file's named graphs are timestamped by a triple about each with one of ``timestamp_predicates``."""
    iri, inputs, default_micros, targets, future = check_stream_request(iri, files, timestamp, format, rejects,
                                                                         max_future_skew, timestamp_predicates)
    path = warehouse.stream(iri)
    report = IngestReport(iri, path, files=len(inputs))
    digest = content_digest(iri, [i.path for i in inputs], default_micros, timestamp_predicates)
    landed = None if again else landed_content(path, digest)
    if landed is not None:
        report.already_landed = landed
        try:
            complete_watermark(warehouse, iri, landed, future.latest)
        except Exception as error:  # the data is committed: say so rather than fail
            report.warnings.append(f"the stream's watermark was not advanced: {error}")
        return report
    table = delta.ensure(path, schema.STREAM, schema.STREAM_PARTITIONS, {IRI_PROPERTY: iri, KIND_PROPERTY: "stream"})
    batch = table.version() + 1
    if batch > MAX_BATCH:
        raise delta.StorageError(f"the stream table at {path} has too many versions for the arrival encoding")
    job = _Job(spark, path, inputs, targets, stream=True, default_micros=default_micros, batch=batch,
               explicit_rejects=rejects, future=future, timestamp_predicates=timestamp_predicates)

    def commit(files):
        mark = {} if report.max_ts is None else {LANDED_WATERMARK: str(min(report.max_ts, future.latest))}
        delta.commit_files(
            path, [(f, {"bucket": b}) for f, b in files], schema.STREAM, schema.STREAM_PARTITIONS, "ts",
            metadata={**job.commit_metadata("ingest", iri), **(commit_metadata or {}), CONTENT_SHA256: digest,
                      **mark, **staged_event_times(spark, warehouse, [f for f, _ in files])},
        )

    job.run(report, commit)
    if report.version is not None:
        _record(report, warehouse, iri, "stream", replaces=False)
        if report.max_ts is not None:
            try:
                advance_watermark(warehouse, iri, min(report.max_ts, future.latest), "ingest")
            except Exception as error:  # the data is committed: say so rather than fail
                report.warnings.append(f"the triples landed, but the stream's watermark was not advanced: {error}")
    return report


def load_static(
    spark: SparkSession | None,
    warehouse: Warehouse,
    graph: str | None,
    files: Sequence[str | os.PathLike],
    replace: bool = False,
    format: str | None = None,
    rejects: str | os.PathLike | None = None,
    again: bool = False,
) -> IngestReport:
    """Load a static graph (``graph=None``: the default graph), appending or, with ``replace``, replacing its
    content, in one commit; the table stays a set of triples. An append of content (``content_digest``) the
    graph holds already, landed by a commit since its latest replace, reads and writes nothing (the report's
    ``already_landed`` names that commit): its blank nodes would be new nodes, so its blank-node triples would
    be stored twice. ``again=True`` appends it once more. ``spark`` may be None only when the content is there."""
    graph, inputs, targets = check_static_request(graph, files, format, rejects)
    path = warehouse.static(graph)
    report = IngestReport(graph or "", path, files=len(inputs))
    digest = content_digest(graph or "", [i.path for i in inputs])
    landed = None if again or replace else landed_content(path, digest)
    if landed is not None:
        report.already_landed = landed
        return report
    properties = {KIND_PROPERTY: "static"} if graph is None else {IRI_PROPERTY: graph, KIND_PROPERTY: "static"}
    delta.ensure(path, schema.STATIC, None, properties)
    job = _Job(spark, path, inputs, targets, stream=False, replace=replace, explicit_rejects=rejects)

    def commit(staged):
        metadata = {**job.commit_metadata("load-static", graph or ""), CONTENT_SHA256: digest}
        delta.commit_files(
            path, [(f, {}) for f, _ in staged], schema.STATIC, None, None, metadata=metadata,
            mode="overwrite" if replace else "append",
        )

    job.run(report, commit, always_commit=replace)
    if report.version is not None:
        _record(report, warehouse, graph, "static", replaces=replace)
    return report


def _record(report: IngestReport, warehouse: Warehouse, source: str | None, kind: str, replaces: bool) -> None:
    try:
        record_statistics(warehouse, source, kind, report.counts, replaces=replaces)
    except Exception as error:  # the data is committed: say so rather than fail
        report.warnings.append(f"the triples landed, but their statistics were not recorded: {error}")


# ---------------------------------------------------------------------------------------------------------
# One ingest: parse, stage, commit
# ---------------------------------------------------------------------------------------------------------


def _parallelism(spark: SparkSession) -> int:
    try:
        value = spark.conf.get("spark.default.parallelism", None)
        if value:
            return max(1, int(value))
    except Exception:  # Spark Connect may refuse to read it
        pass
    return max(1, os.cpu_count() or 1)


class _Job:
    def __init__(self, spark, path: Path, inputs: list[Input], targets: dict[int, Path], stream: bool,
                 default_micros: int | None = None, batch: int = 0, replace: bool = False,
                 explicit_rejects: str | os.PathLike | None = None, future: FutureLimit | None = None,
                 timestamp_predicates: Sequence[str] = graphs.DEFAULT_TIMESTAMP_PREDICATES):
        self.spark = spark
        self.path = Path(path)
        self.inputs = inputs
        self.targets = targets
        self.stream = stream
        self.default_micros = default_micros
        self.future = future
        self.timestamp_predicates = tuple(timestamp_predicates)
        self.batch = batch
        self.replace = replace
        self.explicit_rejects = Path(explicit_rejects).resolve() if explicit_rejects else None
        self.id = uuid.uuid4().hex[:12]
        self.stage = self.path / f"ingest-{self.id}"
        self.rejects_folder = self.path / f"ingest-{self.id}-rejects"
        self.rejects: list[tuple[int, int, str, str]] = []  # (file index, line, reason, text), escaped

    def scope(self, file_index: int) -> str:
        return f"i{self.id}f{file_index}_"

    def commit_metadata(self, operation: str, target: str) -> dict[str, str]:
        return {OPERATION: operation, TARGET: target, INGEST_ID: self.id,
                INPUTS: json.dumps([str(i.path) for i in self.inputs])}

    def run(self, report: IngestReport, commit, always_commit: bool = False) -> None:
        committed = False
        try:
            # a full disk (Spark's write, the rejects, the commit) or a corrupt log: one line naming the table
            with delta.named_failures(self.path, "writing to"):
                self.rejects_folder.mkdir(parents=True, exist_ok=True)
                frame = self.parse()
                staged = self.write(frame) if frame is not None else []
                self.summarise(report, staged)
                self.write_rejects(report)
                if always_commit and not staged and report.rejected:
                    # every input was rejected: emptying the graph is surely not what was meant
                    report.warnings.append("nothing was replaced: no triple of the input could be read")
                elif staged or always_commit:
                    commit(staged)
                    committed = True
                    report.version = delta.open_table(self.path).version()
                    report.data_files = len(staged)
        finally:
            shutil.rmtree(self.rejects_folder, ignore_errors=True)
            if not committed:
                shutil.rmtree(self.stage, ignore_errors=True)

    # parsing

    def parse(self) -> DataFrame | None:
        line_inputs = [i for i in self.inputs if i.line_based]
        spans: dict[int, int] = {}
        frames = []
        ranges = self.split(line_inputs)
        if ranges:
            ranges = self.count_lines(ranges, spans)
        whole = {}
        for item in self.inputs:
            if not item.line_based:
                whole[item.index] = self.parse_whole(item)
                spans[item.index] = whole[item.index].num_rows
        bases, offset = {}, 0
        for item in self.inputs:
            bases[item.index] = (self.batch << BATCH_SHIFT) + offset
            offset += spans[item.index]
        if offset >= 1 << BATCH_SHIFT:
            raise InputError(f"one ingest holds at most {1 << BATCH_SHIFT} lines; split the input")
        parsed_schema = spark_schema(_parsed_schema(self.stream))
        if ranges:
            jobs = [RangeJob(r, self.scope(r.file_index), bases[r.file_index], self.stream, self.default_micros,
                                self.future) for r in ranges]
            parser = range_parser(jobs, str(self.rejects_folder))
            frames.append(self._ids(len(ranges)).mapInArrow(parser, parsed_schema))
        for index, arrow in whole.items():
            if arrow.num_rows:
                if self.stream:
                    arrow = arrow.set_column(4, "arrival", pc.add(arrow.column("arrival"), bases[index]))
                frames.append(self.spark.createDataFrame(arrow, schema=parsed_schema))
        if not frames:
            return None
        frame = frames[0]
        for other in frames[1:]:
            frame = frame.unionByName(other)
        if self.stream:
            return frame.select("s", "p", "o", F.timestamp_micros("ts_micros").alias("ts"), "arrival", "bucket")
        return frame

    def _ids(self, count: int) -> DataFrame:
        partitions = min(count, 4 * _parallelism(self.spark))
        return self.spark.range(0, count, 1, partitions)

    def split(self, inputs: list[Input]) -> list[ByteRange]:
        sizes = {i.index: i.path.stat().st_size for i in inputs}
        total = sum(sizes.values())
        target = min(MAX_RANGE_BYTES, max(MIN_RANGE_BYTES, -(-total // (3 * _parallelism(self.spark)))))
        ranges = []
        for item in inputs:
            size = sizes[item.index]
            pieces = max(1, -(-size // target))
            step = -(-size // pieces) if size else 0
            for k in range(pieces):
                start, end = k * step, min(size, (k + 1) * step)
                if start < end or (size == 0 and k == 0):
                    ranges.append(ByteRange(len(ranges), item.index, str(item.path), start, end))
        return ranges

    def count_lines(self, ranges: list[ByteRange], spans: dict[int, int]) -> list[ByteRange]:
        """The first pass: newline counts per range, in Spark; returns the ranges with ``newlines_before``."""
        rows = self._ids(len(ranges)).mapInArrow(newline_counter(ranges), "id long, newlines long").collect()
        counts = {row["id"]: row["newlines"] for row in rows}
        before: dict[int, int] = {}
        numbered = []
        for r in ranges:
            seen = before.get(r.file_index, 0)
            numbered.append(ByteRange(r.index, r.file_index, r.path, r.start, r.end, seen))
            before[r.file_index] = seen + counts[r.index]
        for file_index, newlines in before.items():
            spans[file_index] = newlines + 1  # a last line without a newline still counts
        return numbered

    def parse_whole(self, item: Input) -> pa.Table:
        """A file in a format rdflib reads, parsed in the driver; rejected whole when rdflib fails. A stream's
        TriG, TriX or JSON-LD file is a sequence of timestamped named graphs (``csparql.ingest.graphs``)."""
        target = _parsed_schema(self.stream)
        graph = rdflib.Dataset() if item.format in QUAD_FORMATS else rdflib.Graph()
        previous = rdflib.NORMALIZE_LITERALS
        rdflib.NORMALIZE_LITERALS = False  # keep lexical forms as written
        try:
            graph.parse(str(item.path), format="nquads" if item.format == graphs.GRAPH_NQUADS else item.format)
        except Exception as error:  # rdflib raises many kinds: each means the file is not valid
            line, reason = parser_position(error)
            self.rejects.append((item.index, line, escape_field(reason), escape_field(line_text(item.path, line))))
            return target.empty_table()
        finally:
            rdflib.NORMALIZE_LITERALS = previous
        if self.stream and item.format in GRAPH_FORMATS:  # rejects: the graph's name, where it is first written
            timed, rejected = graphs.timed_triples(graph, self.timestamp_predicates, self.default_micros, self.future)
            at = graphs.first_line_naming(item.path, [r.graph for r in rejected if r.graph is not None])
            self.rejects.extend((item.index, at.get(r.graph, 0), escape_field(r.reason), escape_field(r.text))
                                for r in rejected)
            triples, micros = [(t.subject, t.predicate, t.object) for t in timed], [t.micros for t in timed]
        else:
            triples = list(graph.quads((None, None, None, None)) if item.format in QUAD_FORMATS else graph)
            micros = [self.default_micros] * len(triples)
        scope = self.scope(item.index)
        columns: dict[str, list] = {name: [] for name in ("s", "p", "o")}
        for triple in triples:
            for name, term in zip(("s", "p", "o"), triple[:3]):
                kind, value, datatype, language = term_row(term)
                if kind == BLANK:
                    value = scope + value
                columns[name].append({"kind": kind, "value": value, "datatype": datatype, "language": language})
        rows = len(columns["s"])
        arrays = [pa.array(columns[name], schema.TERM_TYPE) for name in ("s", "p", "o")]
        if self.stream:
            ts = pa.array(micros, pa.int64())
            arrays += [ts, pa.array(range(1, rows + 1), pa.int64()), hour_buckets(ts)]
        return pa.Table.from_arrays(arrays, schema=target)

    # writing

    def write(self, frame: DataFrame) -> list[tuple[str, str | None]]:
        """Spark writes the rows into the stage folder; returns the Parquet files (with their bucket)."""
        if not self.stream:
            frame = frame.dropDuplicates()
            existing = self.existing_static()
            if existing is not None:
                frame = frame.join(existing, ["s", "p", "o"], "left_anti")
            frame.write.parquet(str(self.stage))
        else:
            # Each file holds its rows in event-time order, so the Parquet page indexes let a window read only
            # the pages it overlaps, whatever order the triples arrived in (the partition column leads the sort,
            # as the writer needs it anyway).
            frame.sortWithinPartitions("bucket", "ts", "arrival").write.partitionBy("bucket").parquet(str(self.stage))
        staged = []
        pattern = "bucket=*/*.parquet" if self.stream else "*.parquet"
        for file in sorted(self.stage.glob(pattern)):
            if pq.ParquetFile(file).metadata.num_rows == 0:
                file.unlink()
                continue
            bucket = unquote(file.parent.name.split("=", 1)[1]) if self.stream else None
            staged.append((str(file), bucket))
        return staged

    def existing_static(self) -> DataFrame | None:
        if self.replace:
            return None
        uris = [f.uri for f in delta.live_files(delta.open_table(self.path), self.path)]
        if not uris:
            return None
        return self.spark.read.schema(STATIC_FILE_SCHEMA).parquet(*uris)

    def summarise(self, report: IngestReport, staged: list[tuple[str, str | None]]) -> None:
        """Triples per predicate (and the timestamp range) of the staged files: one small aggregation."""
        if not staged:
            return
        files = [f for f, _ in staged]
        if self.stream:
            frame = self.spark.read.schema(STREAM_FILE_SCHEMA).parquet(*files)
            rows = frame.groupBy(F.col("p.value").alias("predicate")).agg(
                F.count(F.lit(1)).alias("triples"),
                F.min(F.unix_micros("ts")).alias("low"),
                F.max(F.unix_micros("ts")).alias("high"),
            ).collect()
            report.min_ts = min(r["low"] for r in rows) if rows else None
            report.max_ts = max(r["high"] for r in rows) if rows else None
        else:
            frame = self.spark.read.schema(STATIC_FILE_SCHEMA).parquet(*files)
            rows = frame.groupBy(F.col("p.value").alias("predicate")).agg(F.count(F.lit(1)).alias("triples")).collect()
        report.counts = {r["predicate"]: r["triples"] for r in rows}
        report.landed = sum(report.counts.values())

    # rejects

    def write_rejects(self, report: IngestReport) -> None:
        rejects = list(self.rejects)
        for file in sorted(self.rejects_folder.glob("*.tsv")):
            rejects.extend(read_rejects(str(file)))
        rejects.sort(key=lambda r: (r[0], r[1]))
        names = {i.index: str(i.path) for i in self.inputs}
        report.rejected = len(rejects)
        report.first_rejects = [
            Reject(names[f], line, unescape_field(reason), unescape_field(text))
            for f, line, reason, text in rejects[:SHOWN_REJECTS]
        ]
        by_target: dict[Path, list[str]] = {}
        for file_index, line, reason, text in rejects:
            row = f"{escape_field(names[file_index])}\t{line}\t{reason}\t{text}\n"
            by_target.setdefault(self.targets[file_index], []).append(row)
        if self.explicit_rejects is not None:  # a named rejects file is always written, even empty
            by_target.setdefault(self.explicit_rejects, [])
        for target, rows in by_target.items():
            temporary = target.with_name(f".{target.name}.{self.id}.tmp")
            with open(temporary, "w", encoding="utf-8") as handle:
                handle.writelines(rows)
            os.replace(temporary, target)
        report.rejects_paths = tuple(t for t, rows in by_target.items() if rows)


def _parsed_schema(stream: bool) -> pa.Schema:
    return schema.PARSED_STREAM if stream else schema.PARSED_STATIC

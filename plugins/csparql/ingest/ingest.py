"""Ingest: timestamped triples into stream tables, and static graphs into static tables, each in one commit.

``ingest_stream(spark, warehouse, iri, files, ...)`` lands RDF stream files in the stream's Delta table;
``load_static(spark, warehouse, graph, files, ...)`` loads a static graph (``graph=None``: the default one).
Both return an ``IngestReport``.

Inputs
    Timestamped N-Quads (``.nq``/``.tnq``): the fourth term is the triple's timestamp, an ``xsd:dateTime`` or
    epoch milliseconds (see ``csparql.ingest.parsers.lines``); lines without one take ``--timestamp`` if given.
    TriG, TriX, JSON-LD, standard N-Quads: timestamped named graphs (``csparql.ingest.parsers.graphs``). N-Triples and any
    other format rdflib reads (Turtle, RDF/XML, N3, ...; from the extension or ``format``) take ``--timestamp``.

Parallel parsing (line formats)
    Files are split into byte ranges. A first Spark pass (``mapInArrow`` over one row per range) counts the
    newlines of each range; prefix sums give each range's first line number. The second pass parses the lines
    that START in each range (reading past its end to finish the last one), so line numbers are exact, with
    no line loop in the driver and only the DataFrame API (it works over Spark Connect). With a local master
    the executors open the input files by path; on a cluster (``spark://``, YARN, Kubernetes), whose
    executors cannot see this machine's files, the driver reads each range and counts its newlines, and the
    second pass gets the range's bytes with its id (``csparql.ingest.spark_job.sends_inputs``). Other formats are parsed whole in the driver: a stream's timestamped
    named graphs (TriG, JSON-LD, standard N-Quads) by pyoxigraph, TriX and the rest by rdflib; a file the
    parser cannot read is rejected whole, with the parser's message and position.

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
    stay where they are. A stream ingest ``in_process`` (a pushed body, a batch of messages) parses with the
    same parsers and stages the same layout with pyarrow, without Spark (``csparql.ingest.job``). Any failure
    before the commit deletes the stage folder: the table is left at the version it had. Statistics (triples
    per predicate) are recorded after the commit. Then, before the watermark moves, the stream's small files of
    each closed minute are merged into one (``csparql.storage.stream_compaction``): the windows it completes
    read a file per minute rather than one per ingest.

Arrival order (streams)
    ``arrival = batch << 40 | ordinal``: ``batch`` is the table's version when the ingest starts, plus one
    (the version its commit will normally get), so a later ingest has larger arrivals; ``ordinal`` numbers the
    lines of the ingest's files in order (file 2's lines follow all of file 1's; within a file, the line
    number), so file and line order hold. Room: 2^23 ingests per table, 2^40 lines per ingest. For formats
    parsed whole a triple's ordinal follows the parser's order (timestamped graphs: by instant, then graph
    name, then as written).

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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from csparql.ingest.parsers import graphs
from csparql.ingest.inputs import (  # noqa: F401  (re-exported: the ingest API's types)
    GRAPH_FORMATS, LINE_FORMATS, MAX_BATCH, QUAD_FORMATS, IngestReport, Input, InputError, Landed, Reject,
)
from csparql.ingest.job import IngestJob, LocalIngestJob
from csparql.ingest.parsers.lines import TIMESTAMP_OPTION, FutureLimit
from csparql.storage import delta, schema
from csparql.storage.instants import MAX_MICROS, MIN_MICROS
from csparql.storage.statistics import record_statistics
from csparql.storage.tables import CONTENT_SHA256, IRI_PROPERTY, KIND_PROPERTY, LANDED_TRIPLES, LANDED_WATERMARK
from csparql.storage.stream_compaction import compact_stream
from csparql.storage.warehouse import Warehouse, iri_problem
from csparql.storage.watermarks import MAX_FUTURE_SKEW, advance_watermark, check_future_skew, future_bound
from csparql.core.windows import format_duration, format_instant, parse_instant

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

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


# ---------------------------------------------------------------------------------------------------------
# Checking the request (before Spark starts)
# ---------------------------------------------------------------------------------------------------------

def check_iri(text: str, what: str) -> str:
    """An IRI as queries write it (``<...>`` accepted), or InputError (``csparql.storage.warehouse.iri_problem``).
    Relative IRIs are accepted, since a query without BASE keeps them as written (docs/semantics.md, *Spellings*),
    e.g. ``www.uc.eu/tollgates.trdf``."""
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
        raise InputError(f"{TIMESTAMP_OPTION}: {error}") from None
    if not MIN_MICROS <= micros <= MAX_MICROS:
        raise InputError(f"{TIMESTAMP_OPTION}: {text} is outside years 1..9999")
    if future is not None and micros > future.latest:
        raise InputError(f"{TIMESTAMP_OPTION}: {text} is too far in the future: later than {future.described}")
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
                   timestamp_predicates: Sequence[str] = graphs.DEFAULT_TIMESTAMP_PREDICATES,
                   file_digests: Sequence[str] | None = None) -> str:
    """What identifies the content an ingest or a static load lands (``CONTENT_SHA256``): the SHA-256 of the
    stream's or graph's IRI (``<...>`` or not; "" for the default graph), of each input file's bytes in order,
    of the ``--timestamp`` its timestamp-less triples take (µs, None when not given) and of the predicates that
    timestamp named graphs when they are not the default ones. ``file_digests``: the files' ``sha256_of``,
    in order, when the caller has them already (the files are not read then)."""
    target = target.strip()
    if target.startswith("<") and target.endswith(">"):
        target = target[1:-1]
    if file_digests is None:
        file_digests = [sha256_of(f) for f in files]
    elif len(file_digests) != len(files):
        raise ValueError(f"{len(file_digests)} digest(s) for {len(files)} file(s)")
    record = {"target": target, "files": list(file_digests), "timestamp": timestamp}
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
                    f"{item.name}: {item.format} has no timestamps; pass {TIMESTAMP_OPTION} T to give its triples one"
                )
    return iri, inputs, default_micros, rejects_targets(inputs, rejects), future


def check_static_request(graph, files, format=None, rejects=None):
    """The checked arguments of ``load_static`` (graph IRI or None, inputs, rejects targets), or InputError."""
    graph = None if graph is None else check_iri(graph, "graph")
    inputs = check_inputs(files, format)
    return graph, inputs, rejects_targets(inputs, rejects)


def ensure_stream_table(warehouse: Warehouse, iri: str):
    """The stream's Delta table (``DeltaTable``), created empty when it does not exist yet."""
    return delta.ensure(warehouse.stream(iri), schema.STREAM, schema.STREAM_PARTITIONS,
                        {IRI_PROPERTY: iri, KIND_PROPERTY: "stream"})


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
    in_process: bool = False,
    all_or_nothing: bool = False,
    transaction: tuple[str, int] | None = None,
    file_digests: Sequence[str] | None = None,
) -> IngestReport:
    """Land stream files in the stream's table in one commit (see the module docstring); ``commit_metadata``
    is recorded with the commit, beside what the ingest records itself. ``in_process``: parse and stage in
    this process, without Spark (``csparql.ingest.job.LocalIngestJob``; for small inputs), else with ``spark``.
    Triples timestamped later than the wall clock plus ``max_future_skew`` (µs) are rejected, and the watermark
    never passes that bound.

    The same content (``content_digest``) lands once: when a commit of the stream landed it already, nothing
    is read or written but the watermark that commit's ingest advances the stream to (it may have stopped
    before), and the report's ``already_landed`` names that commit; ``again=True`` lands it once more. ``spark``
    may be None when the content has landed or ``in_process``. ``all_or_nothing``: a single rejected line
    (or graph, or file) lands nothing; the report still counts and shows the rejects. ``transaction``: Delta's
    application transaction (id, version) the commit records (``csparql.storage.delta.commit_files``); with one
    the commit happens even when nothing lands, so that its metadata is recorded. A TriG, TriX, JSON-LD or N-Quads
    file's named graphs are timestamped by a triple about each with one of ``timestamp_predicates``.
    ``file_digests``: the files' SHA-256s when the caller has them (``content_digest``)."""
    iri, inputs, default_micros, targets, future = check_stream_request(iri, files, timestamp, format, rejects,
                                                                         max_future_skew, timestamp_predicates)
    path = warehouse.stream(iri)
    report = IngestReport(iri, path, files=len(inputs))
    digest = content_digest(iri, [i.path for i in inputs], default_micros, timestamp_predicates, file_digests)
    landed = None if again else landed_content(path, digest)
    if landed is not None:
        report.already_landed = landed
        try:
            complete_watermark(warehouse, iri, landed, future.latest)
        except Exception as error:  # the data is committed: say so rather than fail
            report.warnings.append(f"the stream's watermark was not advanced: {error}")
        return report
    table = ensure_stream_table(warehouse, iri)
    batch = table.version() + 1
    if batch > MAX_BATCH:
        raise delta.StorageError(f"the stream table at {path} has too many versions for the arrival encoding")
    options = dict(default_micros=default_micros, batch=batch, explicit_rejects=rejects, future=future,
                   timestamp_predicates=timestamp_predicates)
    job = LocalIngestJob(path, inputs, targets, **options) if in_process else _spark_job(
        spark, path, inputs, targets, stream=True, **options)

    def commit(files):
        mark = {} if report.max_ts is None else {LANDED_WATERMARK: str(min(report.max_ts, future.latest))}
        mark[LANDED_TRIPLES] = str(report.landed)
        delta.commit_files(
            path, [(f, {"bucket": b}) for f, b in files], schema.STREAM, schema.STREAM_PARTITIONS, "ts",
            metadata={**job.commit_metadata("ingest", iri), **(commit_metadata or {}), CONTENT_SHA256: digest,
                      **mark, **job.event_times(warehouse, files)},
            transaction=transaction,
        )

    job.run(report, commit, always_commit=transaction is not None, commit_rejected=not all_or_nothing)
    if report.version is not None:
        _record(report, warehouse, iri, "stream", replaces=False)
        compact_stream(path)  # so that a window reads a file per minute, not one per ingest
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
    job = _spark_job(spark, path, inputs, targets, stream=False, replace=replace, explicit_rejects=rejects)

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


def _spark_job(spark: SparkSession, path: Path, inputs: list[Input], targets: dict[int, Path], stream: bool,
               **options) -> IngestJob:
    from csparql.ingest.spark_job import SparkIngestJob  # the in-process path imports no pyspark

    return SparkIngestJob(spark, path, inputs, targets, stream, **options)

"""Timestamped named graphs: RDF stream events as RSP-QL's data model writes them.

An event is a named graph; its timestamp is a triple about the graph's name, in the default graph or in the
graph itself, whose predicate is one of the stream's timestamp predicates (``DEFAULT_TIMESTAMP_PREDICATES``:
``prov:generatedAtTime``, unless the ingest names others)::

    <http://ex.org/e1> { <http://ex.org/car1> <http://ex.org/passes> <http://ex.org/gate7> . }
    <http://ex.org/e1> prov:generatedAtTime "2010-03-22T10:00:00Z"^^xsd:dateTime .

Every triple of the graph lands with that instant (an ``xsd:dateTime``, or an integer of epoch milliseconds, as
in the line format); the timestamp triples themselves are the events' metadata and do not land. A graph with
no timestamp takes the ingest's ``--timestamp``, and so do the default graph's other triples; without one they
are rejected, as is a graph with two different timestamps or one the line format would reject (not an
instant, too far in the future). A reject names the graph and, where the file shows it, the line where the
graph's name first appears.

Standard N-Quads (the fourth term names the graph) are events too; the project's own ``.nq`` line format (the
fourth term is the triple's timestamp) is told apart by its first statements (``names_graphs``).

This module reads the quads pyoxigraph parses (TriG, JSON-LD and standard N-Quads files directly; TriX through
rdflib, ``dataset_quads``) into the columns of stored rows (``timed_triples``), and knows nothing of Spark or
Delta tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
import pyoxigraph as ox

from csparql.ingest.parsers.lines import (
    TIMESTAMP_OPTION, FutureLimit, LineError, bounded_timestamps_micros, parse_statement,
)
from csparql.storage.schema import BLANK, IRI, LITERAL
from csparql.storage.vocabulary import DEFAULT_TIMESTAMP_PREDICATES, PROV_GENERATED_AT_TIME, RDF_LANGSTRING

__all__ = ["DEFAULT_TIMESTAMP_PREDICATES", "GRAPH_NQUADS", "PROV_GENERATED_AT_TIME", "QUADS", "TIMED_TRIPLES",
           "GraphReject", "dataset_quads", "first_line_naming", "names_graphs", "parse_quads", "quad_columns",
           "timed_triples"]

PARSED_FORMATS = {"trig": ox.RdfFormat.TRIG, "json-ld": ox.RdfFormat.JSON_LD, "nquads": ox.RdfFormat.N_QUADS}
"""The formats pyoxigraph parses here (``GRAPH_NQUADS`` files are N-Quads); TriX goes through ``dataset_quads``."""


GraphName = tuple[int, str]
"""A graph's name as stored: (``IRI`` or ``BLANK``, its IRI or blank node label)."""


@dataclass(frozen=True)
class GraphReject:
    """A graph (or the default graph's untimed triples) that does not land: where, why, and what."""

    graph: GraphName | None  # None for the default graph
    reason: str
    text: str


def parse_quads(path, format: str) -> Iterator[ox.Quad]:
    """The quads of the file at ``path`` in ``format`` (a key of ``PARSED_FORMATS``); ``SyntaxError`` (with the
    line in ``lineno``) for a file that is not valid. Lexical forms stay as written; language tags are lower
    case; blank nodes keep the file's labels."""
    return ox.parse(path=str(path), format=PARSED_FORMATS[format])


def dataset_quads(dataset) -> Iterator[ox.Quad]:
    """The quads of an rdflib ``Dataset`` (TriX, which pyoxigraph does not read), as pyoxigraph parses them
    from the dataset written as N-Quads."""
    return ox.parse(dataset.serialize(format="nquads", encoding="utf-8"), format=ox.RdfFormat.N_QUADS)


TIMED_TRIPLES = pa.schema([("s_kind", pa.int8()), ("s_value", pa.string()), ("p_value", pa.string()),
                           ("o_kind", pa.int8()), ("o_value", pa.string()), ("o_datatype", pa.string()),
                           ("o_language", pa.string()), ("ts_micros", pa.int64())])
"""The triples of events as ``timed_triples`` returns them: the subject's kind and value, the predicate's IRI,
the object's stored form (kind, value, datatype, language as ``csparql.storage.terms`` stores them; blank nodes
with the file's labels) and the event's instant (µs)."""

DEFAULT_GRAPH = str(ox.DefaultGraph())
"""The name of the default graph in ``QUADS`` (a named graph's is ``<iri>`` or ``_:label``)."""
QUADS = pa.schema([("s_term", pa.string())] + list(TIMED_TRIPLES)[2:-1] + [("g_term", pa.string())])
"""The quads as read: subject and graph name as N-Triples writes them, the rest as ``TIMED_TRIPLES``."""
CHUNK_ROWS = 65_536
"""Quads read into Python lists before they become Arrow arrays: the lists' memory is reused chunk after chunk."""


def quad_columns(quads: Iterable[ox.Quad]) -> pa.Table:
    """The quads as ``QUADS`` columns, in the order read: the only loop over quads in Python. ``TypeError`` for
    an object that is not an IRI, a blank node or a literal (a triple term: RDF 1.2 allows no other subject
    than an IRI or a blank node)."""
    named, literal, blank = ox.NamedNode, ox.Literal, ox.BlankNode
    columns: tuple[list, ...] = tuple([] for _ in QUADS)
    s_term, p_value, o_kind, o_value, o_datatype, o_language, g_term = (column.append for column in columns)
    batches, row = [], 0
    for subject, predicate, object_, where in quads:
        s_term(str(subject))
        p_value(predicate.value)
        kind = type(object_)
        if kind is literal:
            o_kind(LITERAL)
            o_value(object_.value)
            language = object_.language
            if language:
                o_datatype(RDF_LANGSTRING)
                o_language(language.lower())
            else:
                o_datatype(object_.datatype.value)
                o_language(None)
        elif kind is named or kind is blank:
            o_kind(IRI if kind is named else BLANK)
            o_value(object_.value)
            o_datatype(None)
            o_language(None)
        else:
            raise TypeError(f"the object {object_} is not an IRI, a blank node or a literal")
        g_term(str(where))
        row += 1
        if row % CHUNK_ROWS == 0:
            batches.append(_batch(columns))
    if columns[0]:
        batches.append(_batch(columns))
    return pa.Table.from_batches(batches, schema=QUADS).combine_chunks()


def _batch(columns: tuple[list, ...]) -> pa.RecordBatch:
    batch = pa.RecordBatch.from_arrays([pa.array(column, field.type) for column, field in zip(columns, QUADS)],
                                       schema=QUADS)
    for column in columns:
        column.clear()
    return batch


def timed_triples(quads: pa.Table, predicates: Sequence[str], default_micros: int | None,
                  future: FutureLimit | None) -> tuple[pa.Table, list[GraphReject]]:
    """The triples of the events in ``quads`` (``QUADS`` columns in the order written) (each graph's triples
    once), as ``TIMED_TRIPLES`` rows ordered by instant then graph name (the default graph's last among
    equals), each event's triples in the order written; and the graphs rejected, in the order of their names
    (the default graph's last).

    Columnar: the timestamps, the repeated triples and the order are worked out over the columns by Arrow's
    kernels, with Python only for what is unusual (a timestamp in another form, a rejected graph)."""
    quads_table = quads.combine_chunks().append_column("row", pa.array(range(quads.num_rows), pa.int64()))
    encoded = pc.dictionary_encode(quads_table.column("g_term")).combine_chunks()
    names, graph = encoded.dictionary, pc.cast(encoded.indices, pa.int64())
    quads_table = quads_table.append_column("graph", graph)
    found = pc.index_in(pa.array([DEFAULT_GRAPH]), names)[0].as_py()
    default = -1 if found is None else found  # the default graph's number (-1: it holds no quad)
    numbers = pa.array(range(len(names)), pa.int64())

    # timestamp triples: about a named graph of the file, in the default graph or in that graph
    is_stamp = pc.is_in(quads_table.column("p_value"), pa.array(list(predicates), pa.string())).combine_chunks()
    stamps = quads_table.filter(is_stamp)
    about = pc.index_in(stamps.column("s_term"), names)
    in_place = pc.or_(pc.equal(stamps.column("graph"), about), pc.equal(stamps.column("graph"), default))
    metadata = pc.fill_null(pc.and_(pc.not_equal(about, default), in_place), False).combine_chunks()
    stamps, about = stamps.filter(metadata), pc.cast(pc.filter(about, metadata), pa.int64())
    instants, problems = _graph_instants(stamps, about, future)
    triples = _first_of_each(quads_table.filter(pc.invert(pc.replace_with_mask(is_stamp, is_stamp, metadata))))

    # each graph's instant: its own, else the ingest's (--timestamp), else it is rejected
    micros_of = pc.take(instants.column("micros"), pc.index_in(numbers, instants.column("graph")))
    troubled = pc.is_in(numbers, pa.array(list(problems), pa.int64()))
    unstamped = pc.and_(pc.and_(pc.is_null(micros_of), pc.invert(troubled)), pc.not_equal(numbers, default))
    if default_micros is not None:
        micros_of = pc.if_else(unstamped, default_micros, micros_of)
    rejected = pc.indices_nonzero(pc.and_(pc.is_null(micros_of), pc.not_equal(numbers, default))).to_pylist()
    counted = pc.value_counts(pc.filter(triples.column("graph"), pc.is_in(
        triples.column("graph"), pa.array(rejected + [default], pa.int64())))).flatten()
    per_graph = dict(zip(counted[0].to_pylist(), counted[1].to_pylist()))
    rejects: list[GraphReject] = []
    for shown, number in sorted((names[number].as_py(), number) for number in rejected):
        problem = problems.get(number)
        if problem is None:
            choices = "> or <".join(sorted(set(predicates)))
            problem = (f"it has no timestamp: no triple {shown} <{choices}> in the default graph or in the graph; "
                       f"add one, or pass {TIMESTAMP_OPTION} T")
        rejects.append(GraphReject(_stored_name(shown), f"graph {shown}: {problem}; its "
                                   f"{_count(per_graph.get(number, 0))} did not land", shown))
    if per_graph.get(default):
        if default_micros is None:
            rejects.append(GraphReject(None, f"the default graph has {_count(per_graph[default])} without a "
                                             "timestamp (not about a named graph of the file); pass "
                                             f"{TIMESTAMP_OPTION} T to give them one", "the default graph"))
        else:
            micros_of = pc.if_else(pc.equal(numbers, default), default_micros, micros_of)

    # the events' order: by instant, then by name as N-Triples writes it (the default graph's last)
    name_rank = pc.sort_indices(pc.sort_indices(pc.if_else(pc.equal(numbers, default), "\uffff", names)))
    graph = triples.column("graph")
    triples = triples.append_column("ts_micros", pc.take(micros_of, graph)) \
                     .append_column("name_rank", pc.take(name_rank, graph))
    triples = triples.filter(pc.is_valid(triples.column("ts_micros")))
    order = pc.sort_indices(triples, [("ts_micros", "ascending"), ("name_rank", "ascending"), ("row", "ascending")])
    triples = triples.take(order)
    subject = triples.column("s_term")
    iri = pc.starts_with(subject, "<")
    triples = triples.append_column("s_kind", pc.if_else(iri, IRI, BLANK)).append_column(
        "s_value", pc.if_else(iri, pc.utf8_slice_codeunits(subject, 1, -1), pc.utf8_slice_codeunits(subject, 2)))
    return triples.select(TIMED_TRIPLES.names).cast(TIMED_TRIPLES), rejects


def _stored_name(written: str) -> GraphName:
    """The stored form of a name as N-Triples writes it (``<iri>`` or ``_:label``)."""
    return (IRI, written[1:-1]) if written.startswith("<") else (BLANK, written[2:])


def _first_of_each(quads: pa.Table) -> pa.Table:
    """``quads`` without the repetitions of a triple in the same graph (a graph is a set), each kept at its
    first row. Only the graphs of more than one row are looked at: an event is often a single triple."""
    sizes = pc.value_counts(quads.column("graph")).flatten()
    several = pc.filter(sizes[0], pc.greater(sizes[1], 1))
    if not len(several):
        return quads
    keys = ["graph"] + list(QUADS.names[:-1])
    candidates = quads.filter(pc.is_in(quads.column("graph"), several))
    firsts = candidates.group_by(keys, use_threads=False).aggregate([("row", "min")]).column("row_min")
    if len(firsts) == candidates.num_rows:
        return quads
    repeated = pc.filter(candidates.column("row"), pc.invert(pc.is_in(candidates.column("row"), firsts)))
    return quads.filter(pc.invert(pc.is_in(quads.column("row"), repeated)))


def _graph_instants(stamps: pa.Table, about: pa.Array, future: FutureLimit | None
                    ) -> tuple[pa.Table, dict[int, str]]:
    """From the timestamp triples ``stamps`` (``about``: the graph each is about), the graphs' instants (a
    table of ``graph`` and ``micros``) and, for a graph that cannot have one, the reason: a timestamp that is
    not a literal, not an instant, a language-tagged string, too far in the future, or two different ones."""
    problems: dict[int, str] = {}
    odd = pc.or_(pc.not_equal(stamps.column("o_kind"), LITERAL), pc.is_valid(stamps.column("o_language")))
    for graph, kind, value, predicate, language in zip(
            *(column.to_pylist() for column in (pc.filter(about, odd), *stamps.filter(odd).select(
                ["o_kind", "o_value", "p_value", "o_language"]).columns))):
        if kind != LITERAL:
            shown = f"<{value}>" if kind == IRI else f"_:{value}"
            problems.setdefault(graph, f"its timestamp {shown} (<{predicate}>) is not a literal")
        else:
            problems.setdefault(graph, f"the timestamp '{value}'@{language} is a language-tagged string, not an "
                                       "instant")
    plain = pc.invert(odd)
    stamps, about = stamps.filter(plain), pc.filter(about, plain)
    micros, reasons = bounded_timestamps_micros(stamps.column("o_value"), stamps.column("o_datatype"), future)
    for index, reason in reasons.items():
        problems.setdefault(about[index].as_py(), reason)
    found = pa.table({"graph": about, "micros": micros}).filter(pc.is_valid(micros))
    spans = found.group_by("graph", use_threads=False).aggregate([("micros", "min"), ("micros", "max")])
    for graph in pc.filter(spans.column("graph"), pc.not_equal(spans.column("micros_min"),
                                                                spans.column("micros_max"))).to_pylist():
        if graph not in problems:
            rows = pc.equal(found.column("graph"), graph)
            lexical = dict(zip(found.column("micros").filter(rows).to_pylist(),
                               stamps.column("o_value").filter(pc.is_valid(micros)).filter(rows).to_pylist()))
            listed = ", ".join(sorted(f"'{value}'" for value in lexical.values()))
            problems[graph] = f"it has {len(lexical)} different timestamps ({listed})"
    instants = pa.table({"graph": spans.column("graph"), "micros": spans.column("micros_min")})
    return instants.filter(pc.invert(pc.is_in(instants.column("graph"), pa.array(list(problems), pa.int64())))), \
        problems


def _count(triples: int) -> str:
    return f"{triples} triple" + ("" if triples == 1 else "s")


WRITTEN_IRI = re.compile(r'[<"]([^<>"\s]*)[>"]')
"""An IRI written in full: between angle brackets (TriG, N-Quads) or quotes (JSON-LD)."""
PREFIXED_LOCAL = re.compile(r"[\w-]*:([\w.-]*[\w-])")
"""A prefixed name's local part (a name ends in a name character, not in a dot)."""
BLANK_LABEL = re.compile(r"_:([\w.-]*[\w-])")
"""A blank node's label."""


def first_line_naming(path, names: Sequence[GraphName]) -> dict[GraphName, int]:
    """For each graph name, the first line of the file at ``path`` that writes it (an IRI in full, between
    angle brackets or quotes, or a prefixed name ending in its last segment; a blank node's label); 0 where
    none does. A hint for the reader of a reject, not a parser's position.

    One pass over the file whatever the number of names: each line's written IRIs, local parts and labels are
    looked up among the names' (a file whose every graph is rejected names as many graphs as it has lines)."""
    by_iri: dict[str, list[GraphName]] = {}
    by_local: dict[str, list[GraphName]] = {}
    by_label: dict[str, list[GraphName]] = {}
    for name in names:
        kind, value = name
        if kind == BLANK:
            by_label.setdefault(value, []).append(name)
            continue
        by_iri.setdefault(value, []).append(name)
        local = re.split(r"[/#:]", value)[-1]
        if local:
            by_local.setdefault(local, []).append(name)
    lines = {name: 0 for name in names}
    waiting = set(lines)
    if not waiting:  # an ingest with no rejected graph: the file is not read again
        return lines
    looked_up = [(pattern, named) for pattern, named in
                 ((WRITTEN_IRI, by_iri), (PREFIXED_LOCAL, by_local), (BLANK_LABEL, by_label)) if named]
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, text in enumerate(handle, 1):
                for pattern, named in looked_up:
                    for written in pattern.finditer(text):
                        for name in named.get(written[1], ()):
                            if name in waiting:
                                lines[name] = number
                                waiting.discard(name)
                if not waiting:
                    break
    except OSError:
        pass
    return lines


GRAPH_NQUADS = "graph-nquads"
"""The format of an N-Quads file whose fourth terms name graphs (standard N-Quads), as opposed to the project's
line format, whose fourth term is each triple's timestamp; both are ``.nq``."""

SNIFFED_LINES = 1000


def names_graphs(path) -> bool:
    """Whether the N-Quads file at ``path`` is standard N-Quads (timestamped named graphs): the first of its
    first ``SNIFFED_LINES`` statements that has a fourth term names a graph with it (an IRI or a blank node),
    rather than giving a timestamp (a literal or a number: the project's line format, where a stray graph name
    later is one rejected line)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return lines_name_graphs(handle)
    except OSError:
        return False


def lines_name_graphs(lines: Iterable[str]) -> bool:
    """``names_graphs`` of N-Quads given as lines."""
    for _, line in zip(range(SNIFFED_LINES), lines):
        try:
            statement = parse_statement(line.rstrip("\r\n"))
        except LineError:
            continue
        if statement is not None and statement.g is not None:
            return statement.g[0] in (IRI, BLANK)
    return False

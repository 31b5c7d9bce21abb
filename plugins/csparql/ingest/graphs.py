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
rdflib, ``dataset_quads``), turns their terms into stored rows (``term_row``), and knows nothing of Spark or
tables.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyoxigraph as ox

from csparql.ingest.lines import FutureLimit, LineError, bounded_timestamp_micros, parse_statement
from csparql.storage.schema import BLANK, IRI, LITERAL
from csparql.storage.vocabulary import DEFAULT_TIMESTAMP_PREDICATES, PROV_GENERATED_AT_TIME

__all__ = ["DEFAULT_TIMESTAMP_PREDICATES", "GRAPH_NQUADS", "PROV_GENERATED_AT_TIME", "GraphReject", "TimedTriple",
           "dataset_quads", "first_line_naming", "names_graphs", "parse_quads", "term_row", "timed_triples"]

PARSED_FORMATS = {"trig": ox.RdfFormat.TRIG, "json-ld": ox.RdfFormat.JSON_LD, "nquads": ox.RdfFormat.N_QUADS}
"""The formats pyoxigraph parses here (``GRAPH_NQUADS`` files are N-Quads); TriX goes through ``dataset_quads``."""
RDF_LANGSTRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"


@dataclass(frozen=True)
class GraphReject:
    """A graph (or the default graph's untimed triples) that does not land: where, why, and what."""

    graph: object  # the graph's name (a pyoxigraph term); None for the default graph
    reason: str
    text: str


TimedTriple = tuple[object, object, object, int]
"""A triple of an event (pyoxigraph terms) and its instant (µs)."""


def parse_quads(path, format: str) -> Iterator[ox.Quad]:
    """The quads of the file at ``path`` in ``format`` (a key of ``PARSED_FORMATS``); ``SyntaxError`` (with the
    line in ``lineno``) for a file that is not valid. Lexical forms stay as written; language tags are lower
    case; blank nodes keep the file's labels."""
    return ox.parse(path=str(path), format=PARSED_FORMATS[format])


def dataset_quads(dataset) -> Iterator[ox.Quad]:
    """The quads of an rdflib ``Dataset`` (TriX, which pyoxigraph does not read), as pyoxigraph parses them
    from the dataset written as N-Quads."""
    return ox.parse(dataset.serialize(format="nquads", encoding="utf-8"), format=ox.RdfFormat.N_QUADS)


def term_row(term) -> tuple[int, str, str | None, str | None]:
    """The stored form of a pyoxigraph term, (kind, value, datatype, language), as ``csparql.storage.terms``
    stores an rdflib term."""
    if isinstance(term, ox.NamedNode):
        return (IRI, term.value, None, None)
    if isinstance(term, ox.BlankNode):
        return (BLANK, term.value, None, None)
    if isinstance(term, ox.Literal):
        if term.language:
            return (LITERAL, term.value, RDF_LANGSTRING, term.language.lower())
        return (LITERAL, term.value, term.datatype.value, None)
    raise TypeError(f"not a ground RDF term: {term!r}")


def _count(triples: list) -> str:
    return f"{len(triples)} triple" + ("" if len(triples) == 1 else "s")


def timed_triples(quads: Iterable[ox.Quad], predicates: Sequence[str], default_micros: int | None,
                  future: FutureLimit | None) -> tuple[list[TimedTriple], list[GraphReject]]:
    """The triples of the events ``quads`` hold (each graph's triples once) with their instants, ordered by
    instant then graph (the default graph's last among equals), each event's triples in the order written; and
    the graphs rejected, in the order of their names."""
    accepted = {ox.NamedNode(p) for p in predicates}
    graphs: dict[object, dict[tuple, None]] = {}
    candidates: list[tuple[object, tuple]] = []  # (where, triple) of each triple with a timestamp predicate
    for subject, predicate, object_, where in quads:
        if isinstance(where, ox.DefaultGraph):
            where = None
        triple = (subject, predicate, object_)
        graphs.setdefault(where, {})[triple] = None
        if predicate in accepted:
            candidates.append((where, triple))
    default = graphs.pop(None, {})
    stamps: dict[object, dict[tuple, None]] = {}  # graph name → its timestamps, in the default graph or its own
    for where, triple in candidates:
        if triple[0] in graphs and (where is None or where == triple[0]):
            stamps.setdefault(triple[0], {})[triple] = None

    events: list[tuple[int, str, object, list]] = []
    rejects: list[GraphReject] = []
    instants: dict[tuple[str, str | None], int] = {}  # lexical form and datatype → µs: events share instants
    for name in sorted(graphs, key=str):
        shown = str(name)
        own = stamps.get(name, {})
        found: dict[int, str] = {}
        problem = None
        for _, predicate, value in own:
            if not isinstance(value, ox.Literal):
                problem = f"its timestamp {value} (<{predicate.value}>) is not a literal"
                continue
            key = (value.value, None if value.language else value.datatype.value)
            micros = instants.get(key)
            if micros is None:
                try:
                    micros = instants[key] = bounded_timestamp_micros(*key, future)
                except LineError as error:
                    problem = str(error)
                    continue
            found[micros] = value.value
        triples = [t for t in graphs[name] if t not in own] if own else list(graphs[name])
        if problem is None and len(found) > 1:
            values = ", ".join(sorted(f"'{v}'" for v in found.values()))
            problem = f"it has {len(found)} different timestamps ({values})"
        if problem is None and not found:
            if default_micros is None:
                choices = "> or <".join(sorted(set(predicates)))
                problem = (f"it has no timestamp: no triple {shown} <{choices}> in the default graph or in the "
                           "graph; add one, or pass --timestamp T")
            else:
                found[default_micros] = ""
        if problem is not None:
            rejects.append(GraphReject(name, f"graph {shown}: {problem}; its {_count(triples)} did not land", shown))
            continue
        if triples:
            events.append((next(iter(found)), shown, name, triples))
    # a timestamp triple about any graph of the file is metadata (its graph may be empty, or rejected)
    untimed = [t for t in default if not (t[1] in accepted and t[0] in graphs)]
    if untimed:
        if default_micros is None:
            rejects.append(GraphReject(None, f"the default graph has {_count(untimed)} without a timestamp (not about "
                                             "a named graph of the file); pass --timestamp T to give them one",
                                       "the default graph"))
        else:
            events.append((default_micros, "\uffff", None, untimed))
    events.sort(key=lambda event: (event[0], event[1]))
    timed = [(s, p, o, micros) for micros, _, _, triples in events for s, p, o in triples]
    return timed, rejects


def first_line_naming(path, names: Sequence[object]) -> dict[object, int]:
    """For each graph name, the first line of the file at ``path`` that writes it (an IRI in full, between
    angle brackets or quotes, or a prefixed name ending in its last segment; a blank node's label); 0 where
    none does. A hint for the reader of a reject, not a parser's position."""
    patterns = {}
    for name in names:
        if isinstance(name, ox.BlankNode):
            patterns[name] = re.compile(rf"_:{re.escape(name.value)}\b")
        else:
            local = re.split(r"[/#:]", name.value)[-1]
            prefixed = rf"|[\w-]*:{re.escape(local)}(?![\w.-]*[\w-])" if local else ""
            patterns[name] = re.compile(rf"[<\"]{re.escape(name.value)}[>\"]{prefixed}")
    lines = {name: 0 for name in names}
    waiting = set(patterns)
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for number, text in enumerate(handle, 1):
                for name in list(waiting):
                    if patterns[name].search(text):
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
    return False

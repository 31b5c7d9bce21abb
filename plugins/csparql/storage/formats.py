"""Results in the W3C formats: SPARQL 1.1 Query Results JSON (for tools), TSV and CSV (for people), and
N-Triples for graphs (CONSTRUCT and DESCRIBE); the graphs of many windows as TriG timestamped named graphs."""

from __future__ import annotations

import csv
import io
import json
import re
from urllib.parse import quote

from rdflib import BNode, Literal, URIRef

from csparql.storage.results import QueryResult
from csparql.storage.vocabulary import (
    PROV_GENERATED_AT_TIME, XSD_BOOLEAN, XSD_DATETIME, XSD_DECIMAL, XSD_DOUBLE, XSD_INTEGER,
)
from csparql.core.terms import XSD_STRING, format_ntriples_term

FORMATS = ("json", "tsv", "csv")
_ABBREVIATED = {
    XSD_INTEGER: re.compile(r"^[+-]?[0-9]+$"),
    XSD_DECIMAL: re.compile(r"^[+-]?[0-9]*\.[0-9]+$"),
    XSD_DOUBLE: re.compile(r"^[+-]?([0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)[eE][+-]?[0-9]+$"),
    XSD_BOOLEAN: re.compile(r"^(true|false)$"),
}


def json_term(term) -> dict:
    """A term in the SPARQL 1.1 JSON results format."""
    if isinstance(term, URIRef):
        return {"type": "uri", "value": str(term)}
    if isinstance(term, BNode):
        return {"type": "bnode", "value": str(term)}
    out = {"type": "literal", "value": str(term)}
    if term.language:
        out["xml:lang"] = term.language
    elif term.datatype is not None and term.datatype != XSD_STRING:
        out["datatype"] = str(term.datatype)
    return out


def to_json_object(result: QueryResult) -> dict:
    """The W3C JSON results object of a SELECT or ASK result."""
    if result.form == "ask":
        return {"head": {}, "boolean": bool(result.boolean)}
    if result.form != "select":
        raise ValueError("CONSTRUCT and DESCRIBE results are graphs: print them as N-Triples")
    names = [str(v) for v in result.vars]
    bindings = []
    for row in result.rows:
        bindings.append({name: json_term(term) for name, term in zip(names, row) if term is not None})
    return {"head": {"vars": names}, "results": {"bindings": bindings}}


def to_json(result: QueryResult) -> str:
    return json.dumps(to_json_object(result), ensure_ascii=False)


def tsv_term(term) -> str:
    """A term as SPARQL TSV writes it: Turtle syntax, with integers, decimals, doubles and booleans abbreviated
    when their lexical form allows (``2`` for ``"2"^^xsd:integer``)."""
    if isinstance(term, Literal) and term.datatype is not None and not term.language:
        pattern = _ABBREVIATED.get(str(term.datatype))
        if pattern is not None and pattern.match(str(term)):
            return str(term)
    return format_ntriples_term(term)


def to_tsv(result: QueryResult) -> str:
    """SPARQL 1.1 TSV: a header of ?variables, then terms (``tsv_term``), tab-separated."""
    if result.form == "ask":
        return "?_askResult\n" + ("true" if result.boolean else "false") + "\n"
    lines = ["\t".join(f"?{v}" for v in result.vars)]
    for row in result.rows:
        lines.append("\t".join("" if t is None else tsv_term(t) for t in row))
    return "\n".join(lines) + "\n"


def to_csv(result: QueryResult) -> str:
    """SPARQL 1.1 CSV: a header of variable names, then IRIs and lexical forms (lossy, for people)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    if result.form == "ask":
        writer.writerow(["_askResult"])
        writer.writerow(["true" if result.boolean else "false"])
        return buffer.getvalue()
    writer.writerow([str(v) for v in result.vars])
    for row in result.rows:
        writer.writerow(["" if t is None else (f"_:{t}" if isinstance(t, BNode) else str(t)) for t in row])
    return buffer.getvalue()


def to_ntriples(result: QueryResult) -> str:
    return "".join(
        f"{format_ntriples_term(s)} {format_ntriples_term(p)} {format_ntriples_term(o)} .\n" for s, p, o in result.triples
    )


def render(result: QueryResult, fmt: str) -> str:
    """The result as text in the requested format (graphs always as N-Triples)."""
    if result.form in ("construct", "describe"):
        return to_ntriples(result)
    return {"json": to_json, "tsv": to_tsv, "csv": to_csv}[fmt](result) + ("\n" if fmt == "json" else "")





WINDOW_COLUMNS = ("window_start", "window_end")


class ColumnsDiffer(ValueError):
    """A window's results have other columns than the earlier windows' of the same table."""


GRAPH_COLUMNS = ("subject", "predicate", "object")


class WindowedTable:
    """The results of many windows of one query as one CSV or TSV table that a CSV reader loads whole: one
    header, ``window_start`` and ``window_end`` (ISO 8601, empty for a window without a start) then the
    result's columns (a SELECT's variables, ``_askResult`` for ASK, ``subject``, ``predicate`` and ``object``
    for a graph), and a row per solution, triple or answer. Cells are written as ``to_csv`` (lexical forms)
    or ``to_tsv`` (Turtle terms) write them. ``rows`` returns each window's text, the header before the
    first; a window whose columns differ from the first window's raises ``ColumnsDiffer`` saying which."""

    def __init__(self, fmt: str) -> None:
        if fmt not in ("csv", "tsv"):
            raise ValueError(f"a table of windows is written as csv or tsv, not {fmt}")
        self.fmt = fmt
        self.columns: list[str] | None = None

    def _cell(self, term) -> str:
        if term is None:
            return ""
        if self.fmt == "tsv":
            return tsv_term(term)
        return f"_:{term}" if isinstance(term, BNode) else str(term)

    def rows(self, window_start: str | None, window_end: str, result: QueryResult) -> str:
        if result.form == "ask":
            columns, body = ["_askResult"], [["true" if result.boolean else "false"]]
        elif result.form in ("construct", "describe"):
            columns, body = list(GRAPH_COLUMNS), [[self._cell(t) for t in triple] for triple in result.triples]
        else:
            columns, body = [str(v) for v in result.vars], [[self._cell(t) for t in row] for row in result.rows]
        lines = []
        if self.columns is None:
            self.columns = columns
            lines.append([*WINDOW_COLUMNS, *columns])
        elif columns != self.columns:
            raise ColumnsDiffer(f"the window ending {window_end} has the columns {', '.join(columns) or '(none)'}, not "
                             f"the earlier windows' {', '.join(self.columns) or '(none)'}: read them with --format json")
        lines += [[window_start or "", window_end, *row] for row in body]
        if self.fmt == "tsv":  # TSV terms are escaped N-Triples: no tab or line break inside a cell
            return "".join("\t".join(line) + "\n" for line in lines)
        buffer = io.StringIO()
        csv.writer(buffer, lineterminator="\r\n").writerows(lines)
        return buffer.getvalue()


class NotAGraph(ValueError):
    """Results that are bindings or answers, asked for as graphs."""


class TimestampedGraphs:
    """The graph results of many windows of one query as TriG timestamped named graphs, RSP-QL's data model:
    each window's triples in a graph named ``<urn:csparql:window:QUERY:END>``, its instant the window's end in a
    ``prov:generatedAtTime`` triple of the default graph. That is the instant a ``REGISTER STREAM`` of the query
    gives its output triples (docs/semantics.md, *Output streams*): ``csparql ingest`` of this text lands the
    stream it would write. Blank node labels are scoped per window (``_:w<k>_<label>``); a window with no triples
    writes nothing."""

    def __init__(self, query: str) -> None:
        self.query = quote(query, safe="")
        self.windows = 0

    def _term(self, term) -> str:
        if isinstance(term, BNode):
            return f"_:w{self.windows}_{term}"
        return format_ntriples_term(term)

    def window(self, window_end: str, result: QueryResult) -> str:
        """The window's graph and its timestamp (``window_end`` in ISO 8601); ``NotAGraph`` for bindings."""
        if result.form not in ("construct", "describe"):
            raise NotAGraph("TriG writes the graphs of CONSTRUCT and DESCRIBE queries; this "
                            f"query's results are {'an answer' if result.form == 'ask' else 'bindings'}: "
                            "read them as tsv, csv or json")
        self.windows += 1
        if not result.triples:
            return ""
        name = f"<urn:csparql:window:{self.query}:{quote(window_end, safe=':-')}>"
        body = "".join(f"  {self._term(s)} {self._term(p)} {self._term(o)} .\n" for s, p, o in result.triples)
        return (f"{name} {{\n{body}}}\n"
                f'{name} <{PROV_GENERATED_AT_TIME}> "{window_end}"^^<{XSD_DATETIME}> .\n')


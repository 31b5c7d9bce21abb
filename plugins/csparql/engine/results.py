"""Result tables of registered queries: what each evaluation writes, and reading it back.

A SELECT writes ``results/<query>/bindings``: ``window_start``, ``window_end``, and for each variable two
columns — one an analyst uses in SQL as it is (the IRI or the lexical form as a string; integers, decimals
and doubles, booleans and date-times as typed values) and ``<name>_term``, the lossless RDF term in
N-Triples syntax. A typed column's type is fixed by the first evaluation that binds the variable; later
values that do not fit it are null there (the ``_term`` column always has them). An ASK writes one row per
evaluation to ``answers``; CONSTRUCT and DESCRIBE write ``triples``; ``REGISTER STREAM`` writes its triples
to an output stream table, each with the window end as its timestamp (decision 10). Every result table ends
with ``query_version``, the version of the query text that wrote the row.

Each evaluation replaces its own window's rows in one commit, so evaluating a window twice leaves one copy.
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

import pyarrow as pa
from rdflib import BNode, Literal, URIRef, Variable
from rdflib.term import Identifier

from csparql.storage import delta, schema
from csparql.storage.instants import bucket_of
from csparql.storage.instants import instant_of as _instant
from csparql.storage.tables import column_names
from csparql.storage.terms import ntriples, term_dict
from csparql.storage.vocabulary import INTEGER_TYPES, NUMERIC_TYPES
from csparql.terms import XSD_BOOLEAN, XSD_DATETIME


def _infer_type(terms: list[Identifier]) -> pa.DataType | None:
    """The analyst type of a variable from the values one evaluation bound (None when it bound none)."""
    values = [t for t in terms if t is not None]
    if not values:
        return None
    literals = [t for t in values if isinstance(t, Literal)]
    if len(literals) == len(values):
        datatypes = {str(t.datatype) if t.datatype else None for t in literals}
        if datatypes <= INTEGER_TYPES and all(_as_int(t) is not None for t in literals):
            return pa.int64()
        if datatypes <= NUMERIC_TYPES and all(_as_float(t) is not None for t in literals):
            return pa.float64()
        if datatypes == {str(XSD_BOOLEAN)}:
            return pa.bool_()
        if datatypes == {str(XSD_DATETIME)} and all(_as_datetime(t) is not None for t in literals):
            return schema.TIMESTAMP
    return pa.string()


def _as_int(term: Literal) -> int | None:
    try:
        return int(str(term))
    except ValueError:
        return None


def _as_float(term: Literal) -> float | None:
    text = str(term).replace("INF", "inf")
    try:
        return float(text)
    except ValueError:
        return None


def _as_datetime(term: Literal) -> datetime | None:
    text = str(term).replace("Z", "+00:00")
    try:
        value = datetime.fromisoformat(text)
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


def analyst_value(term: Identifier | None, kind: pa.DataType):
    """A term as a value of the analyst column's type (None when it does not fit)."""
    if term is None:
        return None
    if pa.types.is_string(kind):
        if isinstance(term, BNode):
            return f"_:{term}"
        return str(term)
    if not isinstance(term, Literal):
        return None
    datatype = str(term.datatype) if term.datatype else None
    if pa.types.is_int64(kind):
        return _as_int(term) if datatype in INTEGER_TYPES else None
    if pa.types.is_float64(kind):
        return _as_float(term) if datatype in NUMERIC_TYPES else None
    if pa.types.is_boolean(kind):
        return {"true": True, "1": True, "false": False, "0": False}.get(str(term)) if datatype == str(XSD_BOOLEAN) else None
    if pa.types.is_timestamp(kind):
        return _as_datetime(term) if datatype == str(XSD_DATETIME) else None
    return None


def bindings_table(
    vars_: tuple[Variable, ...],
    rows: list[tuple[Identifier | None, ...]],
    window_start: int | None,
    window_end: int,
    existing: pa.Schema | None,
    version: str | None = None,
) -> pa.Table:
    """The rows an evaluation of a SELECT writes (see the module docstring for the columns)."""
    names = column_names(vars_)
    start, end = _instant(window_start), _instant(window_end)
    fields = list(schema.WINDOW_COLUMNS)
    arrays = [pa.array([start] * len(rows), schema.TIMESTAMP), pa.array([end] * len(rows), schema.TIMESTAMP)]
    existing_types = {f.name: f.type for f in existing} if existing is not None else {}
    for index, var in enumerate(vars_):
        name = names[var]
        terms = [row[index] for row in rows]
        kind = existing_types.get(name) or _infer_type(terms)
        if kind is not None:
            fields.append(pa.field(name, kind))
            arrays.append(pa.array([analyst_value(t, kind) for t in terms], kind))
        fields.append(pa.field(name + "_term", pa.string()))
        arrays.append(pa.array([ntriples(t) for t in terms], pa.string()))
    fields.append(schema.QUERY_VERSION)
    arrays.append(pa.array([version] * len(rows), pa.string()))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def answers_table(answer: bool, window_start: int | None, window_end: int, version: str | None = None) -> pa.Table:
    return pa.Table.from_pylist(
        [{"window_start": _instant(window_start), "window_end": _instant(window_end), "answer": answer,
          "query_version": version}],
        schema=schema.ANSWERS,
    )


def triples_table(triples: list, window_start: int | None, window_end: int, version: str | None = None) -> pa.Table:
    start, end = _instant(window_start), _instant(window_end)
    return pa.Table.from_pylist(
        [
            {"window_start": start, "window_end": end, "subject": ntriples(s), "predicate": ntriples(p),
             "object": ntriples(o), "query_version": version}
            for s, p, o in triples
        ],
        schema=schema.TRIPLES,
    )


def output_stream_table(triples: list, window_end: int) -> pa.Table:
    """The triples of a REGISTER STREAM evaluation as stream rows timestamped with the window end."""
    ts = _instant(window_end)
    bucket = bucket_of(window_end)
    return pa.Table.from_pylist(
        [
            {"s": term_dict(s), "p": term_dict(p), "o": term_dict(o), "ts": ts, "arrival": index, "bucket": bucket}
            for index, (s, p, o) in enumerate(triples)
        ],
        schema=schema.STREAM,
    )


def window_predicate(column: str, micros: int) -> str:
    """A delta-rs predicate selecting the rows of one window: ``column = '<instant>'``."""
    instant = _instant(micros)
    return f"{column} = '{instant.strftime('%Y-%m-%dT%H:%M:%S.%f')}Z'"


def write_window(path, table: pa.Table, table_schema: pa.Schema, window_end: int, merge_schema: bool = False,
                 column: str = "window_end", partition_by=None, metadata: dict[str, str] | None = None) -> None:
    """Replace one window's rows of a result table with ``table`` in one commit (carrying ``metadata``)."""
    delta.replace_where(
        path, table, window_predicate(column, window_end), table_schema, partition_by=partition_by,
        merge_schema=merge_schema, metadata=metadata,
    )


# --- reading terms back ----------------------------------------------------------------------------------

_NT_TERM = re.compile(r'^(?:<([^>]*)>|_:(\S+)|"((?:[^"\\]|\\.)*)"(?:@([A-Za-z0-9-]+)|\^\^<([^>]*)>)?)$', re.S)
_ESCAPES = {"t": "\t", "b": "\b", "n": "\n", "r": "\r", "f": "\f", '"': '"', "'": "'", "\\": "\\"}


def parse_ntriples_term(text: str | None) -> Identifier | None:
    """The term an N-Triples string (as result tables hold them) stands for."""
    if text is None:
        return None
    match = _NT_TERM.match(text)
    if match is None:
        raise ValueError(f"not an N-Triples term: {text!r}")
    iri, label, lexical, language, datatype = match.groups()
    if iri is not None:
        return URIRef(_unescape(iri))
    if label is not None:
        return BNode(label)
    value = _unescape(lexical)
    if language:
        return Literal(value, lang=language, normalize=False)
    if datatype:
        return Literal(value, datatype=URIRef(datatype), normalize=False)
    return Literal(value, normalize=False)


def _unescape(text: str) -> str:
    def replace(match: re.Match) -> str:
        code = match.group(1)
        if code[0] in "uU":
            return chr(int(code[1:], 16))
        return _ESCAPES[code]

    return re.sub(r"\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)", replace, text)


"""Result tables of registered queries: the rows each evaluation writes, built from its terms.

A SELECT writes ``results/<query>/bindings``: ``window_start``, ``window_end``, and for each variable two
columns — one an analyst uses in SQL as it is (the IRI or the lexical form as a string; integers, decimals
and doubles, booleans and date-times as typed values) and ``<name>_term``, the lossless RDF term in
N-Triples syntax. A typed column's type is fixed by the first evaluation that binds the variable; later
values that do not fit it are null there (the ``_term`` column always has them). An ASK writes one row per
evaluation to ``answers``; CONSTRUCT and DESCRIBE write ``triples``; ``REGISTER STREAM`` writes its triples to an
output stream table, each with the window end as its timestamp (docs/semantics.md, *Output streams*). Every result
table ends with ``query_version``, the version of the query text that wrote the row.

Each result form has one writer — ``bindings_table``, ``answers_table``, ``triples_table``,
``output_stream_table``, by the kind of table in ``RESULT_WRITERS`` — that builds its table column-wise
(pyarrow.compute) from the terms the evaluation collected from Spark as Arrow
(``csparql.storage.results.QueryResult.terms``); no term goes through Python one by one, except the rare
lexical forms Arrow's parsers do not read as Python does (``TermColumn``). The table itself — writing a
window in one commit that replaces its earlier rows, reading windows back — is
``csparql.storage.results.ResultTable``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.compute as pc
from rdflib import Variable

from csparql.storage import delta, schema
from csparql.storage.instants import bucket_of
from csparql.storage.instants import instant_of as _instant
from csparql.storage.results import STREAM, QueryResult, window_predicate
from csparql.storage.tables import column_names
from csparql.storage.terms import BLANK, IRI, LITERAL, TERM_TYPE
from csparql.storage.vocabulary import INTEGER_TYPES, NUMERIC_TYPES
from csparql.core.terms import RDF_LANGSTRING, XSD_BOOLEAN, XSD_DATETIME, XSD_STRING


# --- terms column-wise ------------------------------------------------------------------------------------
# Each result form's writer builds its table from the term columns the evaluation collected (Arrow structs
# ``(kind, value, datatype, language)``, null when unbound) with pyarrow.compute, a column at a time. What each
# writes is what the terms' rdflib forms (``csparql.storage.terms.from_dict``) give: N-Triples by
# ``csparql.core.terms.format_ntriples_term``, stored structs by ``term_row``, typed values by Python's ``int``,
# ``float`` and ``datetime.fromisoformat`` (tests/storage/test_result_writers.py compares the two).

_IRI_ESCAPED = ["\\", *'<>"{}|^`', *map(chr, range(0x21))]
"""What an IRI in N-Triples writes as ``\\uXXXX`` (the backslash first: the escapes add backslashes)."""
_STRING_ESCAPES = [("\\", "\\\\"), ('"', '\\"'), ("\n", "\\n"), ("\r", "\\r"), ("\t", "\\t"), ("\b", "\\b"),
                   ("\f", "\\f")]
"""A literal's escapes in N-Triples, the backslash first."""
_LANGUAGE_TAG = r"^[a-zA-Z]+(?:-[a-zA-Z0-9]+)*\n?$"
"""The language tags rdflib accepts (its ``$`` also matches before a final newline)."""
# Lexical forms on which Arrow's parser gives exactly what Python's gives; other forms (rare) are parsed one by
# one in Python, as they were.
_PLAIN_INTEGER = r"^-?[0-9]{1,18}$"
_PLAIN_NUMBER = r"^[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]{1,3})?$"
_PLAIN_DATETIME = (r"^[1-9][0-9]{3}-(?:0[1-9]|1[0-2])-(?:0[1-9]|[12][0-9]|3[01])T(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]"
                   r"(?:\.[0-9]{1,6})?(?:Z|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])?$")
_ZONE = r"(?:Z|[+-][0-9]{2}:[0-9]{2})$"


class TermColumn:
    """A column of collected terms (Arrow structs, null when unbound) and what the writers compute from it."""

    def __init__(self, terms: pa.Array | pa.ChunkedArray):
        if isinstance(terms, pa.ChunkedArray):
            terms = terms.combine_chunks() if terms.num_chunks else pa.array([], terms.type)
        self.terms = terms
        self.kind = pc.struct_field(terms, "kind")
        self.value = pc.struct_field(terms, "value")
        self.is_iri = pc.equal(self.kind, IRI)
        self.is_blank = pc.equal(self.kind, BLANK)
        self.is_literal = pc.equal(self.kind, LITERAL)
        language = pc.struct_field(terms, "language")
        datatype = pc.struct_field(terms, "datatype")
        self.tagged = pc.and_(self.is_literal, pc.fill_null(pc.not_equal(language, ""), False))
        self.language = pc.if_else(self.tagged, language, None)
        _check_language_tags(self.language)
        plain = pc.fill_null(pc.equal(datatype, str(XSD_STRING)), True)
        typed = pc.and_(pc.and_(self.is_literal, pc.invert(self.tagged)), pc.invert(plain))
        self.datatype_iri = pc.if_else(typed, datatype, None)
        """A literal's datatype as its rdflib form has it: null for plain and language-tagged literals."""
        self.datatype = pc.if_else(pc.fill_null(pc.not_equal(self.datatype_iri, ""), False), self.datatype_iri, None)
        """The datatype analyst columns go by (an empty datatype IRI counts as none)."""

    def __len__(self) -> int:
        return len(self.terms)

    def ntriples(self) -> pa.Array:
        """The terms in N-Triples syntax (null for unbound)."""
        iri = pc.binary_join_element_wise("<", _escape_iri(self.value), ">", "")
        blank = pc.binary_join_element_wise("_:", self.value, "")
        body = self.value
        for character, escape in _STRING_ESCAPES:
            body = pc.replace_substring(body, character, escape)
        suffix = pc.if_else(
            self.tagged, pc.binary_join_element_wise("@", self.language, ""),
            pc.fill_null(pc.binary_join_element_wise("^^<", _escape_iri(self.datatype_iri), ">", ""), ""))
        literal = pc.binary_join_element_wise('"', body, '"', suffix, "")
        return pc.case_when(pc.make_struct(self.is_iri, self.is_blank, self.is_literal), iri, blank, literal)

    def stored(self) -> pa.Array:
        """The terms as stored structs (``csparql.storage.terms.term_row``): IRIs and blank nodes without
        datatype or language, plain literals typed ``xsd:string``, tagged ones ``rdf:langString`` with a
        lower-case tag."""
        datatype = pc.if_else(self.tagged, str(RDF_LANGSTRING), pc.fill_null(self.datatype, str(XSD_STRING)))
        datatype = pc.if_else(self.is_literal, datatype, None)
        fields = [self.kind.cast(pa.int8()), self.value, datatype.cast(pa.string()),
                  pc.utf8_lower(self.language).cast(pa.string())]
        mask = pc.is_null(self.terms)
        return pa.StructArray.from_arrays(fields, fields=list(TERM_TYPE), mask=mask if mask.true_count else None)

    def analyst(self, kind: pa.DataType) -> pa.Array:
        """The terms as values of an analyst column of type ``kind`` (null where a term does not fit it)."""
        if pa.types.is_string(kind):
            text = pc.if_else(self.is_blank, pc.binary_join_element_wise("_:", self.value, ""), self.value)
            return text.cast(kind)
        if pa.types.is_int64(kind):
            return self._typed(_INTEGER_TYPES, kind, self.integers)
        if pa.types.is_float64(kind):
            return self._typed(_NUMERIC_TYPES, kind, self.numbers)
        if pa.types.is_boolean(kind):
            return self._typed(_BOOLEAN_TYPES, kind, self.booleans)
        if pa.types.is_timestamp(kind):
            return self._typed(_DATETIME_TYPES, kind, self.datetimes)
        return pa.nulls(len(self), kind)

    def inferred_type(self) -> pa.DataType | None:
        """The analyst type of a variable from the values one evaluation bound (None when it bound none)."""
        bound = pc.invert(pc.is_null(self.terms))
        if not pc.any(bound).as_py():
            return None
        if pc.all(pc.or_(pc.invert(bound), self.is_literal)).as_py():
            datatypes = set(pc.unique(pc.filter(self.datatype, bound)).to_pylist())
            if datatypes <= INTEGER_TYPES and self._all_valid(bound, self.integers()[1]):
                return pa.int64()
            if datatypes <= NUMERIC_TYPES and self._all_valid(bound, self.numbers()[1]):
                return pa.float64()
            if datatypes == {str(XSD_BOOLEAN)}:
                return pa.bool_()
            if datatypes == {str(XSD_DATETIME)} and self._all_valid(bound, self.datetimes()[1]):
                return schema.TIMESTAMP
        return pa.string()

    # parsed lexical forms: (values, valid, values Arrow cannot hold by index)

    def integers(self):
        return self._parsed("integers", _PLAIN_INTEGER, pa.int64(), _as_int)

    def numbers(self):
        return self._parsed("numbers", _PLAIN_NUMBER, pa.float64(), lambda text: _as_float(text.replace("INF", "inf")))

    def booleans(self):
        values = pc.if_else(pc.is_in(self.value, pa.array(["true", "1"])), True,
                            pc.if_else(pc.is_in(self.value, pa.array(["false", "0"])), False, None))
        return values, pc.invert(pc.is_null(values)), {}

    def datetimes(self):
        return self._parsed("datetimes", _PLAIN_DATETIME, schema.TIMESTAMP, _as_datetime, zone=True)

    def _parsed(self, name: str, plain: str, kind: pa.DataType, parse_one, zone: bool = False):
        cached = getattr(self, "_" + name, None)
        if cached is not None:
            return cached
        lexical = pc.if_else(self.is_literal, self.value, None)
        simple = pc.fill_null(pc.match_substring_regex(lexical, plain), False)
        text = pc.if_else(simple, lexical, None)
        if zone:  # a date-time without a zone is UTC
            text = pc.if_else(pc.fill_null(pc.match_substring_regex(text, _ZONE), True), text,
                              pc.binary_join_element_wise(text, "Z", ""))
        try:
            values = text.cast(kind)
        except pa.ArrowInvalid:  # a form Arrow refuses (a day a month does not have): every one in Python
            simple = pa.repeat(pa.scalar(False), len(self))
            values = pa.nulls(len(self), kind)
        valid = pc.invert(pc.is_null(values))
        unusual = pc.and_(pc.invert(pc.is_null(lexical)), pc.invert(simple))
        too_large: dict[int, object] = {}
        if pc.any(unusual).as_py():
            indices = pc.indices_nonzero(unusual)
            parsed = [parse_one(text) for text in pc.take(lexical, indices).to_pylist()]
            fitting = []
            for index, value in zip(indices.to_pylist(), parsed):
                try:
                    pa.array([value], kind)
                    fitting.append(value)
                except (OverflowError, pa.ArrowInvalid):
                    too_large[index] = value
                    fitting.append(None)
            values = pc.replace_with_mask(values, unusual, pa.array(fitting, kind))
            valid = pc.replace_with_mask(valid, unusual, pa.array([value is not None for value in parsed]))
        result = (values, valid, too_large)
        setattr(self, "_" + name, result)
        return result

    def _typed(self, datatypes: pa.Array, kind: pa.DataType, parsed) -> pa.Array:
        values, _, too_large = parsed()
        fits = pc.fill_null(pc.is_in(self.datatype, datatypes), False)
        for index, value in too_large.items():
            if fits[index].as_py():
                pa.array([value], kind)  # raises, as building the column from Python values did
        values = pc.if_else(fits, values, None)
        if pa.types.is_timestamp(kind) and kind.unit in _COARSER_UNITS:
            # a column of a coarser unit (an earlier table's) rounds down, as building it from Python values did
            values = pc.floor_temporal(values, unit=_COARSER_UNITS[kind.unit])
        return values.cast(kind, safe=False)

    @staticmethod
    def _all_valid(bound: pa.Array, valid: pa.Array) -> bool:
        return pc.all(pc.or_(pc.invert(bound), valid)).as_py()


_COARSER_UNITS = {"s": "second", "ms": "millisecond"}
_INTEGER_TYPES = pa.array(sorted(INTEGER_TYPES))
_NUMERIC_TYPES = pa.array(sorted(NUMERIC_TYPES))
_BOOLEAN_TYPES = pa.array([str(XSD_BOOLEAN)])
_DATETIME_TYPES = pa.array([str(XSD_DATETIME)])


def _escape_iri(text: pa.Array) -> pa.Array:
    """IRIs as N-Triples writes them (``csparql.core.terms.format_iri``): each character of ``_IRI_ESCAPED`` as
    ``\\uXXXX``."""
    if not pc.any(pc.match_substring_regex(text, "[<>\"{}|^`\\\\\\x00-\\x20]")).as_py():
        return text
    for character in _IRI_ESCAPED:
        text = pc.replace_substring(text, character, f"\\u{ord(character):04X}")
    return text


def _check_language_tags(tags: pa.Array) -> None:
    """Refuse a language tag rdflib refuses, with its message (an evaluation that binds one fails)."""
    wrong = pc.and_(pc.invert(pc.is_null(tags)), pc.invert(pc.match_substring_regex(tags, _LANGUAGE_TAG)))
    if pc.any(wrong).as_py():
        raise ValueError(f"'{pc.filter(tags, wrong)[0].as_py()}' is not a valid language tag!")


def _as_int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


def _as_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _as_datetime(text: str) -> datetime | None:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return value if value.tzinfo else value.replace(tzinfo=timezone.utc)


# --- one writer per result form ---------------------------------------------------------------------------


def bindings_table(
    vars_: tuple[Variable, ...],
    terms: pa.Table,
    window_start: int | None,
    window_end: int,
    existing: pa.Schema | None,
    version: str | None = None,
) -> pa.Table:
    """The rows an evaluation of a SELECT writes (see the module docstring for the columns), from its
    solutions: ``terms`` holds one column of term structs per variable of ``vars_``, in order."""
    names = column_names(vars_)
    rows = terms.num_rows
    fields = list(schema.WINDOW_COLUMNS)
    arrays = [_repeated(_instant(window_start), schema.TIMESTAMP, rows),
              _repeated(_instant(window_end), schema.TIMESTAMP, rows)]
    existing_types = {f.name: f.type for f in existing} if existing is not None else {}
    for index, var in enumerate(vars_):
        name = names[var]
        column = TermColumn(terms.column(index))
        kind = existing_types.get(name) or column.inferred_type()
        if kind is not None:
            fields.append(pa.field(name, kind))
            arrays.append(column.analyst(kind))
        fields.append(pa.field(name + "_term", pa.string()))
        arrays.append(column.ntriples().cast(pa.string()))
    fields.append(schema.QUERY_VERSION)
    arrays.append(_repeated(version, pa.string(), rows))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def answers_table(answer: bool, window_start: int | None, window_end: int, version: str | None = None) -> pa.Table:
    """The row an evaluation of an ASK writes."""
    return pa.Table.from_pylist(
        [{"window_start": _instant(window_start), "window_end": _instant(window_end), "answer": answer,
          "query_version": version}],
        schema=schema.ANSWERS,
    )


def triples_table(triples: pa.Table, window_start: int | None, window_end: int, version: str | None = None) -> pa.Table:
    """The rows an evaluation of a CONSTRUCT or DESCRIBE writes, from its triples (term structs ``s``, ``p``,
    ``o``): each term in N-Triples."""
    rows = triples.num_rows
    arrays = [_repeated(_instant(window_start), schema.TIMESTAMP, rows),
              _repeated(_instant(window_end), schema.TIMESTAMP, rows),
              *(TermColumn(triples.column(position)).ntriples().cast(pa.string()) for position in ("s", "p", "o")),
              _repeated(version, pa.string(), rows)]
    return pa.Table.from_arrays(arrays, schema=schema.TRIPLES)


def output_stream_table(triples: pa.Table, window_end: int) -> pa.Table:
    """The triples of a REGISTER STREAM evaluation (term structs ``s``, ``p``, ``o``) as stream rows
    timestamped with the window end, in their order (``arrival``)."""
    rows = triples.num_rows
    arrays = [*(TermColumn(triples.column(position)).stored() for position in ("s", "p", "o")),
              _repeated(_instant(window_end), schema.TIMESTAMP, rows),
              pc.subtract(pc.cumulative_sum(_repeated(1, pa.int64(), rows)), 1),
              _repeated(bucket_of(window_end), pa.string(), rows)]
    return pa.Table.from_arrays(arrays, schema=schema.STREAM)


def predicate_counts(triples: pa.Table) -> dict[str, int]:
    """How many of the triples (term structs ``s``, ``p``, ``o``) each predicate has, by its IRI."""
    counts = pc.value_counts(TermColumn(triples.column("p")).value)
    return {item["values"].as_py(): item["counts"].as_py() for item in counts}


def _repeated(value, kind: pa.DataType, rows: int) -> pa.Array:
    return pa.repeat(pa.scalar(value, kind), rows)


def write_window(path, table: pa.Table, table_schema: pa.Schema, window_end: int, merge_schema: bool = False,
                 column: str = "window_end", partition_by=None, metadata: dict[str, str] | None = None) -> None:
    """Replace one window's rows of a result table with ``table`` in one commit (carrying ``metadata``)."""
    delta.replace_where(
        path, table, window_predicate(column, window_end), table_schema, partition_by=partition_by,
        merge_schema=merge_schema, metadata=metadata,
    )


RESULT_WRITERS: dict[str, Callable[[QueryResult, int | None, int, str | None, pa.Schema], pa.Table]] = {
    "bindings": lambda result, start, end, version, existing: bindings_table(result.vars, result.terms, start, end,
                                                                             existing, version),
    "answers": lambda result, start, end, version, _: answers_table(bool(result.boolean), start, end, version),
    "triples": lambda result, start, end, version, _: triples_table(result.terms, start, end, version),
    STREAM: lambda result, start, end, version, _: output_stream_table(result.terms, end),
}
"""The writer of each kind of result table (``csparql.storage.results.ResultTable.kind``): the rows one
evaluation writes, from its results, its window's start and end, the query's version and the table's current
schema (a bindings table keeps the types its columns have)."""

"""Each result form's writer (``csparql.storage.result_rows``) builds the table it stores column-wise from the Arrow
terms an evaluation collects; these tests compare its tables with those of the conversion it replaced, kept
here as the reference: every collected term turned into an rdflib term (``from_dict``), then each row's
values and N-Triples strings computed from it in Python. Equal Arrow tables are stored as equal bytes.

The first tests give the writers collected terms directly (literals of many datatypes, language tags, escapes,
blank nodes, unbound values, ill-formed lexical forms, a result table's earlier column types); the last ones
collect them from real Spark evaluations of queries of every result form.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from rdflib import BNode, Literal, Variable
from rdflib.term import Identifier

from csparql.storage import result_rows as rt
from csparql.storage.instants import bucket_of
from csparql.storage.tables import column_names
from csparql.storage.vocabulary import INTEGER_TYPES, NUMERIC_TYPES
from csparql.storage import schema
from csparql.storage.terms import from_dict, ntriples, term_dict
from csparql.core.terms import XSD_BOOLEAN, XSD_DATETIME

# --- the conversion the writers replaced (the reference) ------------------------------------------------------


def reference_rows(terms: pa.Table) -> list[tuple]:
    """What ``CompiledEvaluation.result`` made of the collected terms: rows of rdflib terms."""
    columns = [column.to_pylist() for column in terms.columns]
    return [tuple(from_dict(column[i]) for column in columns) for i in range(terms.num_rows)]


def _instant(micros: int | None) -> datetime | None:
    if micros is None:
        return None
    return datetime.fromtimestamp(micros // 1_000_000, tz=timezone.utc).replace(microsecond=micros % 1_000_000)


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


def reference_bindings_table(
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


def reference_triples_table(triples: list, window_start: int | None, window_end: int, version: str | None = None) -> pa.Table:
    start, end = _instant(window_start), _instant(window_end)
    return pa.Table.from_pylist(
        [
            {"window_start": start, "window_end": end, "subject": ntriples(s), "predicate": ntriples(p),
             "object": ntriples(o), "query_version": version}
            for s, p, o in triples
        ],
        schema=schema.TRIPLES,
    )


def reference_output_stream_table(triples: list, window_end: int) -> pa.Table:
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




# --- collected terms --------------------------------------------------------------------------------------

XSD = "http://www.w3.org/2001/XMLSchema#"
LANG_STRING = "http://www.w3.org/1999/02/22-rdf-syntax-ns#langString"
COLLECTED = pa.struct([pa.field("kind", pa.int8()), pa.field("value", pa.string()),
                       pa.field("datatype", pa.string()), pa.field("language", pa.string())])
"""A term column as an evaluation collects it (``csparql.spark.terms.NULLABLE_TERM_STRUCT``)."""
START, END = 1_700_000_000_000_000, 1_700_000_600_123_456


def iri(value: str) -> dict:
    return {"kind": 1, "value": value, "datatype": None, "language": None}


def blank(label: str) -> dict:
    return {"kind": 2, "value": label, "datatype": None, "language": None}


def lit(value: str, datatype: str | None = XSD + "string", language: str | None = None) -> dict:
    return {"kind": 3, "value": value, "datatype": datatype, "language": language}


def tagged(value: str, tag: str) -> dict:
    return lit(value, LANG_STRING, tag)


def typed(datatype: str, *values: str) -> list[dict]:
    return [lit(value, XSD + datatype) for value in values]


COLUMNS = {
    "iris": [iri("http://example.org/a"), iri("http://example.org/a b"), iri('http://example.org/"q"'),
             iri("http://example.org/back\\slash"), iri("http://example.org/<>{}|^`"), iri("http://example.org/é✓"),
             iri("http://example.org/\u0001\t\n"), None],
    "strings": [lit('say "hi"'), lit("back\\slash \\n"), lit("line\nbreak\r\ttab\b\f"), lit("unicode é ✓ 𝄞 \u0000"),
                lit(""), lit("no datatype", None), lit("'single'"), None],
    "tagged": [tagged("chat", "fr"), tagged("Hello", "en-gb"), tagged("x", "EN-US"), tagged('"q"\n', "de"),
               lit("empty tag", LANG_STRING, ""), None],
    "integers": [*typed("integer", "1", "-0", "+5", " 6 ", "1_000", "123456789012345678", "9223372036854775807"),
                 *typed("int", "007"), *typed("long", "-42"), *typed("nonNegativeInteger", "٣"), None],
    "not_all_integers": [*typed("integer", "1", "one"), None],
    "numbers": [*typed("decimal", "1.5", "0.1", "1.", "-.5", "+3.25"), *typed("double", "1.5E3", "INF", "-INF", "NaN",
                "1e400", "4.9e-324", " 2.5 ", "1_0.5"), *typed("float", ".5", "1e-3"), *typed("integer", "2"),
                *typed("decimal", "12345678901234567890.123456789"), None],
    "numbers_and_a_word": [*typed("double", "1.5", "many")],
    "booleans": [*typed("boolean", "true", "1", "false", "0", "TRUE", " true"), None],
    "datetimes": [*typed("dateTime", "2024-03-01T10:00:00Z", "2024-03-01T10:00:00.123456+05:30", "2024-03-01T10:00:00",
                         "2024-03-01T10:00:00.5-08:00", "2024-02-29T23:59:59.999Z", "0999-01-01T00:00:00Z",
                         "2024-03-01", "2024-03-01T10:00Z", "1969-12-31T23:59:59.9995Z", "1969-12-31T23:59:58.0015Z"), None],
    "bad_datetimes": [*typed("dateTime", "2024-03-01T10:00:00Z", "2023-02-29T00:00:00Z")],
    "days_arrow_refuses": [*typed("dateTime", "2024-04-31T00:00:00Z", "2024-03-01T00:00:00Z")],
    "datetimes_and_dates": [*typed("dateTime", "2024-03-01T10:00:00Z"), *typed("date", "2024-03-01")],
    "blanks": [blank("b0"), blank("node_1"), blank("x.y-z"), None],
    "mixed": [iri("http://example.org/a"), blank("b1"), lit("text"), *typed("integer", "3"), tagged("t", "en"), None],
    "unbound": [None, None],
    "custom": [lit("x", "http://example.org/dt"), lit("y", 'http://example.org/d t"\\'), lit("z", ""),
               *typed("date", "2024-03-01"), *typed("gYear", "2024")],
}


def collected(columns: list[list]) -> pa.Table:
    """Term columns of equal length (the shorter padded with unbound values), as collected."""
    length = max((len(column) for column in columns), default=0)
    return pa.Table.from_arrays(
        [pa.array(column + [None] * (length - len(column)), COLLECTED) for column in columns],
        names=[f"c{index}" for index in range(len(columns))])


def assert_same_table(ours: pa.Table, reference: pa.Table) -> None:
    """The same schema, the same values (NaN equal to NaN) and the same bytes as a Parquet file."""
    assert ours.schema.equals(reference.schema, check_metadata=True), f"{ours.schema}\n---\n{reference.schema}"
    for name in reference.column_names:
        assert [repr(v) for v in ours.column(name).to_pylist()] == [repr(v) for v in reference.column(name).to_pylist()], name
    assert parquet_bytes(ours) == parquet_bytes(reference)


def parquet_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)
    return sink.getvalue().to_pybytes()


@pytest.mark.parametrize("name", sorted(COLUMNS))
def test_bindings_of_every_kind_of_term_are_written_as_the_rdflib_conversion_wrote_them(name):
    vars_ = (Variable(name), Variable("other"))
    terms = collected([COLUMNS[name], [iri("http://example.org/o")]])
    ours = rt.bindings_table(vars_, terms, START, END, None, "v1")
    reference = reference_bindings_table(vars_, reference_rows(terms), START, END, None, "v1")
    assert_same_table(ours, reference)


def test_all_the_columns_at_once_and_in_a_window_without_a_start():
    names = sorted(COLUMNS)
    vars_ = tuple(Variable(name) for name in names)
    terms = collected([COLUMNS[name] for name in names])
    assert_same_table(rt.bindings_table(vars_, terms, None, END, None, None),
                      reference_bindings_table(vars_, reference_rows(terms), None, END, None, None))


@pytest.mark.parametrize("kind", [pa.int64(), pa.float64(), pa.bool_(), schema.TIMESTAMP, pa.timestamp("ms", tz="UTC"), pa.timestamp("s", tz="UTC"),
                                  pa.string(), pa.large_string(), pa.date32()])
def test_a_column_typed_by_an_earlier_window_takes_the_values_that_fit_it(kind):
    names = sorted(COLUMNS)
    vars_ = tuple(Variable(name) for name in names)
    existing = pa.schema([*schema.WINDOW_COLUMNS, *(pa.field(column_names(vars_)[var], kind) for var in vars_)])
    terms = collected([COLUMNS[name] for name in names])
    assert_same_table(rt.bindings_table(vars_, terms, START, END, existing, "v2"),
                      reference_bindings_table(vars_, reference_rows(terms), START, END, existing, "v2"))


def test_no_solutions_and_solutions_without_variables():
    vars_ = (Variable("x"),)
    empty = collected([[]])
    assert_same_table(rt.bindings_table(vars_, empty, START, END, None, "v"),
                      reference_bindings_table(vars_, [], START, END, None, "v"))
    three = pa.table([pa.nulls(3)], names=["_"]).drop_columns(["_"])
    assert_same_table(rt.bindings_table((), three, START, END, None, "v"),
                      reference_bindings_table((), [()] * 3, START, END, None, "v"))


def test_an_integer_too_large_for_its_column_fails_the_write_as_before_and_fits_a_string_column():
    vars_ = (Variable("n"),)
    huge = collected([typed("integer", "1", str(2**70))])
    with pytest.raises(OverflowError):
        reference_bindings_table(vars_, reference_rows(huge), START, END, None, "v")
    with pytest.raises(OverflowError):
        rt.bindings_table(vars_, huge, START, END, None, "v")
    mixed = collected([typed("integer", "1", str(2**70)) + [lit("text")]])
    assert_same_table(rt.bindings_table(vars_, mixed, START, END, None, "v"),
                      reference_bindings_table(vars_, reference_rows(mixed), START, END, None, "v"))


def test_a_language_tag_rdflib_refuses_fails_as_before():
    terms = collected([[tagged("x", "e n")]])
    with pytest.raises(ValueError) as reference_error:
        reference_rows(terms)
    with pytest.raises(ValueError) as our_error:
        rt.bindings_table((Variable("x"),), terms, START, END, None, "v")
    assert str(our_error.value) == str(reference_error.value)


def graph_terms() -> pa.Table:
    """Triples with every kind of term in each place (the writers do not check places: the compiler does)."""
    objects = [term for name in sorted(COLUMNS) for term in COLUMNS[name] if term is not None]
    subjects = [iri(f"http://example.org/s{i}") if i % 3 else blank(f"b{i}") for i in range(len(objects))]
    predicates = [iri(f"http://example.org/p{i % 4}") for i in range(len(objects))]
    table = collected([subjects, predicates, objects])
    return table.rename_columns(["s", "p", "o"])


def test_construct_and_describe_triples_are_written_as_before():
    terms = graph_terms()
    for window_start in (START, None):
        assert_same_table(rt.triples_table(terms, window_start, END, "v"),
                          reference_triples_table(reference_rows(terms), window_start, END, "v"))
    empty = collected([[], [], []]).rename_columns(["s", "p", "o"])
    assert_same_table(rt.triples_table(empty, START, END, "v"), reference_triples_table([], START, END, "v"))


def test_the_output_stream_of_a_registered_stream_is_written_as_before():
    terms = graph_terms()
    assert_same_table(rt.output_stream_table(terms, END), reference_output_stream_table(reference_rows(terms), END))
    counts: dict[str, int] = {}
    for _, p, _ in reference_rows(terms):
        counts[str(p)] = counts.get(str(p), 0) + 1
    assert rt.predicate_counts(terms) == counts
    empty = collected([[], [], []]).rename_columns(["s", "p", "o"])
    assert_same_table(rt.output_stream_table(empty, END), reference_output_stream_table([], END))
    assert rt.predicate_counts(empty) == {}


# --- collected from Spark ---------------------------------------------------------------------------------

EX = "http://example.org/"
PREFIXES = f"PREFIX ex: <{EX}>\nPREFIX xsd: <{XSD}>\n"


def spark_graph():
    from rdflib import URIRef

    def u(name: str) -> URIRef:
        return URIRef(EX + name)

    values = [
        Literal('say "hi" \\ back\nnew line\ttab é ✓ 𝄞'), Literal("chat", lang="fr"), Literal("Hello", lang="en-GB"),
        Literal("42", datatype=URIRef(XSD + "integer")), Literal("007", datatype=URIRef(XSD + "int")),
        Literal("1.50", datatype=URIRef(XSD + "decimal")), Literal("1.5E3", datatype=URIRef(XSD + "double")),
        Literal("INF", datatype=URIRef(XSD + "double")), Literal("true", datatype=URIRef(XSD + "boolean")),
        Literal("0", datatype=URIRef(XSD + "boolean")),
        Literal("2024-03-01T10:00:00.123456+05:30", datatype=URIRef(XSD + "dateTime")),
        Literal("2024-03-01T10:00:00", datatype=URIRef(XSD + "dateTime")),
        Literal("x", datatype=URIRef(EX + "custom")), BNode("b1"), u("iri with space"),
    ]
    triples = []
    for index, value in enumerate(values):
        subject = u(f"s{index}") if index % 4 else BNode(f"s{index}")
        triples.append((subject, u("value"), value))
        triples.append((subject, u("kind"), Literal(type(value).__name__)))
        if index % 3 == 0:
            triples.append((subject, u("extra"), Literal(index)))
    return triples


QUERIES = {
    "select": "SELECT ?s ?v ?extra WHERE { ?s ex:value ?v OPTIONAL { ?s ex:extra ?extra } }",
    "select_expressions": """SELECT ?v (STR(?v) AS ?str) (LANG(?v) AS ?lang) (DATATYPE(?v) AS ?dt) (?extra * 1.5 AS ?scaled)
        (?extra / 7 AS ?ratio) (xsd:double(?extra) AS ?double) (?extra > 3 AS ?big) (STRLANG(STR(?v), "EN") AS ?tagged)
        (BNODE() AS ?fresh) (CONCAT("\\"", STR(?v), "\\\\") AS ?quoted) (IF(BOUND(?extra), ?extra, ?unbound) AS ?maybe)
        WHERE { ?s ex:value ?v OPTIONAL { ?s ex:extra ?extra } }""",
    "select_typed_groups": """SELECT ?kind (COUNT(*) AS ?n) (SUM(?extra) AS ?total) (AVG(?extra) AS ?mean)
        (GROUP_CONCAT(STR(?v); SEPARATOR="|") AS ?all) WHERE { ?s ex:kind ?kind ; ex:value ?v
        OPTIONAL { ?s ex:extra ?extra } } GROUP BY ?kind""",
    "select_no_variables": 'SELECT * WHERE { ex:s1 ex:kind "Literal" }',
    "construct": """CONSTRUCT { ?s ex:copy ?v . _:n ex:of ?s ; ex:extra ?extra } WHERE { ?s ex:value ?v
        OPTIONAL { ?s ex:extra ?extra } }""",
    "describe": "DESCRIBE ?s WHERE { ?s ex:value ?v FILTER(isBlank(?s)) }",
}


@pytest.fixture(scope="module")
def graph_reader(spark):
    from csparql.spark.sources import MemorySourceReader

    return MemorySourceReader(spark, graphs={None: spark_graph()})


@pytest.mark.parametrize("name", sorted(QUERIES))
def test_results_collected_from_spark_are_written_as_before(spark, graph_reader, name):
    from csparql.engine.evaluate import compile_plan
    from csparql.core.frontend import compile_query

    result = compile_plan(spark, compile_query(PREFIXES + QUERIES[name]), graph_reader, at=END).result()
    assert len(result) > 0
    rows = reference_rows(result.terms)
    assert result.rows == rows if result.form == "select" else result.triples == rows
    if result.form == "select":
        ours = rt.bindings_table(result.vars, result.terms, START, END, None, "v")
        assert_same_table(ours, reference_bindings_table(result.vars, rows, START, END, None, "v"))
        existing = ours.schema  # the next window's columns keep this window's types
        assert_same_table(rt.bindings_table(result.vars, result.terms, START, END, existing, "v"),
                          reference_bindings_table(result.vars, rows, START, END, existing, "v"))
    else:
        assert_same_table(rt.triples_table(result.terms, START, END, "v"),
                          reference_triples_table(rows, START, END, "v"))
        assert_same_table(rt.output_stream_table(result.terms, END), reference_output_stream_table(rows, END))

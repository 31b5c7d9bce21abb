"""The RSP-QL front end: the same syntax tree and algebra as the equivalent C-SPARQL query, the RSP-QL printer's
round trip, dialect detection, translation both ways, and refusals with line, column and caret."""

from __future__ import annotations

import pytest
from rdflib import URIRef

from csparql.core.algebra.sexpr import format_plan
from csparql.core.algebra.sexpr_reader import read_plan
from csparql.core.frontend import compile_query, parse_query
from csparql.core.language.dialect import detect_dialect
from csparql.core.language.errors import QueryError
from csparql.core.language.printer import format_query
from csparql.core.language.rspql import iso_duration_micros
from csparql.core.language.rspql_printer import (
    NotExpressibleError,
    format_rspql,
    iso_duration,
    untranslatable,
    untranslatable_to_csparql,
)
from support import FIXTURES, read_blocks

BLOCKS = {block.name: block.text for block in read_blocks(FIXTURES / "rspql" / "queries.rq")}
PAIRS = [(name, text, BLOCKS[f"{name}.csparql"]) for name, text in BLOCKS.items() if not name.endswith(".csparql")]
EXAMPLES = FIXTURES.parent.parent / "examples" / "rspql"


def test_the_fixture_set_covers_the_constructs():
    assert len(PAIRS) >= 12
    texts = "\n".join(text for _, text, _ in PAIRS)
    for construct in ("REGISTER RSTREAM", "REGISTER ISTREAM", "REGISTER DSTREAM", "ON STREAM", "[ROWS", "PT5M",
                      "CONSTRUCT", "ASK", "OPTIONAL { WINDOW", "UNION WINDOW", "FROM <"):
        assert construct in texts, construct


@pytest.mark.parametrize("name, rspql, csparql", PAIRS, ids=[name for name, _, _ in PAIRS])
def test_an_rspql_query_has_the_tree_and_algebra_of_its_csparql_equivalent(name, rspql, csparql):
    assert detect_dialect(rspql) == "rspql" and detect_dialect(csparql) == "csparql"
    assert parse_query(rspql, name) == parse_query(csparql, name)
    assert compile_query(rspql, name) == compile_query(csparql, name)


@pytest.mark.parametrize("name, rspql, csparql", PAIRS, ids=[name for name, _, _ in PAIRS])
def test_rspql_round_trips_through_its_printer(name, rspql, csparql):
    query = parse_query(rspql, name)
    printed = format_rspql(query)
    again = parse_query(printed, f"{name} (printed)")
    assert again == query
    assert format_rspql(again) == printed  # the spellings (window names, ON STREAM, output IRI) are kept
    # and the C-SPARQL printer's text of the same tree means the same
    assert compile_query(format_query(query)) == compile_query(rspql)


@pytest.mark.parametrize("name, rspql, csparql", PAIRS, ids=[name for name, _, _ in PAIRS])
def test_csparql_with_named_streams_translates_to_rspql(name, rspql, csparql):
    query = parse_query(csparql, name)
    assert untranslatable(query) == []
    printed = format_rspql(query)
    assert detect_dialect(printed) == "rspql" or not query.streams and query.registration is None
    assert compile_query(printed, f"{name} (translated)") == compile_query(csparql)


def test_spellings_are_kept():
    text = BLOCKS["rspjs-milliseconds"]
    printed = format_rspql(parse_query(text))
    assert "REGISTER RSTREAM <output> AS" in printed
    assert "FROM NAMED WINDOW :w1 ON STREAM <http://streams.example.org/s2> [RANGE 600000 STEP 300000]" in printed
    assert "WINDOW :w1 {" in printed
    both = format_rspql(parse_query(BLOCKS["two-names-one-window"]))
    assert "WINDOW ex:left {" in both and "WINDOW ex:right {" in both


def test_prefixes_may_come_before_or_after_register():
    after = BLOCKS["rsp4j-count-per-subject"]
    lines = after.split("\n")
    before = "\n".join([lines[1], lines[0], *lines[2:]])
    assert before.startswith("REGISTER RSTREAM")
    assert parse_query(before) == parse_query(after)


@pytest.mark.parametrize("text, micros", [
    ("PT10M", 600_000_000), ("PT1M", 60_000_000), ("PT0.5S", 500_000), ("P1D", 86_400_000_000),
    ("P1DT2H30M", 95_400_000_000), ("PT90M", 5_400_000_000), ("P2W", 14 * 86_400_000_000), ("pt5s", 5_000_000),
])
def test_iso_durations(text, micros):
    assert iso_duration_micros(text) == micros
    assert iso_duration_micros(iso_duration(micros)) == micros


@pytest.mark.parametrize("text, dialect", [
    ("SELECT * WHERE { ?s ?p ?o }", "csparql"),
    ("REGISTER QUERY q AS SELECT * FROM STREAM <s> [RANGE 1m STEP 1m] WHERE { ?s ?p ?o }", "csparql"),
    ("PREFIX window: <http://e/> SELECT * WHERE { ?window window:x ex:window }", "csparql"),
    ("SELECT * WHERE { ?s <http://e/WINDOW> 'WINDOW <x>' } # WINDOW <w> {", "csparql"),
    ("PREFIX : <e:> REGISTER RStream <out> AS SELECT * WHERE { ?s ?p ?o }", "rspql"),
    ("SELECT * FROM NAMED WINDOW <w> ON <s> [RANGE PT1M STEP PT1M] WHERE { WINDOW <w> { ?s ?p ?o } }", "rspql"),
    ("register istream <o> as select * where { ?s ?p ?o }", "rspql"),
])
def test_the_dialect_is_told_from_the_text(text, dialect):
    assert detect_dialect(text) == dialect


def test_a_plain_sparql_query_reads_the_same_in_both_dialects():
    text = "PREFIX ex: <http://example.org/> SELECT ?s (COUNT(*) AS ?n) WHERE { ?s ex:p ?o } GROUP BY ?s"
    assert parse_query(text, dialect="rspql") == parse_query(text, dialect="csparql")


def test_untranslatable_constructs_are_each_named_with_their_place():
    text = """REGISTER QUERY q COMPUTED EVERY 2m ENTAILMENT RDFS AS
PREFIX ex: <http://example.org/>
SELECT ?s ?n ?t
FROM STREAM <http://streams.example.org/s1> [RANGE 5m STEP 1m]
WHERE { ?s ex:q ?o BIND (timestamp(?s) AS ?t) }
AGGREGATE { (?n, COUNT, {?s}) }
"""
    problems = untranslatable(parse_query(text))
    messages = " | ".join(p.message for p in problems)
    for construct in ("COMPUTED EVERY", "ENTAILMENT", "FROM STREAM", "AGGREGATE", "timestamp()"):
        assert construct in messages
    assert {p.span.line for p in problems if p.span is not None} >= {1, 4, 6}
    with pytest.raises(NotExpressibleError):
        format_rspql(parse_query(text))


def test_computed_every_equal_to_the_step_is_left_out():
    text = BLOCKS["rsp4j-count-per-subject.csparql"].replace("REGISTER QUERY counts AS", "REGISTER QUERY counts COMPUTED EVERY 1m AS")
    printed = format_rspql(parse_query(text))
    assert "COMPUTED" not in printed
    assert compile_query(printed).registration == compile_query(BLOCKS["rsp4j-count-per-subject"]).registration


RSPQL_HEAD = "PREFIX ex: <http://example.org/>\nREGISTER RSTREAM <http://example.org/out> AS\nSELECT *\n"
WINDOW = "FROM NAMED WINDOW ex:w ON <http://streams.example.org/s1> [RANGE PT5M STEP PT1M]\n"
REFUSED = [
    # (name, query, words the message has, line, column)
    ("undeclared-window", RSPQL_HEAD + WINDOW + "WHERE { WINDOW ex:v { ?s ?p ?o } }",
     "the window <http://example.org/v> is not declared", 5, 16),
    ("window-variable", RSPQL_HEAD + WINDOW + "WHERE { WINDOW ?w { ?s ?p ?o } }", "WINDOW ?variable is not supported", 5, 16),
    ("static-window", RSPQL_HEAD + "FROM NAMED WINDOW ex:w ON <http://s> [FROM NOW-PT1H TO NOW-PT5M]\nWHERE { WINDOW ex:w { ?s ?p ?o } }",
     "a static window [FROM … TO …] is not supported", 4, 38),
    ("years", RSPQL_HEAD + "FROM NAMED WINDOW ex:w ON <http://s> [RANGE P1Y STEP PT1M]\nWHERE { WINDOW ex:w { ?s ?p ?o } }",
     "counts years or months", 4, 45),
    ("not-iso", RSPQL_HEAD + "FROM NAMED WINDOW ex:w ON <http://s> [RANGE PT5X STEP PT1M]\nWHERE { WINDOW ex:w { ?s ?p ?o } }",
     "is not an ISO 8601 duration", 4, 45),
    ("empty-iso", RSPQL_HEAD + "FROM NAMED WINDOW ex:w ON <http://s> [RANGE PT STEP PT1M]\nWHERE { WINDOW ex:w { ?s ?p ?o } }",
     "has no amount", 4, 45),
    ("milliseconds-after-on", RSPQL_HEAD + "FROM NAMED WINDOW ex:w ON <http://s> [RANGE 600000 STEP 60000]\nWHERE { WINDOW ex:w { ?s ?p ?o } }",
     "expected an ISO 8601 duration (PT10M)", 4, 45),
    ("iso-after-on-stream", RSPQL_HEAD + "FROM NAMED WINDOW ex:w ON STREAM <http://s> [RANGE PT5M STEP 60000]\nWHERE { WINDOW ex:w { ?s ?p ?o } }",
     "unexpected 'PT5M'", 4, 52),
    ("graph-over-two-windows-of-one-stream", RSPQL_HEAD + WINDOW
     + "FROM NAMED WINDOW ex:v ON <http://streams.example.org/s1> [RANGE PT10M STEP PT1M]\n"
     "WHERE { WINDOW ex:w { ?s ?p ?o } GRAPH <http://streams.example.org/s1> { ?s ?p ?o } }",
     "names a stream the query reads through several different windows", 6, 40),
    ("declared-twice", RSPQL_HEAD + WINDOW + "FROM NAMED WINDOW ex:w ON <http://streams.example.org/s2> [RANGE PT10M STEP PT1M]\n"
     "WHERE { WINDOW ex:w { ?s ?p ?o } }", "is declared twice", 5, 19),
    ("rows-zero", RSPQL_HEAD + "FROM NAMED WINDOW ex:w ON <http://s> [ROWS 0]\nWHERE { WINDOW ex:w { ?s ?p ?o } }",
     "ROWS 0 is not allowed", 4, 44),
    ("step-longer-than-range", RSPQL_HEAD + "FROM NAMED WINDOW ex:w ON <http://s> [RANGE PT1M STEP PT5M]\nWHERE { WINDOW ex:w { ?s ?p ?o } }",
     "STEP is longer than its RANGE", 4, 55),
    ("zero-range", RSPQL_HEAD + "FROM NAMED WINDOW ex:w ON STREAM <http://s> [RANGE 0 STEP 0]\nWHERE { WINDOW ex:w { ?s ?p ?o } }",
     "must be a positive duration", 4, 52),
    ("csparql-register", "REGISTER QUERY q AS\nSELECT * FROM NAMED WINDOW <w> ON <s> [RANGE PT1M STEP PT1M]\nWHERE { WINDOW <w> { ?s ?p ?o } }",
     "REGISTER QUERY <name> is C-SPARQL", 1, 1),
    ("csparql-from-stream", RSPQL_HEAD + "FROM STREAM <http://s> [RANGE 1m STEP 1m]\nWHERE { ?s ?p ?o }",
     "FROM STREAM is C-SPARQL; in RSP-QL write FROM NAMED WINDOW", 4, 1),
    ("csparql-aggregate", RSPQL_HEAD + WINDOW + "WHERE { WINDOW ex:w { ?s ?p ?o } }\nAGGREGATE { (?n, COUNT, {?s}) }",
     "AGGREGATE clauses are C-SPARQL", 6, 1),
    ("csparql-timestamp", RSPQL_HEAD + WINDOW + "WHERE { WINDOW ex:w { ?s ?p ?o } FILTER (timestamp(?s) > 0) }",
     "timestamp() is a C-SPARQL function", 5, 42),
    ("csparql-select-istream", "PREFIX ex: <http://example.org/>\nREGISTER RSTREAM <http://example.org/out> AS\nSELECT ISTREAM ?s\n"
     + WINDOW + "WHERE { WINDOW ex:w { ?s ?p ?o } }", "SELECT ISTREAM is the C-SPARQL spelling", 3, 8),
    ("istream-construct", "PREFIX ex: <http://example.org/>\nREGISTER ISTREAM <http://example.org/out> AS\nCONSTRUCT { ?s ?p ?o }\n"
     + WINDOW + "WHERE { WINDOW ex:w { ?s ?p ?o } }", "ISTREAM of a CONSTRUCT query is not supported", 2, 10),
    ("unnamable-output", "REGISTER RSTREAM <http://example.org/> AS\nSELECT * WHERE { ?s ?p ?o }",
     "must end with a name csparql can give the query", 1, 18),
    ("keyword-output", "REGISTER RSTREAM <http://example.org/select> AS\nSELECT * WHERE { ?s ?p ?o }",
     "must end with a name csparql can give the query", 1, 18),
]


@pytest.mark.parametrize("name, text, words, line, column", REFUSED, ids=[case[0] for case in REFUSED])
def test_refusals_name_the_construct_and_its_place(name, text, words, line, column):
    with pytest.raises(QueryError) as caught:
        compile_query(text, f"{name}.rq", dialect="rspql")
    error = caught.value
    assert words in error.message, error.render()
    assert (error.span.line, error.span.column) == (line, column), error.render()
    rendered = error.render()
    assert f"{name}.rq:{line}:{column}: error:" in rendered and "^" in rendered and "Traceback" not in rendered


SEVERAL_WINDOWS = {block.name: block.text for block in read_blocks(FIXTURES / "rspql" / "several_windows.rq")}


@pytest.mark.parametrize("name", SEVERAL_WINDOWS)
def test_several_windows_over_one_stream_round_trip_through_the_printer(name):
    query = parse_query(SEVERAL_WINDOWS[name], name)
    printed = format_rspql(query)
    again = parse_query(printed, f"{name} (printed)")
    assert again == query
    assert format_rspql(again) == printed


@pytest.mark.parametrize("name", SEVERAL_WINDOWS)
def test_each_of_several_windows_over_one_stream_is_a_named_graph_of_its_own(name):
    """A window is the graph named by its window IRI when its stream has other, different windows, else by its
    stream; the plan has one stream window per graph, and its s-expression reads back to the same plan."""
    query = parse_query(SEVERAL_WINDOWS[name], name)
    plan = compile_query(SEVERAL_WINDOWS[name], name)
    windows_of = {}
    for clause in query.streams:
        windows_of.setdefault(clause.iri, set()).add((clause.window.range.micros, clause.window.step.micros))
    expected = [clause.window_name if len(windows_of[clause.iri]) > 1 else clause.iri for clause in query.streams]
    assert [source.graph_name for source in plan.streams] == expected
    assert len({source.graph_name for source in plan.streams}) == len(plan.streams)
    assert read_plan(format_plan(plan)) == plan


def test_two_windows_over_one_stream_read_two_windows_of_that_stream():
    plan = compile_query(SEVERAL_WINDOWS["long-and-short-counts"])
    long, short = plan.streams
    assert long.iri == short.iri == URIRef("http://streams.example.org/s1")
    assert (long.graph, short.graph) == (URIRef("http://example.org/long"), URIRef("http://example.org/short"))
    assert (long.window.range, short.window.range) == (10 * 60_000_000, 2 * 60_000_000)
    assert "WINDOW ex:long {" in format_rspql(parse_query(SEVERAL_WINDOWS["long-and-short-counts"]))


def test_csparql_still_refuses_two_different_windows_over_one_stream():
    """C-SPARQL names a stream's window by the stream, so two different windows of one stream stay refused."""
    text = ("SELECT * FROM NAMED STREAM <http://s> [RANGE 10m STEP 1m]\nFROM NAMED STREAM <http://s> [RANGE 1m STEP 1m]\n"
            "WHERE { GRAPH <http://s> { ?s ?p ?o } }")
    with pytest.raises(QueryError) as caught:
        compile_query(text, "two.rq", dialect="csparql")
    assert "is given two different windows" in caught.value.message
    assert (caught.value.span.line, caught.value.span.column) == (2, 19)


def test_translating_several_windows_over_one_stream_to_csparql_names_what_cannot_be_expressed():
    query = parse_query(SEVERAL_WINDOWS["graph-variable"])
    problems = untranslatable_to_csparql(query)
    assert len(problems) == 1
    message = problems[0].message
    assert "<http://example.org/w10> [RANGE PT10M STEP PT5M] and <http://example.org/w3>" in message
    assert "both read the stream <http://streams.example.org/s1>" in message and "one window per stream" in message
    assert problems[0].span.line == 5

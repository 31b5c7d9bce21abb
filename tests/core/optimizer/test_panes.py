"""Which queries compute their windows from panes, and the reason the others recompute (the pure decision of
``csparql.core.panes``), on the examples, the SRBench queries and queries written to probe each
rule; the per-query setting that turns panes off; and ``csparql explain``'s section."""

from __future__ import annotations

from pathlib import Path

import pytest
from rdflib import URIRef

from csparql.cli import main
from csparql.deploy.file_settings import FileSettings
from csparql.deploy.plan import deployment_of_text
from csparql.deploy.registry import RegistrationError
from csparql.deploy.settings import Settings
from csparql.engine.panes import PANE_MIN_TRIPLES, pane_min_triples
from csparql.core.frontend import compile_query
from csparql.core.optimizer import NO_STATISTICS, SourceStatistics, optimize
from csparql.core.panes import (
    AGGREGATE, ASK, CONSTRUCT, DISTINCT, KEYED, MAXIMUM, MINIMUM, VALUE_SET, PanePlan, Recompute,
    automatic_refusal, pane_mode, pane_plan,
)

ROOT = Path(__file__).resolve().parents[3]
S = "http://example.org/s"
STATIC = "http://example.org/static"
PREFIX = "PREFIX : <http://example.org/>\n"
# The stream holds :p and :q, the static graph :name and :kind: the D-Graph split puts each pattern on its side.
STATISTICS = SourceStatistics({
    URIRef(S): {URIRef("http://example.org/p"): 10, URIRef("http://example.org/q"): 10},
    URIRef(STATIC): {URIRef("http://example.org/name"): 5, URIRef("http://example.org/kind"): 5},
})


def decide(text: str, statistics: SourceStatistics = STATISTICS):
    return pane_plan(optimize(compile_query(text, "<test>"), statistics))


def query(select: str, where: str, window: str = "[RANGE 10m STEP 1m]", tail: str = "", stream: str = "STREAM") -> str:
    return (f"REGISTER QUERY Q AS {PREFIX}{select}\nFROM {stream} <{S}> {window}\nFROM <{STATIC}>\n"
            f"WHERE {{ {where} }} {tail}")


def reason(decision) -> str:
    assert isinstance(decision, Recompute), decision
    return decision.reason


# --- the examples and SRBench -----------------------------------------------------------------------------

EXAMPLES = {
    "01-sensors-per-street": "reads no stream window",
    "02-cars-per-tollgate": AGGREGATE,
    "03-cars-per-tollgate-long-units": AGGREGATE,
    "04-cars-per-district": "joins 3 triple patterns over a stream window",  # no statistics: all may be stream
    "05-cars-per-street-worked-example": "an AGGREGATE clause keeps every solution",
    "06-multiple-aggregates": "an AGGREGATE clause extends every solution",
    "07-register-stream-construct": "an AGGREGATE clause extends every solution",
    "08-full-streets-two-streams": "tumbling: every triple is in one window, nothing to reuse",
    "09-timestamp-function": "timestamp()",
    "11-broker-daily-total": "tumbling",
    "12-seller-market-named-streams": "tumbling",
    "13-close-friends-last-hour": "joins 4 triple patterns over a stream window",
    "14-top-topics": AGGREGATE,
    "15-topic-counts-3m-every-10s": AGGREGATE,
    "16-physical-window": "count window [TRIPLES 1000]",
    "17-engine-design-example": "tumbling",
}

SRBENCH = {
    "q01-rainfall": "joins 5 triple patterns",
    "q02-precipitation": "an OPTIONAL reads a stream window",
    "q03-hurricane": "a sub-select's aggregate",
    "q05-blizzard": "the CONSTRUCT template has blank nodes",
    "q06-low-visibility": "the output is every solution of the window",
    "q07-broken-stations": "DSTREAM compares each window's result",
    "q11-deviating-stations": "an AGGREGATE clause extends every solution",
    "q12-large-cities": "tumbling",
    "q15-stronger-than-hurricane": "tumbling",
    "q16-threatened-heritage": "the output is every solution of the window",
}


@pytest.mark.parametrize(("name", "expected"), EXAMPLES.items())
def test_each_example_gets_its_decision(name, expected):
    decision = decide((ROOT / "examples/queries" / f"{name}.rq").read_text(), NO_STATISTICS)
    if expected == AGGREGATE:
        assert isinstance(decision, PanePlan) and decision.combination == AGGREGATE
    else:
        assert expected in reason(decision)


@pytest.mark.parametrize(("name", "expected"), SRBENCH.items())
def test_each_srbench_query_gets_its_reason(name, expected):
    assert expected in reason(decide((ROOT / "examples/srbench" / f"{name}.rq").read_text(), NO_STATISTICS))


def test_example_04_uses_panes_once_statistics_put_its_static_patterns_on_the_static_side():
    text = (ROOT / "examples/queries/04-cars-per-district.rq").read_text()
    tollgates = URIRef("http://streams.org/citytollgates.trdf")
    statistics = SourceStatistics({
        tollgates: {URIRef("http://linkedurbandata.org/traffic#registers"): 100},
        None: {URIRef("http://linkedurbandata.org/city#placedIn"): 10,
               URIRef("http://linkedurbandata.org/city#contains"): 10},
    })
    decision = decide(text, statistics)
    assert isinstance(decision, PanePlan)
    assert [(w.stream, w.pane, w.panes_per_window) for w in decision.windows] == [(tollgates, 5 * 60_000_000, 6)]
    assert [p.partial for p in decision.partials] == [KEYED]
    assert [str(t.predicate) for t in decision.stream_patterns] == ["http://linkedurbandata.org/traffic#registers"]


# --- what panes can combine ---------------------------------------------------------------------------------

def test_the_pane_is_the_gcd_of_range_and_step():
    decision = decide(query("SELECT (MIN(?v) AS ?m)", "?s :p ?v", "[RANGE 10m STEP 4m]"))
    assert [(w.pane, w.panes_per_window) for w in decision.windows] == [(2 * 60_000_000, 5)]


@pytest.mark.parametrize(("aggregate", "partial"), [
    ("MIN(?v)", MINIMUM), ("MAX(?v)", MAXIMUM), ("COUNT(DISTINCT ?v)", VALUE_SET), ("SUM(DISTINCT ?v)", VALUE_SET),
    ("AVG(DISTINCT ?v)", VALUE_SET), ("COUNT(*)", KEYED), ("COUNT(?v)", KEYED), ("SUM(?v)", KEYED),
    ("AVG(?v)", KEYED),
])
def test_each_aggregate_gets_its_partial(aggregate, partial):
    decision = decide(query(f"SELECT ?k ({aggregate} AS ?a)", "?s :p ?v . ?s :kind ?k", tail="GROUP BY ?k"))
    assert isinstance(decision, PanePlan) and decision.combination == AGGREGATE
    assert [p.partial for p in decision.partials] == [partial]


def test_having_runs_on_the_combined_aggregates():
    decision = decide(query("SELECT ?k (COUNT(DISTINCT ?v) AS ?n)", "?s :p ?v . ?s :kind ?k",
                            tail="GROUP BY ?k HAVING (COUNT(DISTINCT ?v) > 2 && NOW() > '2020-01-01T00:00:00Z'^^<http://www.w3.org/2001/XMLSchema#dateTime>)"))
    assert isinstance(decision, PanePlan) and [p.partial for p in decision.partials] == [VALUE_SET]


@pytest.mark.parametrize(("select", "where", "combination"), [
    ("SELECT DISTINCT ?s ?name", "?s :p ?v . ?v :name ?name FILTER (?name != 'x')", DISTINCT),
    ("SELECT REDUCED ?s", "?s :p ?v", DISTINCT),
    ("SELECT DISTINCT ?s", "{ ?s :p ?v } UNION { ?s :kind ?k }", DISTINCT),  # static-only solutions: a set
    ("SELECT DISTINCT ?s", "?s :p ?v OPTIONAL { ?v :name ?n } MINUS { ?s :kind :x }", DISTINCT),
    ("SELECT DISTINCT ?g ?s", "GRAPH ?g { ?s :p ?v }", DISTINCT),
    ("ASK", "?s :p ?v . ?v :name 'x'", ASK),
    ("CONSTRUCT { ?s :seen ?v }", "?s :p ?v", CONSTRUCT),
])
def test_set_outputs_combine_as_unions(select, where, combination):
    stream = "NAMED STREAM" if "GRAPH" in where else "STREAM"
    text = query(select, where, stream=stream)
    if combination == CONSTRUCT:
        text = text.replace("REGISTER QUERY Q", "REGISTER STREAM Q")
    decision = decide(text)
    assert isinstance(decision, PanePlan), decision
    assert decision.combination == combination


def test_operators_above_the_aggregation_run_on_the_combined_groups():
    decision = decide(query("SELECT DISTINCT ?s ?n", "{ SELECT ?s (COUNT(*) AS ?n) WHERE { ?s :p ?v } GROUP BY ?s }",
                            tail="ORDER BY DESC(?n) LIMIT 3"))
    assert isinstance(decision, PanePlan) and decision.combination == AGGREGATE


def test_count_over_a_union_of_stream_patterns_is_keyed_by_either_pattern():
    decision = decide(query("SELECT (COUNT(*) AS ?n)", "{ ?s :p ?v } UNION { ?s :q ?v }"))
    assert isinstance(decision, PanePlan) and len(decision.stream_patterns) == 2


def test_windows_of_different_shapes_recompute_and_two_streams_of_one_shape_use_panes():
    union = f"WHERE {{ {{ GRAPH <{S}> {{ ?s :p ?v }} }} UNION {{ GRAPH <{S}2> {{ ?s :p ?v }} }} }}"
    text = (f"REGISTER QUERY Q AS {PREFIX}SELECT DISTINCT ?s FROM NAMED STREAM <{S}> [RANGE 10m STEP 5m] "
            f"FROM NAMED STREAM <{S}2> [RANGE 5m TUMBLING] {union}")
    assert "its stream windows differ" in reason(decide(text, NO_STATISTICS))
    text = (f"REGISTER QUERY Q AS {PREFIX}SELECT DISTINCT ?s FROM NAMED STREAM <{S}> [RANGE 10m STEP 5m] "
            f"FROM NAMED STREAM <{S}2> [RANGE 10m STEP 5m] {union}")
    decision = decide(text, NO_STATISTICS)
    assert [(str(w.stream), w.panes_per_window) for w in decision.windows] == [(S, 2), (S + "2", 2)]


# --- what recomputes, and why ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("select", "where", "tail", "expected"), [
    ("SELECT DISTINCT ?s", "?s :p ?v . ?v :q ?w", "", "joins 2 triple patterns over a stream window"),
    ("SELECT DISTINCT ?s", "?s :p ?v OPTIONAL { ?v :q ?w }", "", "an OPTIONAL reads a stream window"),
    ("SELECT DISTINCT ?s", "?s :kind ?k OPTIONAL { ?s :p ?w }", "", "an OPTIONAL reads a stream window"),
    ("SELECT DISTINCT ?s", "?s :p ?v MINUS { ?s :q ?w }", "", "a MINUS removes what a stream window matches"),
    ("SELECT DISTINCT ?s", "?s :p ?v FILTER NOT EXISTS { ?s :q ?w }", "", "NOT EXISTS over a stream window"),
    ("SELECT DISTINCT ?s", "?s :kind ?k FILTER EXISTS { ?s :p ?w }", "", "EXISTS over a stream window"),
    ("SELECT DISTINCT ?s", "{ SELECT ?s WHERE { ?s :p ?v } LIMIT 3 }", "", "a LIMIT or OFFSET inside the query"),
    ("SELECT (COUNT(*) AS ?n)", "{ SELECT ?s WHERE { ?s :p ?v } }", "", "a sub-select over a stream window hides"),
    ("SELECT (COUNT(*) AS ?n)", "{ SELECT DISTINCT ?v WHERE { ?s :p ?v } }", "", "a sub-select over a stream"),
    ("SELECT DISTINCT ?s ?n", "{ SELECT ?s (COUNT(*) AS ?n) WHERE { ?s :p ?v } GROUP BY ?s } ?s :kind ?k", "",
     "a sub-select's aggregate"),
    ("SELECT (COUNT(*) AS ?n)", "{ ?s :p ?v } UNION { ?s :kind ?k }", "", "some solutions read only static graphs"),
    ("SELECT (SAMPLE(?v) AS ?x)", "?s :p ?v", "", "SAMPLE may take any value"),
    ("SELECT (GROUP_CONCAT(?v) AS ?x)", "?s :p ?v", "", "GROUP_CONCAT depends on the order"),
    ("SELECT ?s", "?s :p ?v", "", "the output is every solution of the window"),
    ("SELECT DISTINCT ?s", "?s :p ?v FILTER (timestamp(?s) > 0)", "", "timestamp()"),
    ("SELECT DISTINCT ?s", "?s :p ?v BIND (NOW() AS ?t)", "", "NOW(), the window's end"),
    ("SELECT DISTINCT ?s ?r", "?s :p ?v BIND (RAND() AS ?r)", "", "RAND(), which gives another value"),
    ("SELECT ?k (MIN(?v) AS ?m)", "?s :p ?v", "GROUP BY (STRUUID() AS ?k)", "STRUUID()"),
    ("SELECT DISTINCT ?s", "?s :p+ ?v", "", "a property path over a stream window"),
])
def test_queries_that_recompute_say_why(select, where, tail, expected):
    assert expected in reason(decide(query(select, where, tail=tail)))


@pytest.mark.parametrize(("text", "expected"), [
    (query("SELECT ISTREAM DISTINCT ?s", "?s :p ?v"), "ISTREAM compares each window's result"),
    (query("SELECT DISTINCT ?s", "?s :p ?v", "[TRIPLES 100]"), "count window [TRIPLES 100]"),
    (query("SELECT DISTINCT ?s", "?s :p ?v", "[RANGE 5m TUMBLING]"), "tumbling: every triple is in one window"),
    (query("SELECT DISTINCT ?s", "?s :p ?v", "[RANGE 5m STEP 5m]"), "tumbling: every triple is in one window"),
    (query("CONSTRUCT { ?s :seen [ :value ?v ] }", "?s :p ?v").replace("QUERY", "STREAM"),
     "the CONSTRUCT template has blank nodes"),
    (query("DESCRIBE ?s", "?s :p ?v").replace("QUERY", "STREAM"), "DESCRIBE follows the triples"),
    (query("SELECT DISTINCT ?s", "?s :name ?v"), "no pattern reads a stream window"),
])
def test_window_forms_and_outputs_that_recompute_say_why(text, expected):
    assert expected in reason(decide(text))


# --- the per-query setting -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("SELECT * WHERE { ?s ?p ?o }", None),
    ("# csparql panes off\nSELECT * WHERE { ?s ?p ?o }", "off"),
    ("#csparql PANES: Off\nSELECT * WHERE { ?s ?p ?o }", "off"),
    ("# csparql panes = on\nSELECT * WHERE { ?s ?p ?o }", "always"),
    ("# csparql panes ALWAYS\nSELECT * WHERE { ?s ?p ?o }", "always"),
    ("# csparql panes off\n# csparql panes auto\nSELECT * WHERE { ?s ?p ?o }", "auto"),
])
def test_the_panes_setting_is_read_from_its_comment_line(text, expected):
    assert FileSettings.of(Path("q.rq"), text).panes == expected


@pytest.mark.parametrize(("line", "written"), [("# csparql panes maybe", "'maybe'"), ("# csparql panes", "nothing")])
def test_a_panes_setting_other_than_auto_always_or_off_is_refused_with_its_line(line, written):
    with pytest.raises(RegistrationError) as refusal:
        FileSettings.of(Path("q.rq"), f"PREFIX : <http://example.org/>\n{line}\nSELECT * WHERE {{ ?s ?p ?o }}")
    assert str(refusal.value) == (f"q.rq: line 2: '# csparql panes' takes auto, always (on) or off, "
                                  f"not {written}")


def test_a_deployment_carries_the_panes_setting(tmp_path):
    (tmp_path / "registry").mkdir()
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "registry"),
                                          "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse")})
    text = query("SELECT DISTINCT ?s", "?s :p ?v")
    assert deployment_of_text(text, "Q", settings).panes == "auto"
    assert deployment_of_text("# csparql panes off\n" + text, "Q", settings).panes == "off"
    assert deployment_of_text("# csparql panes always\n" + text, "Q", settings).panes == "always"
    with pytest.raises(RegistrationError, match="takes auto, always \\(on\\) or off, not 'no'"):
        deployment_of_text("# csparql panes no\n" + text, "Q", settings)


def test_the_automatic_mode_declines_keyed_partials_and_the_threshold_reads_the_environment():
    keyed = decide(query("SELECT ?s (COUNT(*) AS ?n)", "?s :p ?v", tail="GROUP BY ?s"), NO_STATISTICS)
    distinct = decide(query("SELECT DISTINCT ?s", "?s :p ?v"), NO_STATISTICS)
    assert "keep a row per stream solution in every pane" in automatic_refusal(keyed)
    assert automatic_refusal(distinct) is None
    assert pane_min_triples({}) == PANE_MIN_TRIPLES and pane_min_triples({"CSPARQL_PANES_MIN_TRIPLES": "0"}) == 0
    with pytest.raises(ValueError, match="is negative"):
        pane_min_triples({"CSPARQL_PANES_MIN_TRIPLES": "-1"})
    assert pane_mode(None) == "auto" and pane_mode("On") == "always"
    with pytest.raises(ValueError, match="panes take auto, always, off"):
        pane_mode("sometimes")


# --- csparql explain -------------------------------------------------------------------------------------------

def explain(tmp_path, capsys, text: str) -> tuple[int, str, str]:
    path = tmp_path / "q.rq"
    path.write_text(text, encoding="utf-8")
    code = main(["explain", str(path), "--warehouse", str(tmp_path / "no-warehouse")])
    out, err = capsys.readouterr()
    return code, out, err


def test_explain_shows_the_pane_plan(tmp_path, capsys):
    code, out, _ = explain(tmp_path, capsys, (ROOT / "examples/queries/15-topic-counts-3m-every-10s.rq").read_text())
    assert code == 0 and "# algebra" in out and "# optimized" in out
    section = out.split("# panes")[1]
    assert "[RANGE 3m STEP 10s]: panes of 10s, 18 per window" in section
    assert "?number = (count): each pane keeps each distinct solution with its number of occurrences" in section
    assert "each pane evaluates" in section and "(pane-rows (vars ?post ?topic ?.pattern ?.n))" in section
    assert section.startswith(" (auto, the default)") and "auto recomputes every window: its COUNT" in section
    assert "turned off" not in section


def test_explain_says_what_always_and_auto_do_for_a_query_whose_partials_are_sets(tmp_path, capsys):
    text = query("SELECT DISTINCT ?s", "?s :p ?v")
    _, out, _ = explain(tmp_path, capsys, "# csparql panes always\n" + text)
    assert "always: every window is combined from panes" in out.split("# panes")[1]
    _, out, _ = explain(tmp_path, capsys, text)
    assert "auto: windows whose stream files hold at least 1,000,000 triples" in out.split("# panes")[1]


def test_explain_shows_why_a_query_recomputes_and_that_its_file_turns_panes_off(tmp_path, capsys):
    text = "# csparql panes off\n" + (ROOT / "examples/queries/16-physical-window.rq").read_text()
    code, out, _ = explain(tmp_path, capsys, text)
    section = out.split("# panes")[1]
    assert code == 0 and "recomputes every window: <http://streams.org/milantollgates.trdf> has a count window" in section
    assert "turned off by the file's '# csparql panes off'" in section


def test_explain_refuses_a_bad_panes_setting_in_one_line(tmp_path, capsys):
    code, out, err = explain(tmp_path, capsys, "# csparql panes sometimes\n" + query("SELECT DISTINCT ?s", "?s :p ?v"))
    assert code == 1 and out == ""
    assert err == (f"{tmp_path / 'q.rq'}: error: line 1: '# csparql panes' takes auto, always (on) or off, "
                   "not 'sometimes'\n")

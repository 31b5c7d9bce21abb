"""Entailment regimes (``ENTAILMENT RDFS``, ``ENTAILMENT SAMEAS``) on Spark against pyoxigraph over the same window
and static graphs with the entailment made explicit by forward chaining (``conformance.entailment``).

The ontology has sub-class and sub-property chains (so transitivity matters), a sub-property of rdf:type, and
owl:sameAs links that only symmetry and transitivity join; the stream window has triples that need each rule,
a triple before the window and a class outside the hierarchy.
"""

from __future__ import annotations

import pytest
from rdflib import Literal, URIRef

from conformance import entailment, reference
from conformance.compare import compare, from_engine
from csparql.engine.evaluate import compile_plan, evaluate_plan
from csparql.core.frontend import compile_query
from csparql.core.optimizer import SourceStatistics
from csparql.core.optimizer.entailment import entailed_statistics
from csparql.spark.sources import MemorySourceReader

EX = "http://example.org/"
RDF_TYPE = URIRef("http://www.w3.org/1999/02/22-rdf-syntax-ns#type")
SUB_CLASS = URIRef("http://www.w3.org/2000/01/rdf-schema#subClassOf")
SUB_PROPERTY = URIRef("http://www.w3.org/2000/01/rdf-schema#subPropertyOf")
SAME_AS = URIRef("http://www.w3.org/2002/07/owl#sameAs")
STREAM, ONTOLOGY, DATA = URIRef(EX + "stream"), URIRef(EX + "ontology"), URIRef(EX + "data")
SECOND = 1_000_000
AT = 20 * SECOND


def u(name: str) -> URIRef:
    return URIRef(EX + name)


ONTOLOGY_TRIPLES = [
    (u("B"), SUB_CLASS, u("A")), (u("C"), SUB_CLASS, u("B")), (u("D"), SUB_CLASS, u("A")),
    (u("q"), SUB_PROPERTY, u("p")), (u("r"), SUB_PROPERTY, u("q")), (u("kind"), SUB_PROPERTY, RDF_TYPE),
    (u("x"), SAME_AS, u("y")), (u("z"), SAME_AS, u("y")), (u("w"), SAME_AS, u("z")),
]
DATA_TRIPLES = [(u("s9"), RDF_TYPE, u("C")), (u("y"), u("label"), Literal("Y")), (u("t"), u("near"), u("w"))]
STREAM_TRIPLES = [
    (u("s0"), RDF_TYPE, u("C"), 5 * SECOND),  # before the window
    (u("s1"), RDF_TYPE, u("C"), 12 * SECOND),
    (u("s2"), u("kind"), u("D"), 13 * SECOND),
    (u("s3"), u("r"), u("o1"), 14 * SECOND),
    (u("x"), u("p"), u("o2"), 15 * SECOND),
    (u("s4"), u("q"), u("y"), 16 * SECOND),
    (u("s5"), u("p"), Literal("lit"), 17 * SECOND),
    (u("s6"), RDF_TYPE, u("E"), 18 * SECOND),
]
PREFIXES = f"""PREFIX ex: <{EX}>
PREFIX rdfs: <http://www.w3.org/2000/01/rdf-schema#>
PREFIX owl: <http://www.w3.org/2002/07/owl#>
"""


def query(regimes: str, body: str) -> str:
    entailment_clause = f" ENTAILMENT {regimes}" if regimes else ""
    select, where = body.split(" WHERE ", 1)
    return (
        f"REGISTER QUERY Entailed{entailment_clause} AS\n{PREFIXES}{select}\n"
        f"FROM STREAM <{STREAM}> [RANGE 10s STEP 10s]\nFROM <{ONTOLOGY}>\nFROM <{DATA}>\nWHERE {where}"
    )


CASES = {
    "rdfs-constant-class": ("RDFS", "SELECT ?s WHERE { ?s a ex:A }"),
    "rdfs-variable-class": ("RDFS", "SELECT ?s ?c WHERE { ?s a ?c }"),
    "rdfs-constant-property": ("RDFS", "SELECT ?s ?o WHERE { ?s ex:p ?o }"),
    "rdfs-variable-predicate": ("RDFS", "SELECT ?s ?p ?o WHERE { ?s ?p ?o }"),
    "rdfs-class-hierarchy": ("RDFS", "SELECT ?c ?d WHERE { ?c rdfs:subClassOf ?d }"),
    "rdfs-property-hierarchy": ("RDFS", "SELECT ?q WHERE { ?q rdfs:subPropertyOf ex:p }"),
    "rdfs-path": ("RDFS", "SELECT ?s ?c WHERE { ?s a/rdfs:subClassOf* ?c }"),
    "rdfs-aggregate": ("RDFS", "SELECT ?c (COUNT(*) AS ?n) WHERE { ?s a ?c } GROUP BY ?c"),
    "rdfs-not-exists": ("RDFS", "SELECT ?s WHERE { ?s a ex:A FILTER NOT EXISTS { ?s a ex:D } }"),
    "rdfs-ask-constant": ("RDFS", "ASK WHERE { ex:s1 a ex:A }"),
    "sameas-constant-property": ("SAMEAS", "SELECT ?s ?o WHERE { ?s ex:p ?o }"),
    "sameas-links": ("SAMEAS", "SELECT ?a ?b WHERE { ?a owl:sameAs ?b }"),
    "sameas-constant-subject": ("SAMEAS", "SELECT ?p ?o WHERE { ex:y ?p ?o }"),
    "sameas-constant-object": ("SAMEAS", "SELECT ?s ?p WHERE { ?s ?p ex:x }"),
    "sameas-join": ("SAMEAS", "SELECT ?t ?n ?l WHERE { ?t ex:near ?n . ?n ex:label ?l }"),
    "both-property": ("RDFS, SAMEAS", "SELECT ?s ?o WHERE { ?s ex:p ?o }"),
    "both-class": ("SAMEAS, RDFS", "SELECT ?s WHERE { ?s a ex:A }"),
    "off": ("", "SELECT ?s ?c WHERE { ?s a ?c }"),
}


GRAPH_CASES = {
    "rdfs-in-graph-of-the-window": ("RDFS", "SELECT ?s ?c WHERE { GRAPH <%s> { ?s a ?c } }" % STREAM),
    "rdfs-in-graph-variable": ("RDFS", "SELECT ?g ?s ?o WHERE { GRAPH ?g { ?s ex:p ?o } }"),
    "sameas-in-graph-variable": ("SAMEAS", "SELECT ?g ?s ?o WHERE { GRAPH ?g { ?s ex:p ?o } }"),
}


def named_query(regimes: str, body: str) -> str:
    """The stream as a named graph only, the ontology in the default graph, the data as a named graph."""
    select, where = body.split(" WHERE ", 1)
    return (
        f"REGISTER QUERY EntailedGraphs ENTAILMENT {regimes} AS\n{PREFIXES}{select}\n"
        f"FROM NAMED STREAM <{STREAM}> [RANGE 10s STEP 10s]\nFROM <{ONTOLOGY}>\nFROM NAMED <{DATA}>\nWHERE {where}"
    )


@pytest.fixture(scope="module")
def reader(spark):
    return MemorySourceReader(
        spark, streams={STREAM: STREAM_TRIPLES}, graphs={ONTOLOGY: ONTOLOGY_TRIPLES, DATA: DATA_TRIPLES}, window_end=AT
    )


def independent(text: str, regimes: tuple[str, ...]):
    entail = (lambda triples: entailment.close(triples, regimes)) if regimes else None
    case = reference.Case("entailment", text, {STREAM: STREAM_TRIPLES}, {ONTOLOGY: ONTOLOGY_TRIPLES, DATA: DATA_TRIPLES}, AT, entail)
    return reference.evaluate(case)


@pytest.mark.parametrize("name", sorted(CASES))
def test_entailed_results_equal_forward_chaining_then_pyoxigraph(name, spark, reader):
    regimes, body = CASES[name]
    text = query(regimes, body)
    plan = compile_query(text)
    assert plan.entailment == tuple(r.strip().upper() for r in regimes.split(",") if r.strip())
    found = from_engine(evaluate_plan(spark, plan, reader, at=AT))
    truth = independent(text, plan.entailment)
    problems = compare(found, truth)
    assert not problems, f"{text}\n" + "\n".join(problems)


@pytest.mark.parametrize("name", sorted(GRAPH_CASES))
def test_patterns_in_named_graphs_are_entailed_with_the_ontology_of_the_default_graph(name, spark, reader):
    """Each named graph (a window, a static graph) is entailed on its own: its triples, and what they entail
    with the ontology (the static graphs of the default graph)."""
    regimes, body = GRAPH_CASES[name]
    text = named_query(regimes, body)
    plan = compile_query(text)
    found = from_engine(evaluate_plan(spark, plan, reader, at=AT))
    ontology = {tuple(reference.to_ox(t) for t in triple) for triple in ONTOLOGY_TRIPLES}
    closed_ontology = entailment.close(ontology, plan.entailment)

    def named(triples):
        closed = entailment.close(set(triples) | ontology, plan.entailment)
        return {t for t in closed if t in triples or t not in closed_ontology}

    case = reference.Case("graphs", text, {STREAM: STREAM_TRIPLES}, {ONTOLOGY: ONTOLOGY_TRIPLES, DATA: DATA_TRIPLES}, AT,
                          entail=lambda triples: entailment.close(triples, plan.entailment), entail_named=named)
    truth = reference.evaluate(case)
    assert truth.rows
    problems = compare(found, truth)
    assert not problems, f"{text}\n" + "\n".join(problems)


def test_entailment_changes_the_answers_of_these_queries(spark, reader):
    """The cases are not vacuous: with entailment switched off, the answers differ."""
    for name, (regimes, body) in CASES.items():
        if not regimes or "ask" in name:
            continue
        plain = independent(query("", body), ())
        entailed = independent(query(regimes, body), tuple(r.strip() for r in regimes.split(",")))
        assert sorted(map(str, plain.rows)) != sorted(map(str, entailed.rows)), name


def test_an_inferred_triple_keeps_the_timestamp_of_the_triple_it_is_inferred_from(spark, reader):
    text = query("RDFS", "SELECT ?s ?seen WHERE { ?s a ex:A BIND (timestamp(?s) AS ?seen) }")
    result = evaluate_plan(spark, compile_query(text), reader, at=AT)
    seen = {str(row[0]): (row[1].toPython() if row[1] is not None else None) for row in result.rows}
    assert set(seen) == {EX + "s1", EX + "s2", EX + "s9"}
    assert seen[EX + "s1"].timestamp() == 12 and seen[EX + "s2"].timestamp() == 13  # (s1 a C) at 12 s, (s2 kind D) at 13 s
    assert seen[EX + "s9"] is None  # from the static graph: no stream triple bound it


def test_a_source_holding_only_a_sub_property_still_answers_under_entailment(spark):
    """The optimizer's split keeps the stream for ``?s ex:p ?o`` although the stream holds only ex:r triples."""
    reader = MemorySourceReader(spark, streams={STREAM: [(u("s3"), u("r"), u("o1"), 14 * SECOND)]},
                                graphs={ONTOLOGY: ONTOLOGY_TRIPLES, DATA: []}, window_end=AT)
    statistics = SourceStatistics({STREAM: {u("r"): 1}, ONTOLOGY: {SUB_CLASS: 3, SUB_PROPERTY: 3, SAME_AS: 3}, DATA: {}})
    text = query("RDFS", "SELECT ?s ?o WHERE { ?s ex:p ?o . ?s ex:r ?o }")
    result = compile_plan(spark, compile_query(text), reader, at=AT, statistics=statistics).result()
    assert [tuple(map(str, row)) for row in result.rows] == [(EX + "s3", EX + "o1")]


def test_entailed_statistics_count_the_triples_of_sub_properties():
    statistics = SourceStatistics({STREAM: {u("r"): 2, u("q"): 1}, DATA: {u("p"): 5}})
    entailed = entailed_statistics(statistics, {u("p"): frozenset({u("q"), u("r")}), u("q"): frozenset({u("r")})})
    assert entailed.predicate_counts[STREAM] == {u("r"): 2, u("q"): 3, u("p"): 3}
    assert entailed.predicate_counts[DATA] == {u("p"): 5}
    assert entailed.can_match(alg_stream(), u("p")) and not statistics.can_match(alg_stream(), u("p"))


def alg_stream():
    from csparql.core.algebra.operators import StreamWindow
    from csparql.core.windows import LogicalWindow

    return StreamWindow(STREAM, LogicalWindow(10 * SECOND, 10 * SECOND))

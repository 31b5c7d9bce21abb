"""Property paths on Spark (``csparql.spark.paths``) against pyoxigraph on the same data.

Every query runs twice: through the engine (compile, optimise, Spark) and through pyoxigraph over the same
triples; the result multisets must be equal. The data has cycles, a self-loop, literals, two named graphs, and a
stream window that shares nodes with the static graph.

Closures run in one of two ways (``csparql.spark.paths``): small ones keep their bookkeeping on the driver, large
ones run every round as DataFrames. The data here is small, so the DataFrame rounds are tested by shrinking the
thresholds (``dataframe_rounds``), and the switch from one to the other mid-closure too (``switching``).
"""

from __future__ import annotations

import os
from collections import Counter

import pytest
from rdflib import BNode, Literal, URIRef

pyoxigraph = pytest.importorskip("pyoxigraph")

from csparql.engine.evaluate import evaluate_plan  # noqa: E402
from csparql.core.frontend import compile_query  # noqa: E402
from csparql.spark import paths  # noqa: E402
from csparql.spark.sources import MemorySourceReader  # noqa: E402

EX = "http://example.org/"
PREFIX = f"PREFIX : <{EX}>\n"
STREAM = URIRef(EX + "stream")
G1, G2 = URIRef(EX + "g1"), URIRef(EX + "g2")


def u(name: str) -> URIRef:
    return URIRef(EX + name)


def t(s: str, p: str, o) -> tuple:
    return (u(s), u(p), o if isinstance(o, Literal) else u(o))


DEFAULT = [
    t("a", "p", "b"), t("b", "p", "c"), t("c", "p", "d"), t("d", "p", "b"),  # a → b → c → d → b (a cycle)
    t("a", "q", "c"), t("a", "q", "b"), t("c", "q", "e"), t("e", "r", "a"),  # a p b and a q b: p|q links twice
    t("a", "r", "c"),  # a q c and a r c: one pair of !p
    t("b", "r", "f"), t("f", "p", "f"),  # a self-loop
    t("d", "s", Literal("lit")), t("e", "s", Literal(42)),
    t("x", "p", "y"), t("y", "q", "z"), t("w", "q", "x"),  # a separate component
]
NAMED = {
    G1: [t("a", "p", "b"), t("b", "p", "c"), t("c", "q", "a")],
    G2: [t("b", "p", "a"), t("b", "p", "c"), t("c", "p", "d"), t("d", "p", "c"), t("d", "p", "a"), t("d", "q", "a")],
}
SECOND = 1_000_000
WINDOW_END = 20 * SECOND  # RANGE 10s: the window holds 10s < τ ≤ 20s
STREAM_TRIPLES = [
    (*t("a", "p", "s1"), 5 * SECOND),  # before the window
    (*t("s1", "p", "s2"), 12 * SECOND),
    (*t("s2", "p", "s3"), 15 * SECOND),
    (*t("s2", "p", "s3"), 19 * SECOND),  # the same triple twice in the window: still one link
    (*t("s3", "p", "a"), 20 * SECOND),  # joins the static graph's a → b → c → d
    (*t("s3", "q", "s4"), 25 * SECOND),  # after the window
]
STATIC_WITH_STREAM = [t("a", "p", "b"), t("b", "p", "c")]


# --- harness -------------------------------------------------------------------------------------------------


def _ox(term):
    if isinstance(term, URIRef):
        return pyoxigraph.NamedNode(str(term))
    if isinstance(term, BNode):
        return pyoxigraph.BlankNode(str(term))
    if term.language:
        return pyoxigraph.Literal(str(term), language=term.language)
    if term.datatype is None:
        return pyoxigraph.Literal(str(term))
    return pyoxigraph.Literal(str(term), datatype=pyoxigraph.NamedNode(str(term.datatype)))


def _store(default, named=None):
    store = pyoxigraph.Store()
    for s, p, o in default:
        store.add(pyoxigraph.Quad(_ox(s), _ox(p), _ox(o), pyoxigraph.DefaultGraph()))
    for graph, triples in (named or {}).items():
        for s, p, o in triples:
            store.add(pyoxigraph.Quad(_ox(s), _ox(p), _ox(o), pyoxigraph.NamedNode(str(graph))))
    return store


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    from csparql.runtime.session import spark_session

    if SparkSession.getActiveSession() is not None:
        return spark_session("local[2]")
    # A short-lived test JVM spends much of its CPU in the C2 JIT compiler: C1 alone makes this file faster.
    previous = os.environ.get("JAVA_TOOL_OPTIONS")
    os.environ["JAVA_TOOL_OPTIONS"] = f"{previous or ''} -XX:TieredStopAtLevel=1".strip()
    try:
        return spark_session("local[2]")
    finally:
        if previous is None:
            del os.environ["JAVA_TOOL_OPTIONS"]
        else:
            os.environ["JAVA_TOOL_OPTIONS"] = previous


@pytest.fixture(scope="module")
def static(spark):
    reader = MemorySourceReader(spark, graphs={None: DEFAULT, **NAMED})
    return reader, _store(DEFAULT, NAMED)


def ours(spark, reader, text: str, at: int | None = None):
    result = evaluate_plan(spark, compile_query(text), reader, at=at)
    names = [str(var) for var in result.vars]
    rows = Counter(tuple(term.n3() if term is not None else None for term in row) for row in result.rows)
    return names, rows


def theirs(store, text: str, names: list[str]):
    solutions = store.query(text)
    assert {var.value for var in solutions.variables} == set(names)
    return Counter(tuple(str(s[n]) if s[n] is not None else None for n in names) for s in solutions)


def check(spark, reader, store, where: str, spec: str | None = None, select: str = "*", dataset: str = "") -> Counter:
    """Our results for ``where`` equal pyoxigraph's for the same query, or for ``spec`` (a whole query) where
    pyoxigraph departs from the spec's evaluation: pyoxigraph gives the pairs of ``p|q``, of a nested
    ``p/q`` and of ``!(p|^q)`` as sets, and pairs no constant outside the data with itself; ``spec`` spells the
    spec's translation (UNION, a join over a fresh variable, the constant bound with BIND) out in SPARQL."""
    text = f"{PREFIX}SELECT {select} {dataset} WHERE {{ {where} }}"
    names, rows = ours(spark, reader, text)
    expected = theirs(store, PREFIX + spec if spec else text, names)
    assert rows == expected, f"{where}\n ours:     {sorted(rows.items())}\n expected: {sorted(expected.items())}"
    return rows


# --- queries -------------------------------------------------------------------------------------------------

# The spec's NPS is a set of pairs; pyoxigraph gives one solution per triple at the top level.
DISTINCT_NPS = "{{ SELECT DISTINCT ?x ?y WHERE {{ ?x {} ?y }} }}"

OPERATORS = [
    # alternatives keep duplicates (a p b and a q b); inverse; ?, *, + with both ends variables
    ("?x (:p|:q) ?y", "SELECT ?x ?y WHERE { { ?x :p ?y } UNION { ?x :q ?y } }"),
    ("?x ^(:p|:r) ?y", "SELECT ?x ?y WHERE { { ?y :p ?x } UNION { ?y :r ?x } }"),
    ("?x :p? ?y", None),
    ("?x :p* ?y", None),
    ("?x :p+ ?y", None),
    # negated property sets: forward, inverse, both (f p f matches both ways: two solutions)
    ("?x !:p ?y", "SELECT DISTINCT ?x ?y WHERE { ?x !:p ?y }"),
    ("?x !^:p ?y", "SELECT DISTINCT ?x ?y WHERE { ?x !^:p ?y }"),
    ("?x !(:q|^:r) ?y", f"SELECT ?x ?y WHERE {{ {DISTINCT_NPS.format('!:q')} UNION {DISTINCT_NPS.format('^!:r')} }}"),
    (
        "?x !(^:p|^:q|:s) ?y",
        f"SELECT * WHERE {{ {DISTINCT_NPS.format('!:s')} UNION {DISTINCT_NPS.format('^!(:p|:q)')} }}",
    ),
]

CONSTANTS = [
    (":a :p* ?y", None),
    (":a :p+ ?y", None),
    (":a :p? ?y", None),
    ("?x :p+ :b", None),
    ("?x :p? :c", None),
    (":a :p+ :a", None),  # no cycle back to a: no solution
    (":b :p+ :b", None),  # a cycle
    (":e (:q|:r)+ ?y", None),
    ('?x :s* "lit"', None),
    ("?x (:s|:p)+ 42", None),
    # zero-length: a constant not in the data is paired with itself (§18.4, ALP and ZeroLengthPath)
    (":zz :p* ?y", "SELECT DISTINCT ?y WHERE { { BIND(:zz AS ?y) } UNION { :zz :p+ ?y } }"),
    ("?x :p* :zz", "SELECT DISTINCT ?x WHERE { { BIND(:zz AS ?x) } UNION { ?x :p+ :zz } }"),
    (":zz :p* :zz", "SELECT * WHERE { }"),
    # both ends constants on a multiset path: two links give two solutions
    (":a (:p|:q) :b", "SELECT * WHERE { { :a :p :b } UNION { :a :q :b } }"),
]

SAME_VARIABLE = [
    ("?x :p* ?x", None),
    ("?x :p+ ?x", None),
    ("?x :p? ?x", None),
    ("?x (:p|:q) ?x", "SELECT ?x WHERE { { ?x :p ?x } UNION { ?x :q ?x } }"),
]

NESTED = [
    ("?x (:p/:q)* ?y", None),
    (":a (:p/:q)+ ?y", None),
    ("?x ^(:p|:q)+ :a", None),
    ("?x (!(:p|^:q))+ ?y", None),
    (":a (!(:p|^:r))* ?y", None),
    # nested sequences keep multiplicities (a q b, a q c, and b, c reach each other by p*)
    ("?x ((:p*/:q)|:r) ?y", "SELECT ?x ?y WHERE { { ?x :p* ?v . ?v :q ?y } UNION { ?x :r ?y } }"),
    ("?x ((:q/:p*)|:r) ?y", "SELECT ?x ?y WHERE { { ?x :q ?v . ?v :p* ?y } UNION { ?x :r ?y } }"),
    ("?x (:p?/:q)* ?y", None),
    # the translation splits a top-level sequence: triples joined with a path pattern
    ("?x :p/(:q|:p)* ?y", "SELECT ?x ?y WHERE { ?x :p ?v . ?v (:q|:p)* ?y }"),
]

BLANK_NODES = [
    ("?y", "_:s :p+ ?y", None),
    ("?x", "?x :p* []", None),
    ("?y", "_:s (:p|:q) ?y", "SELECT ?y WHERE { { ?s :p ?y } UNION { ?s :q ?y } }"),
]

IN_GRAPHS = [
    ("?x :p+ ?y", None),
    ("?x (:p|:q) ?y", "SELECT * WHERE { GRAPH ?g { { ?x :p ?y } UNION { ?x :q ?y } } }"),
    (":a :p* ?y", None),
    (":zz :p* ?y", "SELECT DISTINCT ?g ?y WHERE { GRAPH ?g { { BIND(:zz AS ?y) } UNION { :zz :p+ ?y } } }"),
    ("?x (:p|:q)* :a", None),
    ("?x :p+ ?x", None),
    (
        "?x !(:p|^:q) ?y",
        "SELECT * WHERE { { SELECT DISTINCT ?g ?x ?y WHERE { GRAPH ?g { ?x !:p ?y } } }"
        " UNION { SELECT DISTINCT ?g ?x ?y WHERE { GRAPH ?g { ?x ^!:q ?y } } } }",
    ),
    ("?x ((:p*/:q)|:r) ?y", "SELECT ?g ?x ?y WHERE { GRAPH ?g { { ?x :p* ?v . ?v :q ?y } UNION { ?x :r ?y } } }"),
]

# Closures again, with every round as DataFrames (and start nodes matched by a broadcast join).
DATAFRAME_ROUNDS = [
    ("?x :p+ ?y", None),
    (":a :p* ?y", None),
    ("?x :p* :zz", "SELECT DISTINCT ?x WHERE { { BIND(:zz AS ?x) } UNION { ?x :p+ :zz } }"),
    ("?x (:p?/:q)* ?y", None),
    ("?x ((:q/:p*)|:r) ?y", "SELECT ?x ?y WHERE { { ?x :q ?v . ?v :p* ?y } UNION { ?x :r ?y } }"),
    ("GRAPH ?g { :a :p* ?y }", None),
    ("GRAPH ?g { ?x :p+ ?x }", None),
]

# Closures that start on the driver and go on as DataFrames once they pass three pairs.
SWITCHING = [
    (":a (:p|:q|:r)* ?y", None),
    ("?x (:p/:q)* ?y", None),
    ("GRAPH ?g { ?x :p* :a }", None),
]


@pytest.fixture
def dataframe_rounds(monkeypatch):
    monkeypatch.setattr(paths, "LOCAL_PAIRS", 0)
    monkeypatch.setattr(paths, "NODE_LITERALS", 0)
    monkeypatch.setattr(paths, "MAX_PIECES", 2)  # compact the reached pairs often


@pytest.fixture
def switching(monkeypatch):
    monkeypatch.setattr(paths, "LOCAL_PAIRS", 3)
    monkeypatch.setattr(paths, "NODE_LITERALS", 1)


@pytest.mark.parametrize("where,spec", OPERATORS)
def test_operator(spark, static, where, spec):
    check(spark, *static, where, spec)


@pytest.mark.parametrize("where,spec", CONSTANTS)
def test_constant_end(spark, static, where, spec):
    check(spark, *static, where, spec)


@pytest.mark.parametrize("where,spec", SAME_VARIABLE)
def test_same_variable_at_both_ends(spark, static, where, spec):
    check(spark, *static, where, spec)


@pytest.mark.parametrize("where,spec", NESTED)
def test_nested(spark, static, where, spec):
    check(spark, *static, where, spec)


@pytest.mark.parametrize("select,where,spec", BLANK_NODES)
def test_blank_node_ends(spark, static, select, where, spec):
    check(spark, *static, where, spec, select)


@pytest.mark.parametrize("where,spec", IN_GRAPHS)
def test_in_named_graphs(spark, static, where, spec):
    assert check(spark, *static, f"GRAPH ?g {{ {where} }}", spec)


@pytest.mark.parametrize("where,spec", DATAFRAME_ROUNDS)
def test_dataframe_rounds(spark, static, dataframe_rounds, where, spec):
    check(spark, *static, where, spec)


@pytest.mark.parametrize("where,spec", SWITCHING)
def test_switching_to_dataframe_rounds(spark, static, switching, where, spec):
    check(spark, *static, where, spec)


def test_graph_inside_a_join(spark, static):
    check(spark, *static, "?x :q ?y . GRAPH ?g { ?y :p+ ?z }")


def test_from_graphs_merge(spark, static):
    # FROM <g1> FROM <g2>: the default graph is the RDF merge of g1 and g2, where b p c (in both) is one triple.
    reader, _ = static
    merged = _store(sorted(set(NAMED[G1]) | set(NAMED[G2])))
    dataset = f"FROM <{G1}> FROM <{G2}>"
    cases = [
        ("?x (:p|:q) ?y", "SELECT * WHERE { { ?x :p ?y } UNION { ?x :q ?y } }"),
        (":a (:p|:q)* ?y", None),
    ]
    for where, spec in cases:
        names, rows = ours(spark, reader, f"{PREFIX}SELECT * {dataset} WHERE {{ {where} }}")
        assert rows == theirs(merged, PREFIX + (spec or f"SELECT * WHERE {{ {where} }}"), names), where


def test_graph_by_iri(spark, static):
    # GRAPH <iri> reads that graph alone (not in graph mode); a graph the dataset lacks has no nodes at all.
    dataset = f"FROM NAMED <{G1}> FROM NAMED <{G2}>"
    check(spark, *static, f"GRAPH <{G2}> {{ ?x :p* :c }}", dataset=dataset)
    assert not check(spark, *static, f"GRAPH <{EX}nothing> {{ :zz :p* ?y }}", dataset=dataset)


def test_path_over_stream_window(spark):
    reader = MemorySourceReader(
        spark, streams={STREAM: STREAM_TRIPLES}, graphs={None: STATIC_WITH_STREAM}, window_end=WINDOW_END
    )
    in_window = [(s, p, o) for s, p, o, tau in STREAM_TRIPLES if WINDOW_END - 10 * SECOND < tau <= WINDOW_END]
    store = _store(in_window + STATIC_WITH_STREAM)
    for where in ["?x :p+ ?y", "?x :p* :a", "?x (:p|:q) ?y"]:
        registered = (
            f"REGISTER QUERY paths AS {PREFIX}SELECT * FROM STREAM <{STREAM}> [RANGE 10s STEP 5s] WHERE {{ {where} }}"
        )
        names, rows = ours(spark, reader, registered, at=WINDOW_END)
        expected = theirs(store, f"{PREFIX}SELECT * WHERE {{ {where} }}", names)
        assert rows == expected, where


CHAIN = [t(f"n{i}", "p", f"n{i + 1}") for i in range(8)]
CYCLE = [t(f"m{i}", "p", f"m{(i + 1) % 40}") for i in range(40)]


@pytest.mark.parametrize("rounds", ["driver", "dataframes"])
def test_closure_from_a_bound_end_walks_only_what_it_reaches(spark, monkeypatch, rounds):
    # A chain of 8 links from :n0, and a larger component (a 40-node cycle) that the walk must never touch.
    reader = MemorySourceReader(spark, graphs={None: CHAIN + CYCLE})
    store = _store(CHAIN + CYCLE)
    seen: list[list[str]] = []
    if rounds == "driver":
        collect = paths.PathEvaluator._collect

        def recording(self, frame):
            pairs = collect(self, frame)
            seen.append([b[1] for _, b, _ in pairs])
            return pairs

        monkeypatch.setattr(paths.PathEvaluator, "_collect", recording)
    else:
        monkeypatch.setattr(paths, "LOCAL_PAIRS", 0)
        materialise = paths.PathEvaluator._materialise

        def recording(self, frame):
            frame, size = materialise(self, frame)
            seen.append([row.b.value for row in frame.collect()])
            return frame, size

        monkeypatch.setattr(paths.PathEvaluator, "_materialise", recording)
    for where in [":n0 :p+ ?y", "?x :p* :n8"]:
        seen.clear()
        rows = check(spark, reader, store, where)
        assert len(rows) == 8 + where.count("*")
        # One node per round (the first step, then seven more), and a last round that finds nothing new.
        assert [len(nodes) for nodes in seen] == [1] * 8 + [0]
        assert all(node.startswith(EX + "n") for nodes in seen for node in nodes)

"""Property paths on Spark (``csparql.spark.paths``) against pyoxigraph on the same data.

Every query runs twice: through the engine (compile, optimise, Spark) and through pyoxigraph over the same
triples; the result multisets must be equal. The data has cycles, a self-loop, literals, a node reachable from
the rest only backwards, two named graphs, and a stream window that shares nodes with the static graph.
"""

from __future__ import annotations

from collections import Counter

import pytest
from rdflib import BNode, Literal, URIRef

pyoxigraph = pytest.importorskip("pyoxigraph")

from csparql.compiler import compile_query  # noqa: E402
from csparql.engine.evaluate import evaluate_plan  # noqa: E402
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
    t("b", "r", "f"), t("f", "p", "f"),  # a self-loop
    t("d", "s", Literal("lit")), t("e", "s", Literal(42)),
    t("x", "p", "y"), t("y", "q", "z"), t("w", "q", "x"),  # a separate component
]
NAMED = {
    G1: [t("a", "p", "b"), t("b", "p", "c"), t("c", "q", "a")],
    G2: [t("b", "p", "a"), t("b", "p", "c"), t("c", "p", "d"), t("d", "p", "c"), t("d", "q", "a")],
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
    from csparql.spark.session import spark_session

    return spark_session("local[2]")


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


def check(spark, reader, store, where: str, select: str = "*", dataset: str = "") -> Counter:
    text = f"{PREFIX}SELECT {select} {dataset} WHERE {{ {where} }}"
    names, rows = ours(spark, reader, text)
    expected = theirs(store, text, names)
    assert rows == expected, f"{where}\n ours:     {sorted(rows.items())}\n expected: {sorted(expected.items())}"
    return rows


# --- queries -------------------------------------------------------------------------------------------------

OPERATORS = [
    # alternatives keep duplicates; inverse; ?, *, + with both ends variables
    "?x (:p|:q) ?y",
    "?x (:p|:q|:p) ?y",
    "?x ^(:p|:r) ?y",
    "?x :p? ?y",
    "?x :p* ?y",
    "?x :p+ ?y",
    # negated property sets: forward, inverse, both (a triple can match both ways)
    "?x !:p ?y",
    "?x !^:p ?y",
    "?x !(:p|^:q) ?y",
    "?x !(^:p|^:q|:s) ?y",
]

CONSTANTS = [
    ":a :p* ?y",
    ":a :p+ ?y",
    ":a :p? ?y",
    "?x :p* :b",
    "?x :p+ :b",
    "?x :p? :c",
    ":a :p+ :d",
    ":a :p+ :a",  # no cycle back to a: no solution
    ":b :p+ :b",  # a cycle
    ":a :p* :a",
    ":e (:q|:r)+ ?y",
    # zero-length: a constant not in the data is paired with itself
    ":zz :p* ?y",
    ":zz :p? ?y",
    "?x :p* :zz",
    ":zz :p* :zz",
    ":zz :p+ ?y",
    "?x :s* \"lit\"",
    "\"lit\" :p* ?y",
    "?x (:s|:p)+ 42",
    # both ends constants on a multiset path: two links give two solutions
    ":a (:p|:q) :b",
]

SAME_VARIABLE = [
    "?x :p* ?x",
    "?x :p+ ?x",
    "?x (:p|:q)+ ?x",
    "?x (:p|:q) ?x",
    "?x :p? ?x",
]

NESTED = [
    "?x (:p/:q)* ?y",
    ":a (:p/:q)+ ?y",
    "?x (:p/:p)+ ?y",
    "?x ^(:p|:q)+ ?y",
    ":a ^(:p|:q)+ ?y",
    "?x ^(:p|:q)+ :a",
    "?x (!(:p|^:q))+ ?y",
    ":a (!(:p|^:r))* ?y",
    "?x ((:p*/:q)|:r) ?y",  # a sequence walked from its cheap end
    "?x ((:q/:p*)|:r) ?y",
    ":a ((:p*/:q)|:r) ?y",
    "?x ((:p*/:q)|:r) :e",
    "?x (:p?/:q)* ?y",
    "?x ((:p|:q)*/:r/^:r) ?y",
    ":w (:q/:p?)+ ?y",
    "?x (^:q/:p*)? ?y",
    "?x ((:p/:q)|(:q/:r))+ ?y",
    ":a (:p/^:p)* ?y",
    "?x :p/(:q|:p)* ?y",  # the translation splits the sequence: a triple joined with a closure
]

BLANK_NODES = [
    ("?y", "_:s :p+ ?y"),
    ("?x", "?x :p* []"),
    ("?y", "_:s (:p|:q) ?y"),
]

IN_GRAPHS = [
    "?x :p+ ?y",
    "?x (:p|:q) ?y",
    ":a :p* ?y",
    ":zz :p* ?y",
    "?x :p* :a",
    "?x (:p|:q)* :a",
    "?x :p* ?x",
    "?x :p+ ?x",
    "?x !(:p|^:q) ?y",
    "?x ((:p*/:q)|:r) ?y",
    "?x (:p/:q)* ?y",
]


@pytest.mark.parametrize("where", OPERATORS)
def test_operator(spark, static, where):
    check(spark, *static, where)


@pytest.mark.parametrize("where", CONSTANTS)
def test_constant_end(spark, static, where):
    check(spark, *static, where)


@pytest.mark.parametrize("where", SAME_VARIABLE)
def test_same_variable_at_both_ends(spark, static, where):
    check(spark, *static, where)


@pytest.mark.parametrize("where", NESTED)
def test_nested(spark, static, where):
    check(spark, *static, where)


@pytest.mark.parametrize("select,where", BLANK_NODES)
def test_blank_node_ends(spark, static, select, where):
    check(spark, *static, where, select)


@pytest.mark.parametrize("where", IN_GRAPHS)
def test_in_named_graphs(spark, static, where):
    rows = check(spark, *static, f"GRAPH ?g {{ {where} }}")
    assert rows


def test_graph_with_outer_join(spark, static):
    check(spark, *static, "?x :q ?y . GRAPH ?g { ?y :p+ ?z }")


def test_from_graphs_merge(spark, static):
    # The default graph is the merge of g1 and g2: b p c is in both and still one link.
    check(spark, *static, "?x (:p|:q) ?y", dataset=f"FROM <{G1}> FROM <{G2}>")
    check(spark, *static, "?x :p+ ?y", dataset=f"FROM <{G1}> FROM <{G2}>")


def test_constant_in_every_named_graph(spark, static):
    reader, _ = static
    _, rows = ours(spark, reader, f"{PREFIX}SELECT * WHERE {{ GRAPH ?g {{ :zz :p* ?y }} }}")
    assert rows == Counter({(f"<{EX}zz>", f"<{G1}>"): 1, (f"<{EX}zz>", f"<{G2}>"): 1})


def test_path_over_stream_window(spark):
    reader = MemorySourceReader(
        spark, streams={STREAM: STREAM_TRIPLES}, graphs={None: STATIC_WITH_STREAM}, window_end=WINDOW_END
    )
    in_window = [(s, p, o) for s, p, o, tau in STREAM_TRIPLES if WINDOW_END - 10 * SECOND < tau <= WINDOW_END]
    store = _store(in_window + STATIC_WITH_STREAM)
    for where in ["?x :p+ ?y", ":s1 :p* ?y", "?x :p* :a", "?x (:p|:q) ?y", "?x :p+ ?x"]:
        registered = (
            f"REGISTER QUERY paths AS {PREFIX}SELECT * FROM STREAM <{STREAM}> [RANGE 10s STEP 5s] WHERE {{ {where} }}"
        )
        names, rows = ours(spark, reader, registered, at=WINDOW_END)
        expected = theirs(store, f"{PREFIX}SELECT * WHERE {{ {where} }}", names)
        assert rows == expected, where


def test_long_chain_from_bound_end_walks_only_what_it_reaches(spark, monkeypatch):
    # A chain of 12 links reachable from :n0, and a larger component (a 40-node cycle) that is not.
    chain = [t(f"n{i}", "p", f"n{i + 1}") for i in range(12)]
    other = [t(f"m{i}", "p", f"m{(i + 1) % 40}") for i in range(40)]
    reader = MemorySourceReader(spark, graphs={None: chain + other})
    store = _store(chain + other)
    sizes: list[int] = []
    materialise = paths._PathEvaluator._materialise

    def recording(self, frame):
        frame, size = materialise(self, frame)
        sizes.append(size)
        return frame, size

    monkeypatch.setattr(paths._PathEvaluator, "_materialise", recording)
    rows = check(spark, reader, store, ":n0 :p+ ?y")
    assert len(rows) == 12
    assert sum(sizes) == 12  # one new node per round, nothing of the cycle
    sizes.clear()
    check(spark, reader, store, "?x :p* :n12")
    assert sum(sizes) == 12

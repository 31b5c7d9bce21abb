"""ISTREAM and DSTREAM: each evaluation emits what entered (left) the result since the previous evaluation of
the query's schedule, as multisets; a window's result does not depend on which windows were evaluated before it
or in which order. Checked over Delta against the independent evaluator's results for the two windows."""

from __future__ import annotations

from collections import Counter

import pytest
from rdflib import URIRef

from conformance import reference
from conformance.compare import Results, compare, from_engine
from csparql.ingest.ingest import ingest_stream
from csparql.engine.runner import Engine
from csparql.storage.stored import StoredResults
from csparql.core.frontend import compile_query
from csparql.core.schedule import evaluation_at, previous_evaluation
from csparql.storage.warehouse import Warehouse

EX = "http://example.org/"
STREAM = EX + "seen"
MINUTE = 60_000_000
T0 = 1_600_000_200_000_000 - 1_600_000_200_000_000 % (60 * MINUTE)
SEEN = [("a", "x", 2), ("b", "x", 4), ("a", "y", 7), ("c", "x", 12), ("b", "z", 14), ("b", "w", 15), ("d", "x", 22)]
ENDS = [T0 + m * MINUTE for m in (5, 10, 15, 20, 25, 30, 35)]


def query(operator: str, distinct: str = "") -> str:
    return f"""REGISTER QUERY Changes{operator.title()} COMPUTED EVERY 5m AS
PREFIX ex: <{EX}>
SELECT {operator} {distinct} ?who
FROM STREAM <{STREAM}> [RANGE 10m STEP 5m]
WHERE {{ ?who ex:seen ?what }}
"""


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("changes")
    lines = "".join(
        f'<{EX}{s}> <{EX}seen> <{EX}{o}> "{(T0 + m * MINUTE) // 1000}"^^<http://www.w3.org/2001/XMLSchema#long> .\n'
        for s, o, m in SEEN
    )
    (root / "seen.nq").write_text(lines, encoding="utf-8")
    warehouse = Warehouse(root / "warehouse")
    ingest_stream(spark, warehouse, STREAM, [root / "seen.nq"])
    return warehouse


def expected(text: str, operator: str, at: int) -> Results:
    stream = {URIRef(STREAM): [(URIRef(EX + s), URIRef(EX + "seen"), URIRef(EX + o), T0 + m * MINUTE) for s, o, m in SEEN]}
    now = reference.evaluate(reference.Case("now", text, stream, {}, at))
    before = reference.evaluate(reference.Case("before", text, stream, {}, at - 5 * MINUTE))
    difference = Counter(now.rows) - Counter(before.rows) if operator == "ISTREAM" else Counter(before.rows) - Counter(now.rows)
    return Results("select", now.vars, list(difference.elements()))


@pytest.mark.parametrize("operator,distinct", [("ISTREAM", ""), ("DSTREAM", ""), ("ISTREAM", "DISTINCT"), ("DSTREAM", "DISTINCT")])
def test_each_window_emits_the_difference_with_the_previous_one_in_any_order(operator, distinct, spark, warehouse):
    text = query(operator, distinct)
    plan = compile_query(text)
    engine = Engine(warehouse, spark)
    forward = {at: from_engine(engine.evaluate(plan, at, plan.registration.name).result) for at in ENDS}
    backward = {at: from_engine(Engine(warehouse, spark).evaluate(plan, at, plan.registration.name).result)
                for at in reversed(ENDS)}
    emitted = 0
    for at in ENDS:
        truth = expected(text, operator, at)
        assert not compare(forward[at], truth), (at, forward[at].describe(), truth.describe())
        assert not compare(backward[at], forward[at])
        emitted += len(truth.rows)
    assert emitted > 0
    # the result table holds each window's difference once (the backward pass replaced the forward one's); a
    # window that emitted nothing has no rows there
    stored = {end: from_engine(result) for _, end, result in StoredResults(warehouse, plan.registration.name).windows()}
    assert sorted(stored) == [at for at in ENDS if forward[at].rows]
    for at, result in stored.items():
        assert not compare(result, forward[at]), at


def test_a_solution_seen_twice_now_and_once_before_is_new_once(spark, warehouse):
    """Multiset difference: in (5m, 15m] b is seen twice (z at 14, w at 15); in (0m, 10m] once (x at 4)."""
    plan = compile_query(query("ISTREAM"))
    result = Engine(warehouse, spark).evaluate(plan, T0 + 15 * MINUTE, "ChangesIstream").result
    assert Counter(str(row[0]) for row in result.rows) == Counter({EX + "b": 1, EX + "c": 1})


def test_the_previous_evaluation_is_the_previous_window_of_the_schedule():
    sliding = compile_query(f"SELECT ?s FROM STREAM <{STREAM}> [RANGE 1h STEP 10m] WHERE {{ ?s ?p ?o }}")
    now = evaluation_at(sliding, T0 + 70 * MINUTE)
    assert previous_evaluation(sliding, now).end == T0 + 60 * MINUTE
    # COMPUTED EVERY shorter than STEP: the evaluations at 7 and 9 minutes both read the window ending at 5;
    # the one before it is the window ending at 0, whichever instant the evaluation was made at
    often = compile_query(
        f"REGISTER QUERY Often COMPUTED EVERY 1m AS SELECT ?s FROM STREAM <{STREAM}> [RANGE 10m STEP 5m] WHERE {{ ?s ?p ?o }}"
    )
    for minute in (5, 7, 9):
        evaluation = evaluation_at(often, T0 + minute * MINUTE)
        assert evaluation.end == T0 + 5 * MINUTE
        assert previous_evaluation(often, evaluation).end == T0
    physical = compile_query(
        f"REGISTER QUERY Latest COMPUTED EVERY 2m AS SELECT ?s FROM STREAM <{STREAM}> [TRIPLES 3] WHERE {{ ?s ?p ?o }}"
    )
    assert previous_evaluation(physical, evaluation_at(physical, T0 + 6 * MINUTE)).end == T0 + 4 * MINUTE

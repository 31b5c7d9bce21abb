"""Windows evaluated together (``csparql.engine.together``): the compiled plans of several queries' windows run
as one Spark job, each window still its own evaluation — its result equal to the independent evaluator's over
the same window, its own result rows and runs row — also when the combined job fails (each window then runs
alone), and with the windows whose plans cannot be combined (ordered, ASK) run alone beside them."""

from __future__ import annotations

import logging

import pytest
from rdflib import URIRef

from conformance import reference
from conformance.compare import compare, from_engine
from csparql.core.frontend import compile_query
from csparql.engine import together
from csparql.engine.runner import Engine
from csparql.engine.together import Stepped, evaluate_together
from csparql.ingest.ingest import ingest_stream
from csparql.storage.statistics import read_table
from csparql.storage.stored import StoredResults
from csparql.storage.warehouse import Warehouse

EX = "http://example.org/"
STREAM = EX + "seen"
MINUTE = 60_000_000
T0 = 1_600_000_200_000_000 - 1_600_000_200_000_000 % (60 * MINUTE)
SEEN = [("a", "x", 2), ("b", "x", 4), ("a", "y", 7), ("c", "x", 12), ("b", "z", 14), ("b", "w", 15), ("d", "x", 22),
        ("a", "x", 23), ("c", "c", 24)]
AT = T0 + 25 * MINUTE
PREFIX = f"PREFIX ex: <{EX}>\n"
WINDOW = f"FROM STREAM <{STREAM}> [RANGE 15m STEP 5m]"

QUERIES = {
    # combinable: one job
    "Who": f"SELECT ?who ?what {WINDOW} WHERE {{ ?who ex:seen ?what }}",
    "Optional": f"SELECT ?who ?again {WINDOW} WHERE {{ ?who ex:seen ex:x OPTIONAL {{ ?who ex:seen ?again "
                f"FILTER(?again != ex:x) }} }}",
    "NoVariables": f"SELECT * {WINDOW} WHERE {{ ex:a ex:seen ex:x }}",
    "Counted": f"SELECT ?what (COUNT(?who) AS ?n) {WINDOW} WHERE {{ ?who ex:seen ?what }} GROUP BY ?what",
    "Nothing": f"SELECT ?who {WINDOW} WHERE {{ ?who ex:seen ex:nobody }}",
    "Built": f"CONSTRUCT {{ ?what ex:seenBy ?who }} {WINDOW} WHERE {{ ?who ex:seen ?what }}",
    "Entered": f"SELECT ISTREAM ?who {WINDOW} WHERE {{ ?who ex:seen ?what }}",
    # not combinable: alone
    "Ordered": f"SELECT ?who ?what {WINDOW} WHERE {{ ?who ex:seen ?what }} ORDER BY DESC(?what) ?who",
    "Asked": f"ASK {WINDOW} WHERE {{ ex:d ex:seen ex:x }}",
}
COMBINED = 7


def text(name: str) -> str:
    return f"REGISTER QUERY {name} COMPUTED EVERY 5m AS\n{PREFIX}{QUERIES[name]}\n"


@pytest.fixture(scope="module")
def warehouse(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("together")
    lines = "".join(
        f'<{EX}{s}> <{EX}seen> <{EX}{o}> "{(T0 + m * MINUTE) // 1000}"^^<http://www.w3.org/2001/XMLSchema#long> .\n'
        for s, o, m in SEEN)
    (root / "seen.nq").write_text(lines, encoding="utf-8")
    warehouse = Warehouse(root / "warehouse")
    ingest_stream(spark, warehouse, STREAM, [root / "seen.nq"])
    return warehouse


def truth(name: str, at: int):
    stream = {URIRef(STREAM): [(URIRef(EX + s), URIRef(EX + "seen"), URIRef(EX + o), T0 + m * MINUTE)
                               for s, o, m in SEEN]}
    if name == "Entered":  # what entered since the previous evaluation, as a multiset
        from collections import Counter

        from conformance.compare import Results

        now = reference.evaluate(reference.Case("now", text(name), stream, {}, at))
        before = reference.evaluate(reference.Case("before", text(name), stream, {}, at - 5 * MINUTE))
        return Results("select", now.vars, list((Counter(now.rows) - Counter(before.rows)).elements()))
    return reference.evaluate(reference.Case(name, text(name), stream, {}, at))


def evaluated_together(engine: Engine, suffix: str, at: int = AT) -> dict:
    plans = {name: compile_query(text(name)) for name in QUERIES}
    evaluations = {name: Stepped(engine.evaluation_steps(plan, at, name + suffix)) for name, plan in plans.items()}
    finished = []
    evaluate_together(list(evaluations.values()), finished.append)
    assert sorted(map(id, finished)) == sorted(map(id, evaluations.values()))  # each reported once
    for name, evaluation in evaluations.items():
        assert evaluation.error is None, (name, evaluation.error)
    return {name: evaluation.value for name, evaluation in evaluations.items()}


def check(warehouse: Warehouse, evaluations: dict, suffix: str, at: int = AT) -> None:
    for name, evaluation in evaluations.items():
        expected = truth(name, at)
        ordered = [("what", True), ("who", False)] if name == "Ordered" else None
        differences = compare(from_engine(evaluation.result), expected, ordered_by=ordered,
                              any_var_order=name == "NoVariables")
        assert not differences, (name, differences)
        if name != "Asked":
            stored = {end: from_engine(result) for _, end, result in StoredResults(warehouse, name + suffix).windows()}
            if expected.rows or expected.triples:
                assert not compare(stored[evaluation.window.end], expected, any_var_order=name == "NoVariables")
    runs = read_table(warehouse.runs).to_pylist()
    for name, evaluation in evaluations.items():
        mine = [run for run in runs if run["query"] == name + suffix]
        assert [(run["run_id"], run["status"]) for run in mine] == [(evaluation.run_id, "succeeded")], name


def test_windows_evaluated_together_run_their_combinable_plans_as_one_job_each_as_pyoxigraph_answers_it(
        spark, warehouse, caplog):
    with caplog.at_level(logging.INFO, logger="csparql.engine.together"):
        evaluations = evaluated_together(Engine(warehouse, spark), "_together")
    assert [r.getMessage().split(" in ")[0] for r in caplog.records if "one Spark job" in r.getMessage()] == [
        f"{COMBINED} windows evaluated"]
    assert sum(1 for e in evaluations.values() if e.result.form == "select" and e.result.rows) >= 5
    assert from_engine(evaluations["NoVariables"].result).rows == [()]  # a solution without variables
    assert any(None in row for row in from_engine(evaluations["Optional"].result).rows)  # unbound kept
    check(warehouse, evaluations, "_together")


def test_a_combined_job_that_fails_leaves_each_window_evaluated_alone_and_right(spark, warehouse, monkeypatch, caplog):
    def failing(compiled):
        raise RuntimeError("the combined job was lost")

    monkeypatch.setattr(together, "results_together", failing)
    with caplog.at_level(logging.WARNING, logger="csparql.engine.together"):
        evaluations = evaluated_together(Engine(warehouse, spark), "_fallback")
    assert any("each is evaluated alone: the combined job was lost" in r.getMessage() for r in caplog.records)
    check(warehouse, evaluations, "_fallback")


def test_a_window_failing_before_its_spark_part_fails_alone_and_the_others_are_evaluated(spark, warehouse):
    engine = Engine(warehouse, spark)
    good = Stepped(engine.evaluation_steps(compile_query(text("Who")), AT, "Who_beside"))
    bad = Stepped(engine.evaluation_steps(compile_query(text("Counted")), AT, "not a name"))
    other = Stepped(engine.evaluation_steps(compile_query(text("Built")), AT, "Built_beside"))
    evaluate_together([good, bad, other])
    assert bad.error is not None and "not a name" in str(bad.error)
    check(warehouse, {"Who": good.value}, "_beside")
    check(warehouse, {"Built": other.value}, "_beside")

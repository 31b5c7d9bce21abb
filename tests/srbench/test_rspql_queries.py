"""The RSP-QL forms of the SRBench queries (``examples/rspql/srbench``), evaluated by the engine over the generated
SRBench data in Delta, window by window: each equals the independent evaluator on its own text and gives the
results of the C-SPARQL query it comes from, in the windows ``test_queries.WINDOWS`` picks (some with answers,
some without)."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from conformance import reference
from conformance.compare import Results, compare, from_engine
from csparql.core.frontend import compile_query, parse_query
from csparql.core.language import syntax as sx
from csparql.core.language.rspql_printer import format_rspql
from csparql.srbench.vocabulary import OBSERVATIONS
from srbench.test_queries import QUERIES, instants, size
from support import ROOT

RSPQL_QUERIES = {int(re.match(r"q(\d+)-", path.name).group(1)): path
                 for path in sorted((ROOT / "examples" / "rspql" / "srbench").glob("q*.rq"))}
NOT_EXPRESSIBLE = {2, 3, 5, 11, 15, 16, 17}  # ENTAILMENT or AGGREGATE clauses: examples/rspql/README.md


def reference_result(text: str, data, graphs, at: int) -> Results:
    """The independent evaluator's result of a query (without entailment) for the window ending at ``at``;
    ISTREAM and DSTREAM as multiset differences with the window one STEP earlier."""
    query = parse_query(text)

    def evaluate(instant: int) -> Results:
        return reference.evaluate(reference.Case(text[:40], text, {OBSERVATIONS: data.stream}, graphs, instant))

    result = evaluate(at)
    operator = getattr(query.form, "stream_operator", None)
    if operator in ("ISTREAM", "DSTREAM"):
        window = query.streams[0].window
        assert isinstance(window, sx.LogicalWindowSpec)
        before = evaluate(at - window.step.micros)
        now, then = Counter(result.rows), Counter(before.rows)
        rows = now - then if operator == "ISTREAM" else then - now
        result = Results("select", result.vars, list(rows.elements()))
    return result


def test_every_srbench_query_has_an_rspql_form_or_a_reason():
    assert sorted(set(RSPQL_QUERIES) | NOT_EXPRESSIBLE) == sorted(QUERIES)
    assert not set(RSPQL_QUERIES) & NOT_EXPRESSIBLE


@pytest.mark.parametrize("number", sorted(RSPQL_QUERIES), ids=lambda n: f"q{n:02d}")
def test_rspql_srbench_query_gives_the_results_of_the_csparql_one(number, workload, engine):
    loaded, warehouse, graphs = workload
    path = RSPQL_QUERIES[number]
    text = path.read_text(encoding="utf-8")
    original = QUERIES[number].read_text(encoding="utf-8")
    query = parse_query(text, path.name)
    assert parse_query(format_rspql(query)) == query
    plan = compile_query(text, path.name)
    assert plan.registration.name == compile_query(original).registration.name
    with_answers, without = instants(number, loaded.data)
    problems = []
    for at in with_answers + without:
        truth = reference_result(text, loaded.data, graphs, at)
        assert (size(truth) > 0) == (at in with_answers), f"{path.name} at {at}: the reference has {size(truth)} answers"
        found = from_engine(engine.evaluate(plan, at, f"rspql_{plan.registration.name}").result)
        problems += [f"window ending {at}: {p}" for p in compare(found, truth)]
        problems += [f"window ending {at}, against {QUERIES[number].name}: {p}"
                     for p in compare(found, reference_result(original, loaded.data, graphs, at))]
    assert not problems, f"{path.name}\n" + "\n".join(problems)

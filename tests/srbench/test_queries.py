"""The 17 SRBench queries (``examples/srbench``), each registered and evaluated by the engine over generated data
landed through ingest and load-static, window by window, against the independent evaluator.

For every query, some windows have answers and some have none (the data check below makes sure of it before
the engine is compared). The independent side is ``conformance.reference``: pyoxigraph over exactly the
window's triples, selected by its own code, plus the static graphs as parsed from the generated files by rdflib.
An entailment regime is made explicit there by ``chaining.close`` (forward chaining of the rules over the default
graph); DSTREAM is the multiset difference of the reference's results for the previous window and this one.
"""

from __future__ import annotations

import re
from collections import Counter

import pytest

from conformance import reference
from conformance.compare import Results, compare, from_engine
from csparql.core.frontend import compile_query, parse_query
from csparql.srbench import query_files
from csparql.srbench.vocabulary import OBSERVATIONS
from conformance import entailment as chaining

HOUR = 3_600_000_000
MINUTE = 60_000_000
QUERIES = {int(re.match(r"q(\d+)-", path.name).group(1)): path for path in query_files()}
# Per query: hours (from the start of the data) of windows with answers, and of windows without. The
# scenario (csparql.srbench.generator.Scenario) of 30 hours: strong winds in hours 2–3 and 10–11 over the
# coast, a hurricane in hours 4–9, rain in hours 5–8 (heavy in 6–7) and 18–19, a blizzard in hours 12–15, a
# station that stops at hour 20. Hour -1 is a window before the data begins.
WINDOWS = {
    1: ([6, 19], [3]),
    2: ([6, 14], [3]),
    3: ([7], [3]),
    4: ([3], [-1]),
    5: ([15], [11]),
    6: ([7, 13], [3]),
    7: (["broken"], [12]),
    8: ([24], [-1]),
    9: ([24], [-1]),
    10: ([24], [10]),
    11: ([3], [-1]),
    12: ([3], [-1]),
    13: ([3], [6]),
    14: ([7], [3]),
    15: ([6], [2]),
    16: ([6], [3]),
    17: ([6], [3]),
}


def instants(number: int, data) -> tuple[list[int], list[int]]:
    """The window ends to evaluate: (with answers, without)."""

    def instant(hour) -> int:
        if hour == "broken":
            # DSTREAM reports the broken station once: in the window whose previous window (10 minutes earlier)
            # still held its last observation and which no longer does.
            station = next(s for s in data.stations if s.broken)
            last = data.last_observation(station)
            return -(-(last + HOUR) // (10 * MINUTE)) * 10 * MINUTE
        return data.instant(hour)

    with_answers, without = WINDOWS[number]
    return [instant(h) for h in with_answers], [instant(h) for h in without]


def expected(text: str, data, graphs, at: int) -> Results:
    """The independent evaluator's result for the window ending at ``at``."""
    query = parse_query(text)
    regimes = query.registration.entailment if query.registration is not None else ()

    def case(instant: int) -> reference.Case:
        entail = (lambda triples: chaining.close(triples, regimes)) if regimes else None
        return reference.Case(text[:40], text, {OBSERVATIONS: data.stream}, graphs, instant, entail)

    result = reference.evaluate(case(at))
    operator = getattr(query.form, "stream_operator", None)
    if operator in ("ISTREAM", "DSTREAM"):
        period = query.registration.computed_every.micros
        before = reference.evaluate(case(at - period))
        now, then = Counter(result.rows), Counter(before.rows)
        rows = now - then if operator == "ISTREAM" else then - now
        result = Results("select", result.vars, list(rows.elements()))
    return result


def size(result: Results) -> int:
    return {"select": len(result.rows), "ask": int(bool(result.boolean))}.get(result.form, len(result.triples))


@pytest.mark.parametrize("number", sorted(QUERIES), ids=lambda n: f"q{n:02d}")
def test_srbench_query_equals_the_independent_evaluator_in_every_window(number, workload, engine):
    loaded, warehouse, graphs = workload
    path = QUERIES[number]
    text = path.read_text(encoding="utf-8")
    plan = compile_query(text, path.name)
    assert plan.registration is not None
    with_answers, without = instants(number, loaded.data)
    problems = []
    for at in with_answers + without:
        truth = expected(text, loaded.data, graphs, at)
        # the data check: the windows chosen to have answers have some, the others none
        assert (size(truth) > 0) == (at in with_answers), f"{path.name} at {at}: the reference has {size(truth)} answers"
        evaluation = engine.evaluate(plan, at, plan.registration.name)
        found = from_engine(evaluation.result)
        for problem in compare(found, truth):
            problems.append(f"window ending {at}: {problem}")
    assert not problems, f"{path.name}\n" + "\n".join(problems)


def test_there_are_seventeen_queries_each_with_windows():
    assert sorted(QUERIES) == list(range(1, 18)) and sorted(WINDOWS) == list(range(1, 18))

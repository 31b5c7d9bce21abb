"""The schedule of a query (``csparql.core.schedule``): pure window arithmetic, here for a stream read through several
windows (an RSP-QL query with several different windows over one stream)."""

from __future__ import annotations

from rdflib import URIRef

from csparql.core.frontend import compile_query
from csparql.core.schedule import Schedule, evaluation_at, previous_evaluation
from csparql.core.windows import LogicalWindow, WindowBounds

MINUTE = 60_000_000
STREAM = URIRef("http://example.org/s")
LONG, SHORT = LogicalWindow(10 * MINUTE, 5 * MINUTE), LogicalWindow(MINUTE, MINUTE)
TWO_WINDOWS = f"""PREFIX ex: <http://example.org/>
REGISTER RSTREAM <http://example.org/out> AS
SELECT * FROM NAMED WINDOW ex:long ON <{STREAM}> [RANGE PT10M STEP PT5M]
FROM NAMED WINDOW ex:short ON <{STREAM}> [RANGE PT1M STEP PT1M]
WHERE {{ WINDOW ex:long {{ ?s ?p ?o }} WINDOW ex:short {{ ?s ?p ?o }} }}"""


def test_each_window_of_a_stream_keeps_its_own_bounds():
    plan = compile_query(TWO_WINDOWS)
    schedule = Schedule.of(plan)
    assert schedule.period == MINUTE  # the gcd of the steps
    assert schedule.windows == ((str(STREAM), LONG), (str(STREAM), SHORT))
    assert Schedule.from_dict(schedule.to_dict()) == schedule
    evaluation = evaluation_at(plan, 13 * MINUTE)
    assert evaluation.windows == {(STREAM, LONG): WindowBounds(0, 10 * MINUTE),
                                  (STREAM, SHORT): WindowBounds(12 * MINUTE, 13 * MINUTE)}
    assert (evaluation.start, evaluation.end) == (0, 13 * MINUTE)
    assert evaluation.streams == {STREAM: WindowBounds(0, 13 * MINUTE)}  # the interval covering both
    before = previous_evaluation(plan, evaluation)
    assert before.windows[(STREAM, SHORT)] == WindowBounds(11 * MINUTE, 12 * MINUTE)
    assert before.windows[(STREAM, LONG)] == WindowBounds(0, 10 * MINUTE)


def test_evaluations_differ_when_any_window_of_the_stream_moves():
    plan = compile_query(TWO_WINDOWS)
    evaluations = Schedule.of(plan).evaluations(10 * MINUTE, 16 * MINUTE)
    assert [e.end for e in evaluations] == [m * MINUTE for m in range(10, 17)]
    assert [e.windows[(STREAM, LONG)].end for e in evaluations] == [10 * MINUTE] * 5 + [15 * MINUTE] * 2

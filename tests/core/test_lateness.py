"""Which evaluated windows late triples reach (``csparql.core.lateness``): pure window arithmetic."""

from __future__ import annotations

from csparql.core.frontend import compile_query
from csparql.core.lateness import MAX_EVENT_TIMES, coarsen, keep_until, late_windows, lateness, within_horizon
from csparql.core.schedule import Schedule

MINUTE = 60_000_000
STREAM = "http://example.org/s"


def schedule(window: str, operator: str = "") -> Schedule:
    return Schedule.of(compile_query(f"REGISTER QUERY q AS SELECT {operator} ?s FROM STREAM <{STREAM}> {window} "
                                     "WHERE { ?s ?p ?o }"))


def test_a_late_triple_reaches_every_evaluated_window_holding_it():
    sliding = schedule("[RANGE 3m STEP 1m]")
    evaluated = [m * MINUTE for m in range(1, 8)]
    found = late_windows(sliding, STREAM, ((2 * MINUTE + 1, 2), (6 * MINUTE, 1)), evaluated)
    # (t-3m, t]: the triple at 2m+1µs is in the windows ending 3, 4 and 5m; the one at 6m in those ending 6 and 7m
    assert [(w.window_end, w.late_triples) for w in found] == [
        (3 * MINUTE, 2), (4 * MINUTE, 2), (5 * MINUTE, 2), (6 * MINUTE, 1), (7 * MINUTE, 1)]
    assert found[0].window_start == 0
    assert late_windows(sliding, STREAM, ((2 * MINUTE + 1, 2),), [9 * MINUTE]) == []  # not evaluated windows
    assert late_windows(sliding, "http://example.org/other", ((2 * MINUTE + 1, 2),), evaluated) == []


def test_istream_and_dstream_make_the_next_evaluated_window_stale_too():
    tumbling = schedule("[RANGE 1m TUMBLING]", "ISTREAM")
    found = late_windows(tumbling, STREAM, ((90_000_000, 1),), [MINUTE, 2 * MINUTE, 3 * MINUTE], "ISTREAM")
    assert [(w.window_end, w.previous_changed) for w in found] == [(2 * MINUTE, False), (3 * MINUTE, True)]
    assert [w.window_end for w in late_windows(tumbling, STREAM, ((90_000_000, 1),), [MINUTE, 2 * MINUTE])] == [
        2 * MINUTE]  # RSTREAM: its own window only


def test_a_physical_window_may_hold_any_triple_up_to_its_end():
    counted = schedule("[TRIPLES 5]")
    found = late_windows(counted, STREAM, ((10, 1),), [MINUTE, 2 * MINUTE])
    assert [w.window_end for w in found] == [MINUTE, 2 * MINUTE]


def test_event_times_keep_what_can_be_late_and_fit_their_bound():
    assert keep_until([(5, 1), (3, 2), (5, 1), (9, 1)], 6) == ((3, 2), (5, 2))
    assert keep_until([(5, 1)], None) == ()
    many = [(i * 1_000, 1) for i in range(3 * MAX_EVENT_TIMES)]  # a millisecond apart: whole seconds fit
    coarse = coarsen(many)
    assert len(coarse) <= MAX_EVENT_TIMES and sum(n for _, n in coarse) == len(many)
    assert all(ts % 1_000_000 == 0 for ts, _ in coarse)


def test_lateness_counts_each_triple_and_the_horizon_is_measured_from_the_window_end():
    assert lateness(((10, 1), (20, 3)), 100) == (80, 90)  # median over 4 triples: 80; the greatest: 90
    assert within_horizon(MINUTE, 3 * MINUTE, 2 * MINUTE) and not within_horizon(MINUTE, 3 * MINUTE + 1, 2 * MINUTE)


def test_a_late_triple_reaches_the_evaluations_any_window_over_its_stream_covers():
    """Two windows over one stream (RSP-QL): an evaluation is stale when either holds a late triple, and counts
    each late triple once."""
    two = Schedule.of(compile_query(
        f"PREFIX ex: <http://example.org/>\nREGISTER RSTREAM <http://example.org/out> AS\nSELECT *\n"
        f"FROM NAMED WINDOW ex:long ON <{STREAM}> [RANGE PT10M STEP PT5M]\n"
        f"FROM NAMED WINDOW ex:short ON <{STREAM}> [RANGE PT1M STEP PT1M]\n"
        "WHERE { WINDOW ex:long { ?s ?p ?o } WINDOW ex:short { ?s ?p ?o } }"))
    evaluated = [m * MINUTE for m in range(1, 11)]
    found = late_windows(two, STREAM, ((2 * MINUTE + 1, 2), (7 * MINUTE + 1, 1)), evaluated)
    # the short window (t-1m, t] holds 2m+1µs at 3m and 7m+1µs at 8m; the long window (e-10m, e], e the latest
    # multiple of 5m at or before t, holds 2m+1µs from 5m on and 7m+1µs from 10m on
    assert [(w.window_end, w.late_triples) for w in found] == [
        (3 * MINUTE, 2), (5 * MINUTE, 2), (6 * MINUTE, 2), (7 * MINUTE, 2), (8 * MINUTE, 3), (9 * MINUTE, 2),
        (10 * MINUTE, 3)]


def test_late_in_bounds_finds_the_windows_whose_recorded_bounds_hold_a_late_timestamp():
    """A query evaluated without being registered is known by the bounds its runs recorded, not its schedule."""
    from csparql.core.lateness import LateWindow, late_in_bounds

    minute = 60_000_000
    event_times = ((30 * 1_000_000, 1), (minute + 30 * 1_000_000, 2), (5 * minute, 1))
    evaluated = {minute: 0, 2 * minute: minute, 3 * minute: 2 * minute, 4 * minute: None}

    assert late_in_bounds(event_times, evaluated) == [
        LateWindow(0, minute, ((30 * 1_000_000, 1),)),
        LateWindow(minute, 2 * minute, ((minute + 30 * 1_000_000, 2),)),
        # a window without a start (TRIPLES n) may hold every triple up to its end
        LateWindow(None, 4 * minute, ((30 * 1_000_000, 1), (minute + 30 * 1_000_000, 2))),
    ]
    assert late_in_bounds((), evaluated) == [] and late_in_bounds(event_times, {}) == []

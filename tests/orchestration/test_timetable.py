"""The query timetable: runs on the aligned window ends (docs/semantics.md, *Logical windows*, *Physical
windows* and *When a query is evaluated*), the same sequence whether the scheduler catches up, a backfill
enumerates (Airflow's own code, on the DAG as the scheduler stores it), or ``csparql replay`` evaluates the
range."""

from __future__ import annotations

from datetime import datetime, timezone

import pendulum
import pytest
from airflow.timetables.base import TimeRestriction

from csparql.core.frontend import compile_query
from csparql.core.schedule import Schedule
from csparql.core.windows import from_micros

pytestmark = pytest.mark.airflow

PREFIX = ""
CASES = {
    # query head → (expected run instants, expected window bounds) over 00:00–01:00 of 2026-01-01
    "RANGE 30m STEP 5m": ("REGISTER QUERY q AS SELECT * FROM STREAM <http://s> [RANGE 30m STEP 5m] WHERE { ?a <http://example.org/p> ?b }",
                          [(m, m - 30, m) for m in range(0, 61, 5)]),
    "TUMBLING 15m": ("REGISTER QUERY q AS SELECT * FROM STREAM <http://s> [RANGE 15m TUMBLING] WHERE { ?a <http://example.org/p> ?b }",
                     [(m, m - 15, m) for m in range(0, 61, 15)]),
    "COMPUTED EVERY 10m over STEP 5m": (
        "REGISTER QUERY q COMPUTED EVERY 10m AS SELECT * FROM STREAM <http://s> [RANGE 20m STEP 5m] WHERE { ?a <http://example.org/p> ?b }",
        [(m, m - 20, m) for m in range(0, 61, 10)]),
    "COMPUTED EVERY 7m, not a multiple of STEP 5m": (
        # each run evaluates the latest window closed at its instant; instants that would see the same
        # window again (none here) are skipped
        "REGISTER QUERY q COMPUTED EVERY 7m AS SELECT * FROM STREAM <http://s> [RANGE 10m STEP 5m] WHERE { ?a <http://example.org/p> ?b }",
        [(m, m - m % 5 - 10, m - m % 5) for m in range(0, 61, 7)]),
    "COMPUTED EVERY 1m, shorter than STEP 5m": (
        "REGISTER QUERY q COMPUTED EVERY 1m AS SELECT * FROM STREAM <http://s> [RANGE 10m STEP 5m] WHERE { ?a <http://example.org/p> ?b }",
        [(m, m - 10, m) for m in range(0, 61, 5)]),
    "two streams, STEP 10m and 15m": (
        "REGISTER QUERY q AS SELECT * FROM STREAM <http://s> [RANGE 10m STEP 10m] FROM STREAM <http://t> [RANGE 30m STEP 15m] "
        "WHERE { ?a <http://example.org/p> ?b }",
        [(m, min(m - m % 10 - 10, m - m % 15 - 30), max(m - m % 10, m - m % 15)) for m in range(0, 61, 5)
         if m % 10 == 0 or m % 15 == 0]),
    "TRIPLES 100, every minute": ("REGISTER QUERY q AS SELECT * FROM STREAM <http://s> [TRIPLES 100] WHERE { ?a <http://example.org/p> ?b }",
                                  [(m, m - 1, m) for m in range(0, 61)]),
}
DAY = datetime(2026, 1, 1, tzinfo=timezone.utc)


def minute(m: int) -> pendulum.DateTime:
    return pendulum.instance(DAY).add(minutes=m)


def timetable_of(text: str):
    from csparql.orchestration.timetable import WindowTimetable

    return WindowTimetable(Schedule.of(compile_query(PREFIX + text)))


def catch_up(timetable, earliest, latest):
    restriction = TimeRestriction(earliest, latest, catchup=True)
    infos, last = [], None
    while (info := timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)) is not None:
        infos.append(info)
        last = info.data_interval
        assert len(infos) < 10_000
    return infos


def as_minutes(infos):
    return [
        ((i.run_after - pendulum.instance(DAY)).in_minutes(),
         (i.data_interval.start - pendulum.instance(DAY)).in_minutes(),
         (i.data_interval.end - pendulum.instance(DAY)).in_minutes())
        for i in infos
    ]


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_runs_fall_on_the_aligned_window_bounds(case):
    text, expected = CASES[case]
    assert as_minutes(catch_up(timetable_of(text), minute(0), minute(60))) == expected


@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_catch_up_backfill_and_replay_give_the_same_sequence(case):
    from airflow.sdk import DAG
    from airflow.serialization.serialized_objects import DagSerialization

    text, _ = CASES[case]
    timetable = timetable_of(text)
    with DAG("q", schedule=timetable, start_date=pendulum.datetime(2000, 1, 1, tz="UTC")) as dag:
        pass
    stored = DagSerialization.from_dict(DagSerialization.to_dict(dag))  # as the scheduler reads it
    assert type(stored.timetable).__name__ == "WindowTimetable"
    backfill = list(stored.iter_dagrun_infos_between(minute(0), minute(60)))
    replay = Schedule.of(compile_query(PREFIX + text)).evaluations(
        int(minute(0).timestamp()) * 1_000_000, int(minute(60).timestamp()) * 1_000_000)
    caught_up = catch_up(timetable, minute(0), minute(60))
    assert as_minutes(backfill) == as_minutes(caught_up)
    assert [(i.run_after, i.data_interval.end) for i in caught_up] == [
        (pendulum.instance(from_micros(e.at)), pendulum.instance(from_micros(e.end))) for e in replay]


def test_without_catch_up_the_first_run_is_the_latest_closed_window():
    timetable = timetable_of(CASES["RANGE 30m STEP 5m"][0])
    now = pendulum.now("UTC")
    info = timetable.next_dagrun_info(
        last_automated_data_interval=None, restriction=TimeRestriction(pendulum.datetime(2000, 1, 1, tz="UTC"), None, False))
    assert info.run_after <= now and (now - info.run_after).in_seconds() < 300
    assert info.run_after.minute % 5 == 0 and info.run_after.second == 0 and info.run_after.microsecond == 0
    assert info.data_interval.end == info.run_after
    following = timetable.next_dagrun_info(
        last_automated_data_interval=info.data_interval,
        restriction=TimeRestriction(pendulum.datetime(2000, 1, 1, tz="UTC"), None, False))
    assert following.run_after == info.run_after.add(minutes=5)


def next_without_catch_up(timetable, last_end: pendulum.DateTime, now: pendulum.DateTime, monkeypatch):
    monkeypatch.setattr(pendulum, "now", lambda tz=None: now)
    last = timetable.infer_manual_data_interval(run_after=last_end)
    return timetable.next_dagrun_info(
        last_automated_data_interval=last,
        restriction=TimeRestriction(pendulum.datetime(2000, 1, 1, tz="UTC"), None, False))


@pytest.mark.parametrize("late_minutes", [0, 4, 12, 19])
def test_without_catch_up_a_window_reached_late_still_runs(late_minutes, monkeypatch):
    """A busy or restarted scheduler, or a DAG at its max_active_runs, creates the next run after its window
    closed; within four periods nothing is lost."""
    from csparql.orchestration.timetable import LATE_WINDOWS_KEPT

    assert LATE_WINDOWS_KEPT == 4
    timetable = timetable_of(CASES["RANGE 30m STEP 5m"][0])
    now = minute(35).add(minutes=late_minutes, seconds=30)
    info = next_without_catch_up(timetable, minute(30), now, monkeypatch)
    assert (info.run_after, info.data_interval.start, info.data_interval.end) == (minute(35), minute(5), minute(35))


@pytest.mark.parametrize(("now", "first_kept"), [(minute(60).add(seconds=1), 45), (minute(24 * 60), 24 * 60 - 15)])
def test_without_catch_up_windows_missed_for_longer_are_skipped(now, first_kept, monkeypatch):
    timetable = timetable_of(CASES["RANGE 30m STEP 5m"][0])
    info = next_without_catch_up(timetable, minute(30), now, monkeypatch)
    assert (info.run_after, info.data_interval.end) == (minute(first_kept), minute(first_kept))


def test_without_catch_up_late_windows_are_distinct_windows(monkeypatch):
    """COMPUTED EVERY 1m over STEP 5m: the latest four instants are minutes, and a late run evaluates the
    window closed at the oldest of them that sees a window after the previous run's."""
    timetable = timetable_of(CASES["COMPUTED EVERY 1m, shorter than STEP 5m"][0])
    info = next_without_catch_up(timetable, minute(30), minute(38).add(seconds=10), monkeypatch)
    assert (info.run_after, info.data_interval.end) == (minute(35), minute(35))
    info = next_without_catch_up(timetable, minute(30), minute(50).add(seconds=10), monkeypatch)
    assert (info.run_after, info.data_interval.end) == (minute(47), minute(45))
    following = timetable.next_dagrun_info(last_automated_data_interval=info.data_interval,
                                           restriction=TimeRestriction(minute(0), None, False))
    assert (following.run_after, following.data_interval.end) == (minute(50), minute(50))


def test_a_manual_run_evaluates_the_latest_window_closed_at_its_time():
    timetable = timetable_of(CASES["RANGE 30m STEP 5m"][0])
    interval = timetable.infer_manual_data_interval(run_after=minute(7).add(seconds=30))
    assert (interval.start, interval.end) == (minute(-25), minute(5))


def test_a_backfill_range_past_the_last_window_ends():
    timetable = timetable_of(CASES["TUMBLING 15m"][0])
    assert as_minutes(catch_up(timetable, minute(1), minute(44))) == [(15, 0, 15), (30, 15, 30)]


# --- limits: never a run at an instant no layer represents, never an exception in the scheduler ----------


def test_a_schedule_stored_before_the_limits_were_checked_has_no_runs():
    """A DAG registered with COMPUTED EVERY 99999999999999999999d, as the scheduler still holds it: its
    timetable neither raises nor schedules a run at 1970-01-01 (the front end refuses such a query now)."""
    from csparql.orchestration.timetable import WindowTimetable

    stored = {"period": 99999999999999999999 * 86_400_000_000,
              "windows": [{"stream": "http://s", "range": 1_800_000_000, "step": 300_000_000}]}
    timetable = WindowTimetable.deserialize(stored)
    for catchup in (False, True):
        for earliest in (None, pendulum.datetime(2000, 1, 1, tz="UTC")):
            restriction = TimeRestriction(earliest, None, catchup)
            assert timetable.next_dagrun_info(last_automated_data_interval=None, restriction=restriction) is None


def test_a_backfill_from_before_1500_starts_at_the_earliest_instant_csparql_evaluates():
    timetable = timetable_of(CASES["RANGE 30m STEP 5m"][0])
    start = pendulum.datetime(1, 1, 1, tz="UTC")
    info = timetable.next_dagrun_info(last_automated_data_interval=None,
                                      restriction=TimeRestriction(start, None, True))
    assert info.run_after == pendulum.datetime(1500, 1, 1, tz="UTC")
    assert info.data_interval.start == pendulum.datetime(1499, 12, 31, 23, 30, tz="UTC")


def test_runs_end_at_the_latest_instant_csparql_evaluates():
    timetable = timetable_of("REGISTER QUERY q AS SELECT * FROM STREAM <http://s> [RANGE 36525d TUMBLING] "
                             "WHERE { ?a <http://example.org/p> ?b }")
    restriction = TimeRestriction(pendulum.datetime(9000, 1, 1, tz="UTC"), None, True)
    infos, last = [], None
    while (info := timetable.next_dagrun_info(last_automated_data_interval=last, restriction=restriction)) is not None:
        infos.append(info)
        last = info.data_interval
        assert len(infos) < 10
    # every 100 years (36525 days) from the epoch: 9070-01-01, 9170, …, 9470; the next one, in 9570, is past 9500
    assert [i.run_after.year for i in infos] == [9070, 9170, 9270, 9370, 9470]

"""Late triples and the windows they make stale, as pure window arithmetic (no storage, no Spark).

A stream commit is described by its *event times*: how many triples it committed at each timestamp (µs),
``((ts, count), …)`` in timestamp order. A window of a query evaluated before that commit is *stale* when one of
those triples falls inside the window its stream had at that evaluation (``Schedule.evaluation_at``): the
evaluation could not see it. For an ``ISTREAM``/``DSTREAM`` query, the evaluation after a stale window is stale
too, since it compared its window with the stale one.

Only timestamps up to the latest window end evaluated (or being evaluated) can make a window stale, so a commit
keeps just those (``keep_until``), and at most ``MAX_EVENT_TIMES`` of them (``coarsen`` rounds the timestamps down to whole
seconds, then minutes, hours, days, until they fit: a rounded-down timestamp may name a window one step early,
which only revises a window more, never fewer).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from rdflib import URIRef

from csparql.core.schedule import Schedule

EventTimes = tuple[tuple[int, int], ...]
MAX_EVENT_TIMES = 2_000
GRAINS = (1_000_000, 60_000_000, 3_600_000_000, 86_400_000_000)


@dataclass(frozen=True)
class LateWindow:
    """A window evaluated before a commit that holds ``late`` triples of it (timestamps and counts)."""

    window_start: int | None
    window_end: int
    late: EventTimes
    previous_changed: bool = False  # stale because the previous window (ISTREAM/DSTREAM) is

    @property
    def late_triples(self) -> int:
        return sum(count for _, count in self.late)


def keep_until(event_times: Iterable[tuple[int, int]], latest_end: int | None) -> EventTimes:
    """The event times at or before ``latest_end`` (None: no window evaluated yet, so none), coarsened to at most
    ``MAX_EVENT_TIMES`` entries."""
    if latest_end is None:
        return ()
    return coarsen([(ts, count) for ts, count in event_times if ts <= latest_end])


def coarsen(event_times: Iterable[tuple[int, int]], limit: int = MAX_EVENT_TIMES) -> EventTimes:
    """The event times sorted, with equal timestamps merged; timestamps rounded down to the first grain of
    ``GRAINS`` that leaves at most ``limit`` of them when there are more."""
    merged = _merge(event_times, 1)
    for grain in GRAINS:
        if len(merged) <= limit:
            break
        merged = _merge(merged, grain)
    return merged


def _merge(event_times: Iterable[tuple[int, int]], grain: int) -> EventTimes:
    counts: dict[int, int] = {}
    for ts, count in event_times:
        key = ts - ts % grain
        counts[key] = counts.get(key, 0) + count
    return tuple(sorted(counts.items()))


def late_windows(schedule: Schedule, stream: str, event_times: EventTimes, evaluated: Iterable[int],
                 stream_operator: str = "RSTREAM") -> list[LateWindow]:
    """The windows among ``evaluated`` (window ends of evaluations made before the commit) that the commit's
    ``event_times`` on ``stream`` reach, in window-end order; for ``ISTREAM``/``DSTREAM`` also the evaluated
    window right after each (``previous_changed``). A physical window (``[TRIPLES n]``) has no start: every
    triple up to its end may belong to it. When the query reads the stream through several windows, an
    evaluation is reached when any of them holds a late triple; ``late`` holds each such triple once."""
    ends = sorted(set(evaluated))
    if not event_times or not ends:
        return []
    iri = URIRef(stream)
    times = [ts for ts, _ in event_times]
    found: dict[int, LateWindow] = {}
    for end in ends[bisect_left(ends, times[0]):]:
        evaluation = schedule.evaluation_at(end)
        if evaluation.end != end:
            continue
        reached: set[int] = set()
        for (window_stream, _), bounds in evaluation.windows.items():
            if window_stream == iri:
                first = 0 if bounds.start is None else bisect_right(times, bounds.start)
                reached.update(range(first, bisect_right(times, bounds.end)))
        if reached:
            found[end] = LateWindow(evaluation.start, end, tuple(event_times[i] for i in sorted(reached)))
    if stream_operator != "RSTREAM":
        evaluated_set = set(ends)
        for window in list(found.values()):
            following = schedule.next_evaluation(window.window_end, window.window_end)
            if following.end in evaluated_set and following.end not in found:
                found[following.end] = LateWindow(following.start, following.end, window.late, previous_changed=True)
    return [found[end] for end in sorted(found)]


def late_in_bounds(event_times: EventTimes, evaluated: Mapping[int, int | None]) -> list[LateWindow]:
    """The windows among ``evaluated`` (window end → window start, None for a window without a start) that
    the commit's ``event_times`` reach, in window-end order: what is known of a query whose schedule is not
    (a query evaluated without being registered), from the bounds its evaluations recorded. A window
    ``(start, end]`` is reached by a timestamp inside it; one without a start by every timestamp up to its end.
    The bounds are the evaluation's (the earliest start of its time-based windows, the latest end), so a stream
    read through a narrower window may be found stale by a triple that window did not hold."""
    times = [ts for ts, _ in event_times]
    found = []
    for end in sorted(evaluated):
        start = evaluated[end]
        first = 0 if start is None else bisect_right(times, start)
        last = bisect_right(times, end)
        if first < last:
            found.append(LateWindow(start, end, tuple(event_times[first:last])))
    return found


def lateness(late: EventTimes, committed_at: int) -> tuple[int, int]:
    """The median and the greatest lateness (µs) of late triples: how long after its event time each landed
    (``committed_at`` minus its timestamp), counting each triple once."""
    values = sorted((committed_at - ts, n) for ts, n in late)
    total = sum(n for _, n in values)
    middle, seen = (total + 1) // 2, 0
    median = values[-1][0]
    for value, n in values:
        seen += n
        if seen >= middle:
            median = value
            break
    return median, values[-1][0]


def within_horizon(window_end: int, detected_at: int, horizon: int) -> bool:
    """Whether a window detected stale at ``detected_at`` is revised: its end at most ``horizon`` before."""
    return detected_at - window_end <= horizon


def event_times_from(pairs: Iterable[Iterable[int]]) -> EventTimes:
    """Event times read back from their JSON form (``[[ts, count], …]``), in timestamp order."""
    return tuple(sorted((int(ts), int(n)) for ts, n in pairs))

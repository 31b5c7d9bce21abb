"""When a registered query is evaluated and which window each of its streams gets.

The rules are those of docs/semantics.md: *Logical windows*, *Physical windows*, *When a query is evaluated* and
*One result per window*. Pure: used by the engine (``csparql run``/``replay``) and by the Airflow layer's
timetable, so both evaluate the same windows.

- The evaluation period is COMPUTED EVERY when given; otherwise each logical window's STEP and one minute
  for a physical window (several streams: the greatest common divisor, so every window end of every stream
  is an evaluation instant).
- An evaluation at instant t gives every window of every stream the latest window that closes at or before t.
  A stream may have several windows (an RSP-QL query reading it through several different windows): each is
  kept apart, keyed by ``(stream IRI, window)``.
- An evaluation is identified by (query, window end): the latest window end over the query's streams, or t
  itself for a query that reads no stream or only physical windows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rdflib import URIRef

from csparql.core.windows import (
    MAX_COUNT,
    MAX_DURATION,
    LogicalWindow,
    PhysicalWindow,
    Window,
    WindowBounds,
    default_period,
    evaluation_times,
    format_duration,
    window_at,
)

if TYPE_CHECKING:  # the schedule of a deployed query is read from its kept facts, without the algebra
    from csparql.core.algebra.operators import QueryPlan


StreamWindowKey = tuple[URIRef, Window]
"""One window of one stream: what the bounds of an evaluation are kept by (a stream may have several)."""


@dataclass(frozen=True)
class EvaluationWindow:
    """One evaluation of a query: its instant, its identifying bounds, and the bounds of each window of each
    stream."""

    at: int
    start: int | None
    end: int
    windows: dict[StreamWindowKey, WindowBounds]

    @property
    def streams(self) -> dict[URIRef, WindowBounds]:
        """Each stream's bounds: its window's, or for a stream read through several windows the interval that
        covers them all (the earliest start, the latest end)."""
        covering: dict[URIRef, WindowBounds] = {}
        for (iri, _), bounds in self.windows.items():
            known = covering.get(iri)
            if known is None:
                covering[iri] = bounds
            else:
                start = None if known.start is None or bounds.start is None else min(known.start, bounds.start)
                covering[iri] = WindowBounds(start, max(known.end, bounds.end))
        return covering


@dataclass(frozen=True)
class Schedule:
    """When a query is evaluated and what each evaluation reads: its period and its streams' windows.

    Holds no query text, so that it can be stored with an Airflow DAG (``to_dict``/``from_dict``) and rebuilt
    wherever runs are planned; every window it yields is the one ``Engine.evaluate`` reads at that instant.
    """

    period: int
    windows: tuple[tuple[str, Window], ...]

    @classmethod
    def of(cls, plan: QueryPlan) -> Schedule:
        """The schedule of a query; ``ValueError`` for a one-shot query (no stream and no COMPUTED EVERY)."""
        period = evaluation_period(plan)
        if period is None:
            raise ValueError("the query reads no stream and has no COMPUTED EVERY, so it has no schedule")
        return cls(period, stream_windows(plan))

    def evaluation_at(self, at: int) -> EvaluationWindow:
        """The windows an evaluation at instant ``at`` reads, and the bounds that identify it."""
        windows = {(URIRef(iri), window): window_at(window, at) for iri, window in self.windows}
        logical = [bounds for (_, window), bounds in windows.items() if isinstance(window, LogicalWindow)]
        if logical:
            return EvaluationWindow(at, min(b.start for b in logical), max(b.end for b in logical), windows)
        return EvaluationWindow(at, None, at, windows)

    def evaluations(self, start: int, end: int) -> list[EvaluationWindow]:
        """The evaluations with instants in [start, end], in order, each distinct window once (with COMPUTED
        EVERY shorter than STEP, several instants see the same windows; the first of them evaluates it)."""
        evaluations: list[EvaluationWindow] = []
        seen: set = set()
        for instant in evaluation_times(self.period, start, end):
            evaluation = self.evaluation_at(instant)
            key = _identity(evaluation)
            if key not in seen:
                seen.add(key)
                evaluations.append(evaluation)
        return evaluations

    def next_evaluation(self, after_end: int | None, not_before: int) -> EvaluationWindow:
        """The first evaluation at an instant ``>= not_before`` whose window ends after ``after_end`` (the
        previous evaluation's window end; None when there was none)."""
        instant = -((-not_before) // self.period) * self.period
        while True:
            evaluation = self.evaluation_at(instant)
            if after_end is None or evaluation.end > after_end:
                return evaluation
            instant += self.period

    def previous_evaluation(self, evaluation: EvaluationWindow) -> EvaluationWindow:
        """The evaluation before ``evaluation`` in this schedule: the one at the latest instant of the schedule
        earlier than ``evaluation``'s window end. Its window ends earlier (the one that ISTREAM and DSTREAM
        compare with), whichever instant ``evaluation`` was made at."""
        return self.evaluation_at((evaluation.end - 1) // self.period * self.period)

    def latest_evaluation(self, at: int) -> EvaluationWindow:
        """The evaluation at the latest instant ``<= at``."""
        return self.evaluation_at(at - at % self.period)

    @property
    def within_limits(self) -> bool:
        """Whether its period and windows keep the limits the front end enforces (``MAX_DURATION``,
        ``MAX_COUNT``): false only for a schedule stored before they were (e.g. with an Airflow DAG)."""
        logical = [w for _, w in self.windows if isinstance(w, LogicalWindow)]
        durations = [self.period] + [w.range for w in logical] + [w.step for w in logical]
        counts = [w.count for _, w in self.windows if isinstance(w, PhysicalWindow)]
        return all(0 < d <= MAX_DURATION for d in durations) and all(0 < c <= MAX_COUNT for c in counts)

    def to_dict(self) -> dict:
        """A JSON-ready form (durations in microseconds) that ``from_dict`` reads back."""
        return {
            "period": self.period,
            "windows": [
                {"stream": iri, "range": w.range, "step": w.step}
                if isinstance(w, LogicalWindow)
                else {"stream": iri, "triples": w.count}
                for iri, w in self.windows
            ],
        }

    @classmethod
    def from_dict(cls, data: dict) -> Schedule:
        windows = tuple(
            (w["stream"], LogicalWindow(w["range"], w["step"]) if "range" in w else PhysicalWindow(w["triples"]))
            for w in data["windows"]
        )
        return cls(int(data["period"]), windows)


def stream_windows(plan: QueryPlan) -> tuple[tuple[str, Window], ...]:
    """Each window of each stream the query reads, once, in order: ``Schedule.windows``."""
    return tuple(dict.fromkeys((str(s.iri), s.window) for s in plan.streams))


def _identity(evaluation: EvaluationWindow) -> tuple:
    return (evaluation.end, tuple(sorted((str(iri), str(window), v.end) for (iri, window), v in evaluation.windows.items())))


def evaluation_period(plan: QueryPlan) -> int | None:
    """How often the query is evaluated (microseconds); None for a one-shot query with no period."""
    if plan.registration is not None and plan.registration.computed_every:
        return plan.registration.computed_every
    periods = [default_period(s.window) for s in plan.streams]
    if not periods:
        return None
    return math.gcd(*periods)


def evaluation_at(plan: QueryPlan, at: int) -> EvaluationWindow:
    """The windows an evaluation at instant ``at`` reads, and the bounds that identify it."""
    return Schedule(evaluation_period(plan) or 1, stream_windows(plan)).evaluation_at(at)


def previous_evaluation(plan: QueryPlan, evaluation: EvaluationWindow) -> EvaluationWindow:
    """The evaluation before ``evaluation`` in the query's schedule (``Schedule.previous_evaluation``)."""
    return Schedule(evaluation_period(plan) or 1, stream_windows(plan)).previous_evaluation(evaluation)


MAX_REPLAYED = 100_000
"""The most evaluation instants one replay may span: the evaluations are listed before the first is made."""


def scheduled_evaluations(plan: QueryPlan, start: int, end: int) -> list[EvaluationWindow]:
    """The evaluations the schedule makes with instants in [start, end], in order, each distinct window once
    (with COMPUTED EVERY shorter than STEP, several instants see the same windows). ``ValueError`` for a query
    without a schedule, or a range of more than ``MAX_REPLAYED`` evaluation instants."""
    period = evaluation_period(plan)
    if period is None:
        raise ValueError("the query reads no stream and has no COMPUTED EVERY, so it has no schedule to replay")
    instants = max(0, (end - start) // period + 1)
    if instants > MAX_REPLAYED:
        raise ValueError(
            f"the range holds about {instants:,} evaluations (one every {format_duration(period)}); a replay "
            f"evaluates at most {MAX_REPLAYED:,}: split the range"
        )
    return Schedule.of(plan).evaluations(start, end)

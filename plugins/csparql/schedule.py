"""When a registered query is evaluated and which window each of its streams gets (decisions 2–4, 11).

Pure: used by the engine (``csparql run``/``replay``) and by the Airflow layer's timetable, so both evaluate
the same windows.

- The evaluation period is COMPUTED EVERY when given; otherwise each logical window's STEP and one minute
  for a physical window (several streams: the greatest common divisor, so every window end of every stream
  is an evaluation instant).
- An evaluation at instant t gives every stream the latest window that closes at or before t.
- An evaluation is identified by (query, window end): the latest window end over the query's streams, or t
  itself for a query that reads no stream or only physical windows.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rdflib import URIRef

from csparql.algebra.operators import QueryPlan
from csparql.windows import LogicalWindow, WindowBounds, default_period, evaluation_times, window_at


@dataclass(frozen=True)
class EvaluationWindow:
    """One evaluation of a query: its instant, its identifying bounds, and each stream's window."""

    at: int
    start: int | None
    end: int
    streams: dict[URIRef, WindowBounds]


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
    streams = {s.iri: window_at(s.window, at) for s in plan.streams}
    logical = [streams[s.iri] for s in plan.streams if isinstance(s.window, LogicalWindow)]
    if logical:
        end = max(b.end for b in logical)
        start = min(b.start for b in logical)
    else:
        end, start = at, None
    return EvaluationWindow(at, start, end, streams)


def scheduled_evaluations(plan: QueryPlan, start: int, end: int) -> list[EvaluationWindow]:
    """The evaluations the schedule makes with instants in [start, end], in order, each distinct window once
    (with COMPUTED EVERY shorter than STEP, several instants see the same windows)."""
    period = evaluation_period(plan)
    if period is None:
        raise ValueError("the query reads no stream and has no COMPUTED EVERY, so it has no schedule to replay")
    evaluations: list[EvaluationWindow] = []
    seen: set = set()
    for instant in evaluation_times(period, start, end):
        evaluation = evaluation_at(plan, instant)
        key = (evaluation.end, tuple(sorted((str(k), v.end) for k, v in evaluation.streams.items())))
        if key in seen:
            continue
        seen.add(key)
        evaluations.append(evaluation)
    return evaluations

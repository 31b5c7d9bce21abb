"""What registering a query text would do, shown before it is saved (the register page validates as you type).

``preview(text, settings, name, now)`` runs the same front end as ``csparql register`` — parser, C-SPARQL
checks, translation, and the registry's own checks (a valid name, no second producer of a stream, no query
reading its own output) — and returns either the problems, each with its line and column, or the optimized
plan and the next evaluations the query's DAG would run: their instants, windows and what each waits for.
Nothing is written. Needs neither Airflow nor Spark.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from csparql.core.algebra.sexpr import format_plan
from csparql.deploy.plan import Deployment, deployment_of_text
from csparql.deploy.registry import RegistrationError, compile_text, normalized_text
from csparql.deploy.settings import Settings
from csparql.core.language.errors import MAX_REPORTED, QueryError
from csparql.core.language.parser import MAX_QUERY_CHARACTERS
from csparql.core.optimizer import SourceStatistics, optimize
from csparql.core.windows import format_duration

MAX_TEXT = MAX_QUERY_CHARACTERS
"""The longest query text accepted (characters), as everywhere else: a registry file is a query, not a data set."""


@dataclass(frozen=True)
class Problem:
    """One reason the text cannot be registered, with its place in the text when it has one (1-based line
    and column, and the length of the offending text)."""

    message: str
    line: int | None = None
    column: int | None = None
    length: int = 1
    rendered: str = ""

    def to_dict(self) -> dict:
        return {"message": self.message, "line": self.line, "column": self.column, "length": self.length,
                "rendered": self.rendered}


@dataclass(frozen=True)
class PlannedRun:
    """One upcoming evaluation: its instant (the DAG run's run_after), its window, and what it waits for:
    per ingested stream the watermark it needs, per producing query the window ends it needs written."""

    at: int
    window_start: int | None
    window_end: int
    streams: dict[str, int]
    producers: dict[str, list[int]]


@dataclass(frozen=True)
class Preview:
    """The outcome of checking a query text for registration (see the module docstring)."""

    problems: tuple[Problem, ...]
    name: str | None = None
    form: str | None = None
    description: str | None = None
    period: int | None = None
    streams: tuple[tuple[str, str], ...] = ()
    output_stream: str | None = None
    algebra: str | None = None
    optimized: str | None = None
    next_runs: tuple[PlannedRun, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def schedule(self) -> str | None:
        return f"every {format_duration(self.period)}" if self.period else None


def _problems(error: QueryError, text: str) -> tuple[Problem, ...]:
    """The error's problems (the first ``MAX_REPORTED``, and how many more there are)."""
    problems = []
    for diagnostic in error.diagnostics[:MAX_REPORTED]:
        span = diagnostic.span
        rendered = diagnostic.render(text, "query")
        if span is None:
            problems.append(Problem(diagnostic.message, rendered=rendered))
        else:
            problems.append(Problem(diagnostic.message, span.line, span.column, span.length, rendered))
    hidden = len(error.diagnostics) - MAX_REPORTED
    if hidden > 0:
        problems.append(Problem(f"… and {hidden:,} more problem{'s' if hidden > 1 else ''}"))
    return tuple(problems)


def preview(text: str, settings: Settings, name: str | None = None, now: int | None = None,
            statistics: SourceStatistics | None = None, count: int = 5, plans: bool = True) -> Preview:
    """Check ``text`` as the registry would under ``name`` (default: its REGISTER name) and, when it can be
    registered, its optimized plan and its next ``count`` evaluations after ``now`` (µs; default: the
    current time). Never raises for a bad text or name: every problem is in ``problems``. ``plans=False``:
    the check alone, without the plans and the next evaluations (a request that registers the text shows
    neither)."""
    import time

    if len(text) > MAX_TEXT:
        return Preview((Problem(f"the query is {len(text):,} characters long; at most {MAX_TEXT:,} are accepted"),))
    text = normalized_text(text)
    if not text.strip():
        return Preview((Problem("the query is empty: paste or type a C-SPARQL query"),))
    try:
        compiled = compile_text(text, "query")
    except QueryError as error:
        return Preview(_problems(error, text))
    except RegistrationError as error:  # a settings line of the text (``csparql.deploy.file_settings``)
        return Preview((Problem(error.message.strip()),))
    plan = compiled.plan
    name = name or compiled.registered_name
    if not name:
        return Preview((Problem("give the query a name: it has no REGISTER clause to take it from"),),
                       form=result_form(plan))
    try:
        deployment = deployment_of_text(compiled, name, settings)
    except RegistrationError as error:
        return Preview((Problem(error.message.strip()),), name=name)
    checked = Preview(
        problems=(),
        name=name,
        form=result_form(plan),
        description=deployment.description,
        period=deployment.schedule.period if deployment.schedule else None,
        streams=tuple((iri, str(window)) for iri, window in deployment.schedule.windows) if deployment.schedule else (),
        output_stream=deployment.output_stream,
    )
    if not plans:
        return checked
    moment = time.time_ns() // 1000 if now is None else now
    return dataclasses.replace(checked, algebra=format_plan(plan),
                               optimized=format_plan(optimize(plan, statistics or SourceStatistics({}))),
                               next_runs=next_runs(deployment, moment, count))


def result_form(plan) -> str:
    """``select``, ``ask``, ``construct`` or ``describe``."""
    return type(plan.form).__name__.removesuffix("Result").lower()


def next_runs(deployment: Deployment, now: int, count: int = 5) -> tuple[PlannedRun, ...]:
    """The next ``count`` evaluations of a deployed query at or after ``now`` (none for a one-shot query,
    which runs when triggered)."""
    schedule = deployment.schedule
    if schedule is None:
        return ()
    runs = []
    evaluation = schedule.next_evaluation(None, now)
    while len(runs) < count:
        needs = deployment.requirements(evaluation.at)
        runs.append(PlannedRun(evaluation.at, evaluation.start, evaluation.end, needs.streams, needs.producer_windows))
        evaluation = schedule.next_evaluation(evaluation.end, evaluation.at + 1)
    return tuple(runs)

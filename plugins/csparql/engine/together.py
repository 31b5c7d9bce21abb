"""Evaluations run together: the Spark parts of several windows' evaluations in one Spark job.

Each evaluation is a generator of steps (``csparql.engine.runner.Engine.evaluation_steps``, and the generators
of the layers above built on it with ``yield from``): everything before its Spark part — its tables checked,
lost runs recorded, its revision, its plan optimized and compiled — runs when it is started, and everything
after — its result commit, its runs row, what the layers above do with its outcome — when it is resumed.
``evaluate_together`` starts a group of them, runs the compiled plans that allow it as one Spark job
(``csparql.engine.evaluate.results_together``: one analysis and one job instead of one per window) and
resumes each with its own results; each window stays its own evaluation, with its own commit and runs row.
A window whose part cannot be combined (from panes, ordered, or failing to prepare) runs alone, and so do
all of a job that fails: its windows' parts run again, each by itself, so nothing is lost to the combination.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from csparql.engine.evaluate import combinable, results_together
from csparql.engine.runner import SparkStep

log = logging.getLogger(__name__)


@dataclass
class Stepped:
    """One evaluation's steps driven by ``evaluate_together``: ``step`` the Spark step it waits on (None once
    finished), then ``value`` what the steps returned, or ``error`` what they raised. ``run_in``: how each of
    its steps is called (a ``contextvars.Context``'s ``run``, so that they log to their task)."""

    steps: Generator[SparkStep, tuple, Any]
    run_in: Callable[..., Any] = field(default=lambda action, *arguments: action(*arguments))
    step: SparkStep | None = None
    finished: bool = False
    value: Any = None
    error: BaseException | None = None

    def start(self) -> None:
        self._resume(next, self.steps)

    def resume(self, outcome: tuple | BaseException) -> None:
        if isinstance(outcome, BaseException):
            self._resume(self.steps.throw, outcome)
        else:
            self._resume(self.steps.send, outcome)

    def finish_alone(self) -> None:
        """Run its remaining Spark steps by themselves, until its steps end."""
        while not self.finished:
            self.resume(self._outcome_alone())

    def _outcome_alone(self) -> tuple | BaseException:
        try:
            return self.run_in(self.step.alone)
        except Exception as error:  # noqa: BLE001 - thrown into the steps, which record the failure
            return error

    def _resume(self, action: Callable, argument) -> None:
        try:
            self.step = self.run_in(action, argument)
        except StopIteration as done:
            self.step, self.finished, self.value = None, True, done.value
        except Exception as error:  # noqa: BLE001 - the evaluation's failure, handed to whoever waits on it
            self.step, self.finished, self.error = None, True, error


def evaluate_together(evaluations: Sequence[Stepped], finished: Callable[[Stepped], None] = lambda _: None) -> None:
    """Drive ``evaluations`` to their end: each started, the combinable compiled plans of one Spark session
    and one execution mode run as one Spark job, every other Spark step alone; ``finished(evaluation)`` is
    called for each as soon as its steps have ended (its ``value`` or ``error`` set)."""
    for evaluation in evaluations:
        evaluation.start()
    waiting = [e for e in evaluations if not e.finished]
    for evaluation in evaluations:
        if evaluation.finished:
            finished(evaluation)
    groups: dict[tuple, list[Stepped]] = {}
    for evaluation in waiting:
        compiled = evaluation.step.compiled
        if compiled is not None and combinable(compiled):
            groups.setdefault((id(compiled.df.sparkSession), compiled.compact), []).append(evaluation)
    for group in groups.values():
        if len(group) > 1:
            _run_as_one_job(group, finished)
    for evaluation in waiting:
        if not evaluation.finished:
            evaluation.finish_alone()
            finished(evaluation)


def _run_as_one_job(group: list[Stepped], finished: Callable[[Stepped], None]) -> None:
    clock = time.perf_counter()
    try:
        results = results_together([evaluation.step.compiled for evaluation in group])
    except Exception as error:  # noqa: BLE001 - each window's part then runs alone, which reports its own error
        log.warning("%d windows could not be evaluated in one Spark job; each is evaluated alone: %s", len(group),
                    " ".join(str(error).split())[:300])
        return
    spark_ms = (time.perf_counter() - clock) * 1000
    log.info("%d windows evaluated in one Spark job in %.0f ms", len(group), spark_ms)
    for evaluation, result in zip(group, results):
        step = evaluation.step
        step.phases.ms["spark"] = step.phases.ms.get("spark", 0.0) + spark_ms
        evaluation.resume((result, None, step.scans))
        evaluation.finish_alone()
        finished(evaluation)

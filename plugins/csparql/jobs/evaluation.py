"""One window of a deployment evaluated and checked for staleness: the one evaluation step every path runs.

The window task in a worker (a local Spark or a Spark Connect client), the same task evaluated on the
triggerer (Spark Connect), the spark-submit job (``evaluate_window.py``) and the revision task all call
``evaluate_deployment_window`` (or its steps, ``deployment_window_steps``, when windows due together run their
Spark parts as one job: ``csparql.engine.together``). It evaluates the window (``Engine.evaluate``: results replaced, the run
recorded) and then runs the staleness check promised after every evaluation (``csparql.deploy.revisions``):
the commits made to the query's streams while it ran (``check_evaluation``) and, for a ``REGISTER STREAM``
query, the consumers' windows its output commit made stale (``detect_after_commits``). It imports no Airflow:
announcing the stale windows it returns to their revision DAGs is the Airflow layer's.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from csparql.deploy.history import text_owner
from csparql.deploy.plan import Deployment, deployment_of_query
from csparql.deploy.revisions import check_evaluation, detect_after_commits
from csparql.deploy.settings import Settings
from csparql.storage.revisions import table_version
from csparql.storage.stale_windows import StaleWindow
from csparql.storage.watermarks import inputs_complete_at

if TYPE_CHECKING:  # the engine loads Spark: a DAG file that imports this module must not
    from collections.abc import Generator

    from csparql.engine.runner import Engine, Evaluation, SparkStep


@dataclass(frozen=True)
class EvaluationRequest:
    """One window evaluation as each place that runs one takes it — the window task in a worker, the trigger
    on the triggerer, the spark-submit job: the query file, the name its results are written under, the
    settings to evaluate with, the Airflow connection of Spark, and, once a run knows them, the instant (µs)
    and whether the window is complete (None: unknown). ``to_dict`` and ``from_dict`` carry it to the
    triggerer in a trigger's arguments; ``csparql.orchestration.hooks.evaluation_submission`` hands it to
    spark-submit as the job's arguments."""

    query: str
    name: str
    settings: Settings
    conn_id: str | None = None
    at: int | None = None
    complete: bool | None = None

    @classmethod
    def of(cls, deployment: Deployment, settings: Settings, conn_id: str | None = None, at: int | None = None,
           complete: bool | None = None) -> EvaluationRequest:
        """The request to evaluate ``deployment``'s window with ``settings``."""
        return cls(str(deployment.path), deployment.name, settings, conn_id, at, complete)

    def to_dict(self) -> dict:
        """A JSON-ready form (the settings as ``Settings.option_values``) that ``from_dict`` reads back."""
        data = {"query": self.query, "name": self.name, "conn_id": self.conn_id,
                "settings": self.settings.option_values()}
        if self.at is not None:
            data["at"] = self.at
        if self.complete is not None:
            data["complete"] = self.complete
        return data

    @classmethod
    def from_dict(cls, data: dict, origin: str = "an evaluation request") -> EvaluationRequest:
        """The request ``to_dict`` gave; ``ValueError`` naming ``origin`` for settings that cannot be used."""
        return cls(data["query"], data["name"], Settings.from_option_values(data["settings"], origin=origin),
                   data.get("conn_id"), data.get("at"), data.get("complete"))

    def deployment(self, settings: Settings | None = None) -> Deployment:
        """The deployment of the query file as registered now, its results named ``name`` (``settings``: those
        to deploy with, by default the request's)."""
        path = Path(self.query)
        return deployment_of_query(path, settings or self.settings, None if path.stem == self.name else self.name)


@dataclass(frozen=True)
class WindowEvaluation:
    """What one evaluation of a deployment's window did: the engine's record (``evaluation``: the window, the
    rows written, the run id, the scans its lineage is made of), whether the window was recorded complete, the
    query version, and the stale windows the staleness check found and recorded (``stale``)."""

    query: str
    evaluation: Evaluation
    complete: bool | None
    query_version: str
    stale: tuple[StaleWindow, ...]

    @property
    def window_start(self) -> int | None:
        return self.evaluation.window.start

    @property
    def window_end(self) -> int:
        return self.evaluation.window.end

    def record(self) -> dict:
        """The evaluation as plain JSON values: the window (µs), rows written, run id, duration and where it went
        (``phases_ms``: whole milliseconds per ``csparql.engine.runner.Phases`` phase), completeness, query
        version, and the stale windows found (``stale``, each ``StaleWindow`` as a dict of its fields)."""
        return {"query": self.query, "window_start": self.window_start, "window_end": self.window_end,
                "rows_written": self.evaluation.rows_written, "run_id": self.evaluation.run_id,
                "duration_ms": self.evaluation.duration_ms,
                "phases_ms": {name: round(ms) for name, ms in self.evaluation.phases.items()},
                "complete": self.complete,
                "query_version": self.query_version, "stale": [dict(w.__dict__) for w in self.stale]}


def stale_windows_of(record: dict) -> list[StaleWindow]:
    """The stale windows of a ``WindowEvaluation.record()`` (as the spark-submit job prints it)."""
    return [StaleWindow(**window) for window in record.get("stale") or ()]


def evaluate_deployment_window(engine: Engine, deployment: Deployment, settings: Settings, at: int,
                               complete: bool | None) -> WindowEvaluation:
    """Evaluate the window of ``deployment`` at or before the instant ``at`` (µs) with ``engine`` — replacing
    its results, recording the run with ``complete`` (and, for a complete window, when the last of its inputs
    was committed), the query's version and pane mode, into result tables
    of its own text or of its earlier versions (``text_owner``) — then record the
    windows found stale by the check after every evaluation: by commits to the query's streams since it
    started, and, for a ``REGISTER STREAM`` query, the consumers' windows its output commit reaches.
    ``EvaluationFailed`` (the run recorded failed) when the evaluation fails; nothing is checked then."""
    from csparql.engine.runner import evaluated_alone

    return evaluated_alone(deployment_window_steps(engine, deployment, settings, at, complete))


def deployment_window_steps(engine: Engine, deployment: Deployment, settings: Settings, at: int,
                            complete: bool | None) -> Generator[SparkStep, tuple, WindowEvaluation]:
    """``evaluate_deployment_window`` as steps (``csparql.engine.runner.Engine.evaluation_steps``), so that
    its Spark part can run with other windows' (``csparql.engine.together``)."""
    output = settings.warehouse.stream(deployment.output_stream) if deployment.output_stream else None
    output_before = table_version(output) if output is not None else None
    started = time.time_ns() // 1000
    needs = deployment.requirements(at) if complete else None
    evaluation = yield from engine.evaluation_steps(
        deployment.plan, at, deployment.name, complete=complete, version=deployment.version,
        panes=deployment.panes, owner=text_owner(deployment.text, deployment.name, settings, registered=True),
        inputs_complete_at=inputs_complete_at(settings.warehouse, needs.streams,
                                              needs.producer_windows) if needs else None)
    stale = check_evaluation(settings, deployment, evaluation.window.end, started)
    if output_before is not None:
        stale += detect_after_commits(settings, deployment.output_stream, output_before)
    return WindowEvaluation(deployment.name, evaluation, complete, deployment.version, tuple(stale))


def task_value(record: dict, missing: list[str]) -> dict:
    """The value (XCom) of a window task, from a ``WindowEvaluation.record()``: the window, rows written, run
    id, completeness, query version and what was still missing when it was evaluated."""
    return {"window_end": record["window_end"], "window_start": record.get("window_start"),
            "rows_written": record.get("rows_written"), "run_id": record.get("run_id"),
            "complete": record.get("complete"), "query_version": record.get("query_version"), "missing": missing}


def describe(record: dict) -> str:
    """One line saying which window an evaluation (a ``WindowEvaluation.record()``) wrote, how many rows, how
    long it took and, when the record has them, its phases (e.g. ``(plan 150 ms, spark 270 ms, write 28 ms)``)."""
    from csparql.core.windows import format_instant

    start = record.get("window_start")
    took = f" in {record['duration_ms']} ms" if record.get("duration_ms") is not None else ""
    phases = record.get("phases_ms") or {}
    if took and phases:
        took += " (" + ", ".join(f"{name} {ms} ms" for name, ms in phases.items()) + ")"
    return (f"window ({format_instant(start) if start is not None else '-'}, {format_instant(record['window_end'])}]"
            f": {record.get('rows_written')} row(s) written{took}")

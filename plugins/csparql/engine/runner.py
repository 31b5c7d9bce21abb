"""Running registered queries: one evaluation per window, its results written, its run recorded.

``Engine.evaluate(plan, at)`` evaluates the windows that close at or before ``at`` (docs/semantics.md, *When a
query is evaluated*), writes the results, replacing any earlier results of the same (query, window end) in one
commit (*One result per window*), and
appends a row to the runs table — also when the evaluation fails, with the error. ``Engine.replay`` does
the same for every scheduled evaluation in a range, as a backfill would.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Generator, Iterator
from typing import TypeVar
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
from rdflib import URIRef

from csparql.core.algebra import operators as alg
from csparql.storage import result_rows as rt
from csparql.engine.catalog import Catalog, DeltaSourceReader, Scan
from csparql.engine.evaluate import CompiledEvaluation, compile_plan
from csparql.engine.panes import PaneComputer, PanesUnavailable, PaneUse, pane_ends
from csparql.engine.panes import pane_min_triples as pane_min_triples_setting
from csparql.core.frontend import compile_query
from csparql.core.optimizer import optimize
from csparql.core.panes import AUTO, OFF, PaneDecision, PanePlan, automatic_refusal, pane_mode, pane_plan
from csparql.runtime.session import retry_on_lost_session, session_lost
from csparql.spark.compiler import COMPACT_TRIPLES
from csparql.core.windows import parse_evaluation_instant
from csparql.core.schedule import EvaluationWindow, evaluation_at, previous_evaluation, scheduled_evaluations
from csparql.storage import delta, schema
from csparql.storage.instants import instant_of
from csparql.storage.results import STREAM, QueryResult, ResultTable, TextOwner
from csparql.storage import revisions as rv
from csparql.storage import stale_windows as sw
from csparql.storage.failures import NO_SPACE_LEFT, describe, first_line, no_space_left
from csparql.storage.tables import OUTPUT_PREDICATES, RUN_METADATA
from csparql.storage.running import running
from csparql.storage.watermarks import advance_watermark
from csparql.storage.warehouse import Warehouse, check_query_name, output_stream_iri

log = logging.getLogger(__name__)
T = TypeVar("T")


@dataclass
class Evaluation:
    """The outcome of one evaluation."""

    query: str
    window: EvaluationWindow
    result: QueryResult
    rows_written: int
    duration_ms: int
    run_id: str
    scans: dict[URIRef, Scan] = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # milliseconds per phase (``Phases``)
    panes: PaneUse | None = None  # how the window was combined from panes (None: recomputed)
    output_table: Path | None = None  # the Delta table the results went to (the output stream of REGISTER STREAM)
    output_version: int | None = None  # the version of the commit that wrote them
    revision: int | None = None  # which evaluation of its window this is, from 0 (None: nothing written)


@dataclass
class SparkStep:
    """The Spark part of one evaluation, as ``Engine.evaluation_steps`` hands it out. ``compiled``: the plan
    whose results are the evaluation's, when the window is recomputed from its streams (``scans``: what its
    reader read), which can run in one Spark job with other evaluations' (``csparql.engine.together``);
    None when the window comes from panes or could not be prepared. ``alone()``: the part run by itself,
    returning what the evaluation goes on with, ``(result, pane use, scans)``."""

    compiled: CompiledEvaluation | None
    scans: dict
    phases: Phases
    alone: Callable[[], tuple]


def evaluated_alone(steps: Generator[SparkStep, tuple, T]) -> T:
    """Drive an evaluation's steps (``Engine.evaluation_steps`` and the generators built on it), each Spark
    step run by itself; what the steps return. An error of a step is thrown into the steps."""
    try:
        step = next(steps)
        while True:
            try:
                outcome = step.alone()
            except Exception as error:  # noqa: BLE001 - the evaluation's failure, recorded by the steps
                step = steps.throw(error)
            else:
                step = steps.send(outcome)
    except StopIteration as done:
        return done.value


class Phases:
    """Where one evaluation's time goes, in wall-clock milliseconds per phase: ``lost runs`` (recording runs
    lost by a killed process), ``statistics``, ``sources`` (Delta logs read, files pruned), ``plan`` (optimizer
    and the Spark plan built), ``panes`` (a window computed from panes: its missing panes computed and stored),
    ``spark`` (Spark plans, runs and collects the results), ``write`` (the result commit), ``record`` (the runs
    commit)."""

    def __init__(self) -> None:
        self.ms: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str) -> Iterator[None]:
        clock = time.perf_counter()
        try:
            yield
        finally:
            self.ms[name] = self.ms.get(name, 0.0) + (time.perf_counter() - clock) * 1000


@dataclass
class _Optimized:
    """One query plan as ``OptimizedPlans`` keeps it: the statistics it was optimized with, the optimized plan
    and, once asked, its pane decision."""

    plan: alg.QueryPlan
    statistics: object
    optimized: alg.QueryPlan
    decision: PaneDecision | None = None


class OptimizedPlans:
    """The plans an engine optimized, the latest of each query plan, with their pane decisions: an evaluation
    whose sources' statistics equal the previous evaluation's of the same plan reuses its optimized plan and
    its pane decision (for a small window optimizing costs as much as Spark's part), and one whose statistics
    differ but whose plan optimizes to the same plan reuses the pane decision. The ``capacity`` most recently
    used plans are kept. Evaluations in several threads may share it."""

    def __init__(self, capacity: int = 256) -> None:
        self.capacity = capacity
        self._latest: OrderedDict[int, _Optimized] = OrderedDict()
        self._lock = threading.RLock()

    def optimized(self, plan: alg.QueryPlan, statistics) -> alg.QueryPlan:
        """``optimize(plan, statistics)``, or the plan optimized last time for this plan object when it was
        optimized with equal statistics."""
        with self._lock:
            kept = self._latest.get(id(plan))
            if kept is not None and kept.plan is plan and kept.statistics == statistics:
                self._latest.move_to_end(id(plan))
                return kept.optimized
            optimized = optimize(plan, statistics)
            if kept is not None and kept.plan is plan and kept.optimized == optimized:
                # other statistics, the same optimized plan: it keeps its pane decision
                self._latest[id(plan)] = _Optimized(plan, statistics, kept.optimized, kept.decision)
                optimized = kept.optimized
            else:
                self._latest[id(plan)] = _Optimized(plan, statistics, optimized)
            self._latest.move_to_end(id(plan))
            while len(self._latest) > self.capacity:
                self._latest.popitem(last=False)
            return optimized

    def pane_decision(self, plan: alg.QueryPlan, optimized: alg.QueryPlan) -> PaneDecision:
        """``pane_plan(optimized)``, decided once per optimized plan kept for ``plan``."""
        with self._lock:
            kept = self._latest.get(id(plan))
            if kept is None or kept.plan is not plan or kept.optimized is not optimized:
                return pane_plan(optimized)
            if kept.decision is None:
                kept.decision = pane_plan(optimized)
            return kept.decision


class PreparedPlan:
    """What one evaluation plans with, each made at most once and only when asked: the statistics of the
    plan's sources (``statistics``), the plan optimized with them (``optimized``, from the engine's
    ``OptimizedPlans``), which the pane decision and the Spark plan both take, and its pane decision
    (``pane_decision``)."""

    def __init__(self, catalog: Catalog, plans: OptimizedPlans, plan: alg.QueryPlan, phases: Phases) -> None:
        self.catalog, self.plans, self.plan, self.phases = catalog, plans, plan, phases

    @functools.cached_property
    def statistics(self):
        with self.phases("statistics"):
            return self.catalog.statistics(self.plan)

    @functools.cached_property
    def optimized(self) -> alg.QueryPlan:
        statistics = self.statistics
        with self.phases("plan"):
            return self.plans.optimized(self.plan, statistics)

    @functools.cached_property
    def pane_decision(self) -> PaneDecision:
        optimized = self.optimized
        with self.phases("plan"):
            return self.plans.pane_decision(self.plan, optimized)


class EvaluationFailed(Exception):
    """An evaluation failed; the runs table has a row saying so."""


@dataclass
class RunRecord:
    """One evaluation as the runs table records it (``schema.RUNS``); instants and durations in µs / ms."""

    run_id: str
    query: str
    window_start: int | None
    window_end: int
    started_at: int
    complete: bool | None
    query_version: str | None
    status: str = "running"
    error: str | None = None
    triples_read: dict[str, int] = field(default_factory=dict)
    files_read: dict[str, int] = field(default_factory=dict)
    rows_written: int = 0
    duration_ms: int = 0
    revision: int = 0  # 0 the window's first evaluation, then one more per evaluation (csparql.storage.revisions)
    result_version: int | None = None  # the result table's version the evaluation committed
    inputs_complete_at: int | None = None  # when the last of the window's inputs was committed (µs)

    def read(self, scans: dict[URIRef, Scan]) -> None:
        """Take the I/O of the evaluation's reads (stream IRI → ``Scan``)."""
        self.triples_read = {str(k): v.rows for k, v in scans.items()}
        self.files_read = {str(k): v.files for k, v in scans.items()}

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> RunRecord:
        return cls(**json.loads(text))

    def row(self) -> dict:
        """The row of the runs table."""
        return {
            "run_id": self.run_id,
            "query": self.query,
            "window_start": instant_of(self.window_start),
            "window_end": instant_of(self.window_end),
            "started_at": instant_of(self.started_at),
            "status": self.status,
            "error": self.error,
            "triples_read": json.dumps(self.triples_read),
            "files_read": json.dumps(self.files_read),
            "rows_written": self.rows_written,
            "duration_ms": self.duration_ms,
            "complete": self.complete,
            "query_version": self.query_version,
            "revision": self.revision,
            "result_version": self.result_version,
            "inputs_complete_at": instant_of(self.inputs_complete_at),
        }


class Engine:
    """Evaluates plans over a warehouse with one SparkSession (created on first use)."""

    def __init__(self, warehouse: Warehouse, spark=None, master: str | None = None,
                 compact_triples: int = COMPACT_TRIPLES, pane_min_triples: int | None = None):
        """``compact_triples``: evaluations whose windows' files hold at most this many triples run in one
        partition (``csparql.engine.evaluate.is_compact``); 0 never does. ``pane_min_triples``: windows whose
        files hold fewer triples are recomputed in the ``AUTO`` pane mode (None:
        ``csparql.engine.panes.pane_min_triples()``, ``CSPARQL_PANES_MIN_TRIPLES``)."""
        self.warehouse = warehouse
        self.catalog = Catalog(warehouse)
        self._spark = spark
        self.master = master
        self.compact_triples = compact_triples
        self.pane_min_triples = pane_min_triples_setting() if pane_min_triples is None else pane_min_triples
        self.plans = OptimizedPlans()

    @property
    def spark(self):
        """The session evaluations run with: the one given, else the process's (``spark_session``); a new one
        on the same Spark Connect server once the server lost it (``csparql.runtime.session.session_in_use``)."""
        from csparql.runtime.session import session_in_use

        self._spark = session_in_use(self._spark, self.master)
        return self._spark

    # evaluating

    def compile(self, plan: alg.QueryPlan, window: EvaluationWindow, phases: Phases | None = None,
                prepared: PreparedPlan | None = None) -> tuple[CompiledEvaluation, DeltaSourceReader]:
        """The Spark plan of one evaluation, over exactly the files of its windows (and, for ISTREAM and
        DSTREAM, of the previous evaluation's windows too: its scans count in the returned reader's).
        ``prepared``: the evaluation's statistics and optimized plan, when it has them already."""
        phases = phases or Phases()
        prepared = prepared or PreparedPlan(self.catalog, self.plans, plan, phases)
        statistics = prepared.statistics
        with phases("sources"):
            reader = DeltaSourceReader(self.spark, self.catalog, window.windows)
            reader.prepare(plan)
            previous = None
            if plan.stream_operator != alg.RSTREAM:
                before = previous_evaluation(plan, window)
                previous = (DeltaSourceReader(self.spark, self.catalog, before.windows), before.end)
                previous[0].prepare(plan)
        # under entailment compile_plan optimizes it, with the entailed graph's statistics
        optimized = plan if plan.entailment else prepared.optimized
        with phases("plan"):
            compiled = compile_plan(self.spark, optimized, reader, at=window.end, statistics=statistics,
                                    optimized=not plan.entailment, previous=previous,
                                    compact_triples=self.compact_triples)
        if previous is not None:
            for iri, scan in previous[0].scans.items():
                total = reader.scans.setdefault(iri, Scan())
                total.files += scan.files
                total.rows += scan.rows
                total.file_uris.extend(scan.file_uris)
        return compiled, reader

    def pane_computer(self, plan: alg.QueryPlan, name: str, phases: Phases | None = None,
                      window: EvaluationWindow | None = None, mode: str = AUTO,
                      prepared: PreparedPlan | None = None) -> PaneComputer | None:
        """What computes the query's windows from panes (``csparql.engine.panes``), or None when they are
        recomputed: ``mode`` is ``OFF``, the query does not allow it (``csparql.core.panes.pane_plan`` says
        why), or, in ``AUTO``, its partials are keyed (``automatic_refusal``) or ``window``'s stream files hold
        fewer than ``pane_min_triples`` triples."""
        phases = phases or Phases()
        if pane_mode(mode) == OFF or plan.stream_operator != alg.RSTREAM or not plan.streams:
            return None
        prepared = prepared or PreparedPlan(self.catalog, self.plans, plan, phases)
        statistics, optimized, decision = prepared.statistics, prepared.optimized, prepared.pane_decision
        if not isinstance(decision, PanePlan):
            return None
        automatic = pane_mode(mode) == AUTO
        if automatic and automatic_refusal(decision) is not None:
            return None
        with phases("sources"):
            computer = PaneComputer(self.spark, self.catalog, name, optimized, decision, statistics,
                                    self.compact_triples)
            if automatic and window is not None and self.pane_min_triples > 0:
                triples = computer.window_triples(computer.window_bounds(window.streams))
                if triples is not None and triples < self.pane_min_triples:
                    return None
            return computer

    def evaluate(self, plan: alg.QueryPlan, at: int, name: str, write: bool = True, complete: bool | None = None,
                 version: str | None = None, panes: str = AUTO, owner: TextOwner | None = None,
                 inputs_complete_at: int | None = None) -> Evaluation:
        """Evaluate the query at instant ``at``; write its results and record the run. ``version`` (the
        version of the query text, ``csparql.deploy.history.text_version``) is recorded with the run and the
        result rows. ``panes``: whether the window is combined from stored panes (``csparql.engine.panes``):
        ``AUTO`` where that is expected to cost less, ``ALWAYS`` whenever the query allows it, ``OFF`` never
        (the window recomputed from its whole range, the reference; ``csparql.core.panes.PANE_MODES``). ``owner``:
        the query text evaluated, recorded on a result table it creates; a table created for another text
        that is not an earlier version of it is not written (``csparql.storage.results.QueryTextCollision``).
        ``inputs_complete_at``: when the last of the window's inputs was committed, recorded with the run.

        Writing first records the runs of earlier evaluations of the query whose process died between their
        result commit and their runs commit (``record_lost_runs``), so live results always have their run.
        The evaluation is recorded as running while it runs (``csparql.storage.running``), so that a vacuum
        with a short retention does not delete the files it reads."""
        return evaluated_alone(self.evaluation_steps(plan, at, name, write, complete, version, panes, owner,
                                                     inputs_complete_at))

    def evaluation_steps(self, plan: alg.QueryPlan, at: int, name: str, write: bool = True,
                         complete: bool | None = None, version: str | None = None, panes: str = AUTO,
                         owner: TextOwner | None = None,
                         inputs_complete_at: int | None = None) -> Generator[SparkStep, tuple, Evaluation]:
        """``evaluate``, as a generator that hands out its Spark part: it yields one ``SparkStep`` and goes on
        with what is sent back (the step's ``alone()``, or its compiled plan's results computed with other
        evaluations' by ``csparql.engine.together``); an error thrown in is the evaluation's failure. It
        returns the ``Evaluation``."""
        check_query_name(name)
        with running(self.warehouse, uuid.uuid4().hex, name, at):
            window = evaluation_at(plan, at)
            clock = time.perf_counter()
            phases = Phases()
            run = RunRecord(uuid.uuid4().hex, name, window.start, window.end, time.time_ns() // 1000, complete,
                            version, inputs_complete_at=inputs_complete_at)
            scans: dict[URIRef, Scan] = {}
            use = None
            try:
                self.catalog.check_tables(plan)  # a table csparql cannot read: refused before Spark starts
                if write:
                    with phases("lost runs"):
                        self.record_lost_runs(plan, name)
                        # a failed run's; the run that commits results takes its number on the commit's version
                        run.revision = rv.next_revision(self.warehouse, name, window.end)
                prepared = PreparedPlan(self.catalog, self.plans, plan, phases)
                result, use, scans = yield self._spark_step(plan, name, window, phases, panes, prepared, run)
                run.read(scans)
                if write:
                    with phases("write"):
                        rows = self._write(plan, name, window, result, version, run, clock, owner)
                else:
                    rows = 0
            except Exception as error:
                run.status, run.error = "failed", _describe(error)
                run.duration_ms = _elapsed_ms(clock)
                if write:
                    self._append_runs([run])
                raise EvaluationFailed(
                    f"{name}: the evaluation of the window ending {_iso(window.end)} failed: {run.error}") from error
            run.duration_ms = _elapsed_ms(clock)
            if write:
                with phases("record"):
                    self._append_runs([run])
            output = self._result_table(plan, name) if write else None
            return Evaluation(name, window, result, rows, run.duration_ms, run.run_id, dict(scans), phases.ms, use,
                              output, run.result_version, run.revision if write else None)

    def _spark_step(self, plan: alg.QueryPlan, name: str, window: EvaluationWindow, phases: Phases, panes: str,
                    prepared: PreparedPlan, run: RunRecord) -> SparkStep:
        """The evaluation's Spark part: its window from panes when they serve it, else its compiled plan
        (which ``csparql.engine.together`` may run with others'); alone, run again on a new session when the
        Connect server lost it."""

        def compute(computer: PaneComputer | None, compiled=None):
            if computer is not None:
                try:
                    result, use, scans = computer.evaluate(computer.window_bounds(window.streams), window.end, phases)
                    run.read(scans)
                    return result, use, scans
                except PanesUnavailable as error:
                    log.warning("%s: the window ending %s is recomputed from its streams: %s", name,
                                _iso(window.end), error)
            evaluation, reader = compiled or self.compile(plan, window, phases, prepared)
            run.read(reader.scans)
            with phases("spark"):
                return evaluation.result(), None, reader.scans

        first: list[tuple] = []
        try:  # what the first attempt takes; when it cannot be had here, the attempts make it
            computer = self.pane_computer(plan, name, phases, window, panes, prepared)
            first.append((computer, None if computer is not None else self.compile(plan, window, phases, prepared)))
        except Exception as error:
            if not session_lost(error):  # the evaluation's failure, as it would be in its attempts
                raise
            log.debug("%s: the window ending %s is prepared again on a new session: %s", name, _iso(window.end),
                      error)

        def attempt():
            return compute(*first.pop()) if first else compute(self.pane_computer(plan, name, phases, window,
                                                                                  panes, prepared))

        alone = functools.partial(retry_on_lost_session, attempt, lambda: self._spark,
                                  what=f"{name}'s window ending {_iso(window.end)}")
        compiled = first[0][1] if first and first[0][1] is not None else None
        return SparkStep(compiled[0] if compiled else None, compiled[1].scans if compiled else {}, phases, alone)

    def replay(self, plan: alg.QueryPlan, start: int, end: int, name: str, write: bool = True,
               version: str | None = None, panes: str = AUTO,
               owner: TextOwner | None = None) -> Iterator[Evaluation]:
        """Evaluate every scheduled evaluation with its instant in [start, end], in order. A query whose
        windows combine from panes first computes the missing panes of all of them, in one Spark job."""
        windows = scheduled_evaluations(plan, start, end)
        computer = self.pane_computer(plan, name, window=windows[-1], mode=panes) if windows else None
        if computer is not None:
            try:
                computer.ensure(end for window in windows
                                for end in pane_ends(computer.window_bounds(window.streams), computer.pane))
            except PanesUnavailable as error:  # each window tries its own panes again
                log.warning("%s: the panes of the replay could not be computed ahead: %s", name, error)
        for window in windows:
            yield self.evaluate(plan, window.at, name, write=write, version=version, panes=panes, owner=owner)

    # recording runs

    def record_lost_runs(self, plan: alg.QueryPlan, name: str) -> list[RunRecord]:
        """Append to the runs table the runs of the query's latest result commits
        (``csparql.storage.revisions.RESULT_HISTORY_LOOKBACK``) that it lacks — evaluations whose process died
        after their result commit —, each with the version of the commit that carries it (``result_version``:
        where ``csparql results --revision`` reads it), and, for a REGISTER STREAM query, the statistics and
        watermark such a run did not record either. Returns the runs recorded."""
        path = self._result_table(plan, name)
        if path is None or not delta.exists(path):
            return []
        runs: dict[str, tuple[RunRecord, dict]] = {}
        for commit in delta.SNAPSHOTS.latest(path).history(rv.RESULT_HISTORY_LOOKBACK):
            if RUN_METADATA not in commit or int(commit.get("version", -1)) < 0:
                continue
            run = RunRecord.from_json(commit[RUN_METADATA])
            if run.query == name and run.run_id not in runs:
                run.result_version = int(commit["version"])
                runs[run.run_id] = (run, commit)
        if not runs:
            return []
        missing = [runs[run_id][0] for run_id in sorted(set(runs) - recorded_runs(self.warehouse, set(runs)))]
        lost = self._append_runs(missing) if missing else []
        for run in lost:
            commit = runs[run.run_id][1]
            if OUTPUT_PREDICATES in commit:
                stream = str(output_stream_iri(plan.registration.name))
                self.catalog.record_statistics(stream, "stream", json.loads(commit[OUTPUT_PREDICATES]), replaces=False)
                advance_watermark(self.warehouse, stream, run.window_end, f"evaluation of {name}")
        return lost

    def _append_runs(self, runs: list[RunRecord]) -> list[RunRecord]:
        """Append the runs the runs table does not hold yet in one commit, and return them. The check and the
        commit are on one version (``delta.write_on_version``), so a run is recorded once even when its own
        process and another's next evaluation, which takes it for lost, record it at the same time."""
        appended: list[RunRecord] = []

        def build(table) -> delta.Write | None:
            present = recorded_runs(self.warehouse, {run.run_id for run in runs}, table)
            appended[:] = [run for run in runs if run.run_id not in present]
            if not appended:
                return None
            # merge: a runs table written before a column was added gains it (its older rows read null)
            return delta.Write(pa.Table.from_pylist([run.row() for run in appended], schema=schema.RUNS),
                               merge_schema=True)

        delta.write_on_version(self.warehouse.runs, schema.RUNS, build, "recording runs")
        delta.compact_record_table(self.warehouse.runs)
        return appended

    # writing

    def _result_table(self, plan: alg.QueryPlan, name: str) -> Path:
        return result_table(self.warehouse, plan, name)

    def _write(self, plan: alg.QueryPlan, name: str, window: EvaluationWindow, result: QueryResult,
               version: str | None, run: RunRecord, clock: float, owner: TextOwner | None = None) -> int:
        """Write the results to the query's result table (``ResultTable.write_window``: the window replaced in
        one commit, numbered with its next revision) in one commit that also carries ``run``, completed
        (``RUN_METADATA``). ``run`` itself says it succeeded, how many rows it wrote and the version committed
        only once that commit is made: a write that fails leaves it with no rows written."""
        table = ResultTable.of_plan(self.warehouse, plan, name, result.vars, owner)
        extra: dict[str, str] = {}
        if table.kind == STREAM:
            counts = rt.predicate_counts(result.terms)
            # Readers of the stream that evaluated this window before (a revision) must see it changed, even when
            # it is now empty: its end is the event time of what was replaced.
            extra = {OUTPUT_PREDICATES: json.dumps(counts, sort_keys=True),
                     sw.EVENT_TIMES: sw.encode_event_times(((window.end, max(len(result), 1)),))}
        completed: list[RunRecord] = []  # the run as the commit being tried records it

        def commit_metadata(revision: int, rows: pa.Table) -> dict[str, str]:
            run.revision = revision
            completed[:] = [dataclasses.replace(run, status="succeeded", rows_written=rows.num_rows,
                                                duration_ms=_elapsed_ms(clock))]
            return {RUN_METADATA: completed[0].to_json(), **extra}

        rows = functools.partial(rt.RESULT_WRITERS[table.kind], result, window.start, window.end, version)
        committed = table.write_window(window.end, rows, commit_metadata)
        run.status, run.rows_written, run.duration_ms = "succeeded", committed.rows, completed[0].duration_ms
        run.result_version = committed.version
        if table.kind == STREAM:
            self.catalog.record_statistics(table.stream, "stream", counts, replaces=False)
            # The producer wrote this window: readers of the stream may evaluate windows up to its end.
            advance_watermark(self.warehouse, table.stream, window.end, f"evaluation of {name}")
        return committed.rows


def evaluate(query: str | alg.QueryPlan, at: int | str, warehouse: Warehouse | str | None = None, *,
             name: str | None = None, write: bool = False, spark=None) -> Evaluation:
    """Evaluates one window of a query, as ``csparql run`` does: the window that closes at or before ``at``.

    Args:
        query: the query's text (C-SPARQL or RSP-QL) or its plan (``csparql.compile_query``).
        at: the evaluation instant: microseconds since the epoch, or an ISO 8601 instant with a zone.
        warehouse: the warehouse (a ``Warehouse``, a folder or an ``s3://`` URI); by default
            ``$CSPARQL_WAREHOUSE``, else ``delta_tables/`` in the working directory.
        name: the name its results are written under; by default the query's REGISTER name, else ``query``.
        write: whether the results replace the window's results in the query's result table and the run is
            recorded; by default nothing is written.
        spark: the SparkSession to evaluate on; by default the process's (``CSPARQL_SPARK_MASTER``,
            ``SPARK_REMOTE``, else a local one).

    Returns:
        The ``Evaluation``: its window, its ``result`` (``QueryResult.rows`` or ``triples``) and its timings.

    Raises:
        csparql.core.language.errors.QueryError: the text is not a valid query (its message says what and where).
        ValueError: ``at`` is not an instant csparql evaluates, or ``name`` is not a valid name.

    Example:
        >>> import csparql
        >>> evaluation = csparql.evaluate(open("tollgates.rq").read(), "2010-03-22T10:10:00Z")  # doctest: +SKIP
        >>> evaluation.result.rows[:3]  # doctest: +SKIP
    """
    plan = compile_query(query) if isinstance(query, str) else query
    instant = parse_evaluation_instant(at) if isinstance(at, str) else at
    where = warehouse if isinstance(warehouse, Warehouse) else Warehouse.locate(warehouse)
    name = check_query_name(name or (plan.registration.name if plan.registration else "query"))
    if write:
        where.check_new_results(name)
    return Engine(where, spark=spark).evaluate(plan, instant, name, write=write)


def result_table(warehouse: Warehouse, plan: alg.QueryPlan, name: str) -> Path:
    """The table the results of ``plan`` evaluated as ``name`` go to: the output stream of a ``REGISTER
    STREAM`` query, else the query's result table of its form (bindings, answers or triples)."""
    return ResultTable.of_plan(warehouse, plan, name).path


def recorded_runs(warehouse: Warehouse, run_ids: set[str], runs_table=None) -> set[str]:
    """Which of these runs the runs table (its latest version, or ``runs_table``: a ``DeltaTable`` of it) has a
    row for."""
    if not run_ids or (runs_table is None and not delta.exists(warehouse.runs)):
        return set()
    runs = delta.SNAPSHOTS.rows(warehouse.runs, schema.RUNS, runs_table)
    found = runs.column("run_id").filter(pc.is_in(runs.column("run_id"), pa.array(sorted(run_ids), pa.string())))
    return set(found.to_pylist())


def _elapsed_ms(clock: float) -> int:
    return int((time.perf_counter() - clock) * 1000)


def _describe(error: Exception) -> str:
    """The error of a failed run, in one line: a storage failure's or a refused table's own message (it names
    the table), a full disk as such, a data file found missing as its table, the files and ``csparql repair``,
    anything else as ``csparql.storage.failures.describe`` says (a Spark Connect failure by its gRPC status and details)."""
    if isinstance(error, (delta.StorageError, delta.TableFeatureError)):  # both name the table
        return first_line(error)[:1000]
    if no_space_left(error):
        return NO_SPACE_LEFT
    lost = delta.missing_in(error)  # a data file a table references deleted under the evaluation (Spark's read)
    if lost is not None:
        return str(lost)[:1000]
    return describe(error)[:1000]


def _iso(micros: int) -> str:
    from csparql.core.windows import format_instant

    return format_instant(micros)

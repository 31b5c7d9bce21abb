"""The systems measured side by side, each evaluating one window of one workload.

Every system has ``prepare(point)`` (untimed: files it needs, e.g. the exported window) and ``run(point)``
(timed: everything from the files to the answer in the driver), then ``answer(raw)`` (untimed: the raw
result as a canonical multiset, to check that all systems computed the same thing).

| system | what is timed |
|---|---|
| ``csparql_warm`` | ``Engine.evaluate(plan, at, write=False, panes="off")`` on the run's one SparkSession: Delta log, file pruning, optimizer, compiler, Spark, results collected (the window recomputed from its whole range: the reference of the pane path) |
| ``csparql_panes`` | the pane path in a live schedule's steady state: with a fresh pane store, ``Engine.evaluate(..., panes="always")`` of the consecutive windows of the last ``windows`` STEPs up to ``at``, each timed; the figure is the median window after the first (which computes all its panes), each of those computing one new pane |
| ``csparql_panes_replay`` | ``Engine.replay(..., panes="always")`` over the same windows with a fresh pane store (their missing panes in one Spark job, then each window combined); the figure is the total ÷ the windows |
| ``csparql_cold`` | one ``spark-submit`` of the packaged job ``csparql/jobs/evaluate_window.py`` (a new JVM and SparkSession), which also writes the window's results and run |
| ``spark_hand`` | a hand-written DataFrame plan over the same Parquet files, results collected through Arrow |
| ``duckdb`` | a hand-written SQL query over the same Parquet files (one connection per run, as cold as it gets for DuckDB) |
| ``pyoxigraph`` | a new in-memory store, ``bulk_load`` of the exported window + static graph, the SPARQL 1.1 query, results materialised |
| ``rdflib`` | a new ``Dataset``, parsing the exported window + static graph, the SPARQL 1.1 query, results materialised |
| ``csparql_filter`` | ``Engine.evaluate`` of The social-data paper's alternative: the whole stored stream with a FILTER on the timestamp |
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from benchmarks.data import Dataset
from benchmarks.measure import JvmHeap
from benchmarks.workloads import Answer, WindowFiles, Workload, answer_of_rows, answer_of_triples, export_dataset
from csparql.core.frontend import compile_query
from csparql.core.panes import ALWAYS, OFF
from csparql.jobs import job_path

EVALUATE_WINDOW = job_path()
RESULT_PREFIX = "CSPARQL_RESULT "


@dataclass
class Point:
    """One evaluation measured by every system: a workload over a data set at one instant."""

    sweep: str
    workload: Workload
    dataset: Dataset
    at: int
    work: Path  # a folder of its own for exported files and query files
    label: dict = field(default_factory=dict)  # the sweep's coordinates (size, history, ratio)
    _plan: object = None
    _window: WindowFiles | None = None

    @property
    def plan(self):
        if self._plan is None:
            self._plan = compile_query(self.workload.cquery, f"{self.workload.name}.rq")
        return self._plan

    @property
    def window(self) -> WindowFiles:
        if self._window is None:
            from benchmarks.workloads import window_files

            self._window = window_files(self.plan, self.dataset.warehouse, self.at)
        return self._window

    @property
    def window_triples(self) -> int:
        """Triples the window's files hold (before the window's own selection)."""
        return self.dataset.size


class System:
    """One system (see the module docstring)."""

    name = ""
    label = ""
    spark = False  # uses the run's Spark driver (its memory includes the JVM)

    def prepare(self, point: Point) -> None:
        pass

    def run(self, point: Point):
        raise NotImplementedError

    def answer(self, point: Point, raw) -> Answer:
        raise NotImplementedError

    def figures(self, raw) -> dict:
        """Figures of one repetition beyond its wall-clock time; a ``seconds`` here is the repetition's figure
        in place of that time (the time of the whole ``run`` is then kept as ``total_seconds``)."""
        return {}

    def processes(self) -> list[psutil.Process]:
        """The processes whose memory counts for this system."""
        return [psutil.Process()]

    def children(self) -> bool:
        """Whether the processes' children count too (the Spark driver's JVM is a child of this process)."""
        return self.spark


def _result_answer(workload: Workload, result) -> Answer:
    if result.form == "select":
        return answer_of_rows(result.rows)
    return answer_of_triples(result.triples)


class CsparqlWarm(System):
    name, label, spark = "csparql_warm", "csparql (warm)", True

    def __init__(self, spark_session):
        from csparql.engine.runner import Engine

        self.spark_session = spark_session
        self._engines: dict[Path, Engine] = {}
        self.heap = JvmHeap(spark_session)

    def engine(self, dataset: Dataset):
        from csparql.engine.runner import Engine

        root = dataset.warehouse.root
        if root not in self._engines:
            self._engines[root] = Engine(dataset.warehouse, self.spark_session)
        return self._engines[root]

    def plan_of(self, point: Point):
        return point.plan

    def run(self, point: Point):
        return self.engine(point.dataset).evaluate(self.plan_of(point), point.at, f"bench_{point.workload.name}",
                                                   write=False, panes=OFF).result

    def answer(self, point: Point, raw) -> Answer:
        return _result_answer(point.workload, raw)

    def explain(self, point: Point) -> str:
        """The executed physical plan of the compiled evaluation (for the report's "why")."""
        plan = self.plan_of(point)
        compiled, _ = self.engine(point.dataset).compile(plan, _evaluation(plan, point.at))
        return _executed_plan(compiled.df)


class CsparqlFilter(CsparqlWarm):
    """the FILTER approach of the social-data paper on the same engine: the whole stored stream, a FILTER on the timestamp."""

    name, label = "csparql_filter", "FILTER over the stored stream (social-data paper)"

    def plan_of(self, point: Point):
        from benchmarks.workloads import topic_filter_query

        key = ("filter", point.at, point.dataset.warehouse.root)
        cache = point.label.setdefault("_filter_plans", {})
        if key not in cache:
            cache[key] = compile_query(topic_filter_query(point.window), "filter.rq")
        return cache[key]


@dataclass
class PaneSchedule:
    """What one repetition of a pane system evaluated: each window's instant, result, time (seconds), phases
    (ms, ``Evaluation.phases``) and pane use (``Evaluation.panes``: None when the window was recomputed)."""

    instants: list[int]
    results: list
    seconds: list[float]
    phases: list[dict]
    uses: list
    panes_job_seconds: float | None = None  # a replay: computing the missing panes of all its windows
    total_seconds: float | None = None  # a replay: from its start to its last window's result
    stored: dict = field(default_factory=dict)  # what the pane store held at the end (``stored_panes``)


class CsparqlPanes(CsparqlWarm):
    """The pane path in a live schedule's steady state (see the module docstring). A query the pane planner
    declines (``pane_plan`` says ``Recompute``, e.g. tumbling windows) is measured on its one window at ``at``
    through the same default path, which then recomputes: the cost of panes being on where they do not apply."""

    name, label = "csparql_panes", "csparql panes (live)"

    def __init__(self, spark_session, windows: int):
        """``windows``: the windows after the first one of a schedule (at most RANGE/STEP)."""
        super().__init__(spark_session)
        self.windows = windows
        self._names = 0

    def decision(self, point: Point):
        """The query's ``pane_plan`` (a ``PanePlan``, or ``Recompute`` with the reason)."""
        from csparql.core.optimizer import optimize
        from csparql.core.panes import pane_plan

        engine = self.engine(point.dataset)
        return pane_plan(optimize(point.plan, engine.catalog.statistics()))

    def instants(self, point: Point) -> list[int]:
        """The schedule's instants: ``at`` and the ``windows`` STEPs before it (only ``at`` without panes)."""
        from csparql.core.panes import PanePlan

        if not isinstance(self.decision(point), PanePlan):
            return [point.at]
        window = point.plan.streams[0].window
        count = min(self.windows, window.range // window.step)
        return [point.at - k * window.step for k in range(count, -1, -1)]

    def fresh_name(self, point: Point) -> str:
        """A query name whose pane store is empty (the previous repetition's is removed)."""
        engine = self.engine(point.dataset)
        if self._names:
            shutil.rmtree(engine.warehouse.panes(f"bench_panes_{self._names}"), ignore_errors=True)
        self._names += 1
        name = f"bench_panes_{self._names}"
        shutil.rmtree(engine.warehouse.panes(name), ignore_errors=True)
        return name

    def run(self, point: Point) -> PaneSchedule:
        engine = self.engine(point.dataset)
        name = self.fresh_name(point)
        schedule = PaneSchedule([], [], [], [], [])
        for at in self.instants(point):
            clock = time.perf_counter()
            evaluation = engine.evaluate(point.plan, at, name, write=False, panes=ALWAYS)
            schedule.seconds.append(time.perf_counter() - clock)
            self._keep(schedule, at, evaluation)
        schedule.stored = stored_panes(engine, name)
        return schedule

    @staticmethod
    def _keep(schedule: PaneSchedule, at: int, evaluation) -> None:
        schedule.instants.append(at)
        schedule.results.append(evaluation.result)
        schedule.phases.append(dict(evaluation.phases))
        schedule.uses.append(evaluation.panes)

    def figures(self, schedule: PaneSchedule) -> dict:
        """The repetition's figures: ``seconds`` the median window after the first (the only window when
        panes are not used), with every window's time, the panes each computed and the median phases."""
        from benchmarks.measure import median

        steady = schedule.seconds[1:] or schedule.seconds
        phases = sorted({phase for p in schedule.phases[1:] or schedule.phases for phase in p})
        return {
            "seconds": median(steady),
            "window_seconds": schedule.seconds,
            "first_window_seconds": schedule.seconds[0],
            "windows": len(schedule.seconds),
            "panes_used": schedule.uses[-1] is not None,
            "panes_computed": [use.computed if use is not None else None for use in schedule.uses],
            "window_panes": schedule.uses[-1].panes if schedule.uses[-1] is not None else None,
            **schedule.stored,
            "median_phases_ms": {phase: median([p.get(phase, 0.0) for p in schedule.phases[1:] or schedule.phases])
                                 for phase in phases},
        }

    def answer(self, point: Point, raw: PaneSchedule) -> Answer:
        """The answer at ``at`` (the last window); every window's pane result is first compared with the
        recompute's of the same window (``point.label["_pane_checks"]``)."""
        from benchmarks.workloads import agree

        engine = self.engine(point.dataset)
        recomputed = point.label.setdefault("_recomputed", {})
        differing = []
        for at, result in zip(raw.instants, raw.results):
            if at not in recomputed:
                recomputed[at] = _result_answer(point.workload, engine.evaluate(
                    point.plan, at, f"bench_{point.workload.name}", write=False, panes=OFF).result)
            if not agree(_result_answer(point.workload, result), recomputed[at], point.workload.tolerance):
                differing.append(at)
        point.label.setdefault("_pane_checks", {})[self.name] = (len(raw.instants), differing)
        return _result_answer(point.workload, raw.results[-1])


def stored_panes(engine, name: str) -> dict:
    """What a query's pane store holds (untimed, after the schedule): ``stored_panes`` (markers) and
    ``stored_pane_rows`` (partial rows), for the rows a window combines."""
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    folder = engine.warehouse.panes(name)
    panes = rows = 0
    for table in (folder.iterdir() if folder.exists() else ()):
        markers = DeltaTable(str(table)).to_pyarrow_table(columns=["marker"]).column("marker")
        panes += pc.sum(markers).as_py() or 0
        rows += len(markers) - (pc.sum(markers).as_py() or 0)
    return {"stored_panes": panes, "stored_pane_rows": rows}


class CsparqlPanesReplay(CsparqlPanes):
    """``Engine.replay`` over the live schedule's windows, with a fresh pane store (see the module docstring)."""

    name, label = "csparql_panes_replay", "csparql panes (replay)"

    def run(self, point: Point) -> PaneSchedule:
        engine = self.engine(point.dataset)
        name = self.fresh_name(point)
        instants = self.instants(point)
        schedule = PaneSchedule([], [], [], [], [])
        clock = time.perf_counter()
        for evaluation in engine.replay(point.plan, instants[0], instants[-1], name, write=False, panes=ALWAYS):
            schedule.seconds.append(evaluation.duration_ms / 1000)
            self._keep(schedule, evaluation.window.at, evaluation)
        total = time.perf_counter() - clock
        schedule.stored = stored_panes(engine, name)
        # before its first window, a replay computes the missing panes of every window in one Spark job
        schedule.panes_job_seconds = total - sum(schedule.seconds)
        schedule.total_seconds = total
        return schedule

    def figures(self, schedule: PaneSchedule) -> dict:
        """The repetition's figures: ``seconds`` the replay's total ÷ its windows, with the one job computing
        every missing pane, each window's evaluation (combining its panes) and the median phases."""
        figures = super().figures(schedule)
        figures.update({"seconds": schedule.total_seconds / len(schedule.seconds),
                        "replay_seconds": schedule.total_seconds,
                        "panes_job_seconds": schedule.panes_job_seconds,
                        "median_window_seconds": figures["seconds"]})
        del figures["first_window_seconds"]
        return figures


def _evaluation(plan, at):
    from csparql.core.schedule import evaluation_at

    return evaluation_at(plan, at)


def _executed_plan(df) -> str:
    try:
        df.collect()  # adaptive execution settles the final plan only once run
        return str(df._jdf.queryExecution().executedPlan().toString())
    except Exception as error:  # pragma: no cover - a plan we cannot print is not a benchmark failure
        return f"(no plan: {error})"


class SparkHand(System):
    name, label, spark = "spark_hand", "hand-written Spark", True

    def __init__(self, spark_session):
        self.spark_session = spark_session
        self.heap = JvmHeap(spark_session)

    def run(self, point: Point):
        return point.workload.spark(self.spark_session, point.window)

    def answer(self, point: Point, raw) -> Answer:
        return point.workload.canonical(raw)

    def explain(self, point: Point) -> str:
        frame_class = type(self.spark_session.range(1))  # the classic DataFrame (Spark 4 has two kinds)
        captured = []
        original = frame_class.toArrow

        def capture(df):
            captured.append(df)
            return original(df)

        frame_class.toArrow = capture
        try:
            point.workload.spark(self.spark_session, point.window)
        finally:
            frame_class.toArrow = original
        return _executed_plan(captured[-1]) if captured else "(no plan)"


class DuckDB(System):
    name, label = "duckdb", "DuckDB (hand-written SQL)"

    def run(self, point: Point):
        import duckdb

        connection = duckdb.connect()
        try:
            connection.execute("SET TimeZone = 'UTC'")
            connection.execute("SET threads = 2")
            return connection.sql(point.workload.sql(point.window)).to_arrow_table()
        finally:
            connection.close()

    def answer(self, point: Point, raw) -> Answer:
        return point.workload.canonical(raw)


class _Exported(System):
    """A system that loads the evaluation's dataset exported as N-Quads (the window plus the static graph)."""

    def prepare(self, point: Point) -> None:
        point.work.mkdir(parents=True, exist_ok=True)
        path = point.work / "dataset.nq"
        if not path.exists():
            import duckdb

            connection = duckdb.connect()
            try:
                connection.execute("SET TimeZone = 'UTC'")
                point.label["exported_quads"] = export_dataset(connection, point.window, point.workload.graphs, path)
            finally:
                connection.close()
        self.path = path


class Pyoxigraph(_Exported):
    name, label = "pyoxigraph", "pyoxigraph (load + query)"

    def run(self, point: Point):
        import pyoxigraph as ox

        store = ox.Store()
        store.bulk_load(path=str(self.path), format=ox.RdfFormat.N_QUADS)
        result = store.query(point.workload.sparql)
        if point.workload.form == "select":
            names = [v.value for v in result.variables]
            return [[_ox_value(solution[name]) for name in names] for solution in result]
        return [(_ox_value(t.subject), _ox_value(t.predicate), _ox_value(t.object)) for t in result]

    def answer(self, point: Point, raw) -> Answer:
        if point.workload.form == "select":
            return answer_of_rows(raw)
        return answer_of_triples(raw)


def _ox_value(term):
    import pyoxigraph as ox
    from rdflib import Literal, URIRef

    if term is None:
        return None
    if isinstance(term, ox.NamedNode):
        return URIRef(term.value)
    if isinstance(term, ox.Literal):
        return Literal(term.value, datatype=URIRef(term.datatype.value) if term.datatype else None)
    return term.value


class Rdflib(_Exported):
    name, label = "rdflib", "rdflib (load + query)"

    def run(self, point: Point):
        from rdflib import Dataset as RdfDataset

        dataset = RdfDataset()
        dataset.parse(str(self.path), format="nquads")
        result = dataset.query(point.workload.sparql)
        if point.workload.form == "select":
            return [tuple(row) for row in result]
        return list(result)

    def answer(self, point: Point, raw) -> Answer:
        if point.workload.form == "select":
            return answer_of_rows(raw)
        return answer_of_triples(raw)


class CsparqlCold(System):
    """One ``spark-submit`` per window, as the standalone Airflow mode runs it (here on ``local[2]``)."""

    name, label, spark = "csparql_cold", "csparql (cold: spark-submit)", True

    def __init__(self, master: str = "local[2]", driver_memory: str = "2g"):
        self.master = master
        self.driver_memory = driver_memory
        self._running: psutil.Process | None = None

    def prepare(self, point: Point) -> None:
        point.work.mkdir(parents=True, exist_ok=True)
        query = point.work / f"bench_{point.workload.name}.rq"
        query.write_text(point.workload.cquery, encoding="utf-8")
        self.query = query

    def command(self, point: Point) -> list[str]:
        from csparql.runtime.session import LOG4J_CONFIGURATION

        return [
            str(Path(sys.executable).with_name("spark-submit")),
            "--master", self.master, "--deploy-mode", "client", "--name", f"bench-{point.workload.name}",
            "--driver-memory", self.driver_memory,
            "--conf", f"spark.driver.extraJavaOptions=-Duser.timezone=UTC -Dlog4j2.configurationFile=file:{LOG4J_CONFIGURATION}",
            "--conf", "spark.ui.enabled=false",
            "--conf", f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}",
            str(EVALUATE_WINDOW),
            "--query", str(self.query), "--name", f"bench_{point.workload.name}", "--at", str(point.at),
            "--warehouse", str(point.dataset.warehouse.root),
        ]

    def run(self, point: Point):
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable, "TZ": "UTC"}
        for key in ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET", "PYSPARK_SUBMIT_ARGS", "SPARK_REMOTE"):
            env.pop(key, None)
        process = subprocess.Popen(self.command(point), env=env, cwd=point.work, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
        self._running = psutil.Process(process.pid)
        try:
            stdout, stderr = process.communicate(timeout=3600)
        finally:
            self._running = None
        record = next((json.loads(line[len(RESULT_PREFIX):]) for line in stdout.splitlines()
                       if line.startswith(RESULT_PREFIX)), None)
        if process.returncode != 0 or record is None:
            raise RuntimeError(f"spark-submit exited with status {process.returncode}: {stderr.strip()[-1500:]}")
        return record

    def answer(self, point: Point, raw) -> Answer:
        from csparql.storage.stored import StoredResults

        for _, end, result in StoredResults(point.dataset.warehouse, f"bench_{point.workload.name}").windows():
            if end == raw["window_end"]:
                return _result_answer(point.workload, result)
        raise LookupError(f"no stored results for the window ending {raw['window_end']}")

    def processes(self) -> list[psutil.Process]:
        return [self._running] if self._running is not None else []

    def children(self) -> bool:
        return True

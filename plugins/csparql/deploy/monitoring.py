"""What the monitoring pages show, read from the warehouse without Spark or Airflow.

Every figure comes from the Delta logs and the small bookkeeping tables, never from a scan of a stream or a
result table:

- ``recent_windows``: the latest evaluations of a query, from the runs table (``_csparql/runs``), reading only
  the files whose log statistics say they can hold that query's most recent windows;
- ``stream_lags``: how far a query's evaluations are behind the watermarks of the streams it reads;
- ``stream_statistics`` and ``static_graphs``: triples, files and bytes of each table, and triples per hour of
  each stream, from the add actions of their logs (each file's record count and hour partition);
- ``latest_results``: the rows of a query's latest window, reading only the files that hold it.

The Airflow layer adds what only Airflow knows (runs in progress, links to them) on top of these.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from csparql.deploy.plan import Deployment
from csparql.core.schedule import Schedule
from csparql.storage import delta
from csparql.storage.instants import bucket_start, micros_of
from csparql.storage.pruning import may_hold_from, may_hold_string
from csparql.storage.results import ResultTable
from csparql.storage.tables import IRI_PROPERTY, QUERY_PROPERTY, column_names
from csparql.storage.warehouse import Warehouse, check_query_name

STATES = ("complete", "late", "failed", "running", "evaluated")
"""The state of a window: ``complete`` (evaluated once every input had landed), ``late`` (evaluated after the
wait timed out, ``complete = false``), ``failed``, ``running`` (a run of it is in progress in Airflow — set by
the Airflow layer), or ``evaluated`` (evaluated outside Airflow, e.g. ``csparql run``: completeness unknown)."""


# --- the windows of a query ------------------------------------------------------------------------------


@dataclass(frozen=True)
class WindowRun:
    """The latest evaluation of one window of a query, from the runs table."""

    window_start: int | None
    window_end: int
    state: str
    started_at: int
    triples_read: dict[str, int]
    files_read: dict[str, int]
    rows_written: int | None
    duration_ms: int | None
    error: str | None
    version: str | None
    run_id: str
    evaluations: int = 1
    revision: int | None = None  # the latest evaluation's revision (0 the first; null before revisions existed)

    @property
    def total_triples_read(self) -> int:
        return sum(self.triples_read.values())

    @property
    def total_files_read(self) -> int:
        return sum(self.files_read.values())


def window_state(status: str, complete: bool | None) -> str:
    """The state of an evaluated window (see ``STATES``)."""
    if status != "succeeded":
        return "failed"
    if complete is None:
        return "evaluated"
    return "complete" if complete else "late"


def runs_actions(warehouse: Warehouse) -> pa.Table:
    """The add actions of the runs table (to share between several ``recent_windows`` calls)."""
    return delta.add_actions(warehouse.runs)


def recent_windows(warehouse: Warehouse, query: str, limit: int = 50, actions: pa.Table | None = None) -> list[WindowRun]:
    """The ``limit`` latest windows of ``query`` (by window end, newest first), each with its latest run.

    Reads only the runs table's files whose statistics may hold the query, newest windows first, and stops
    as soon as no further file can hold one of the ``limit`` latest windows. ``actions`` are the table's add
    actions when the caller read them already (``runs_actions``)."""
    check_query_name(query)
    path = warehouse.runs
    if actions is None:
        if not delta.exists(path):
            return []
        actions = delta.add_actions(path)
    files = [
        (max_end, relative)
        for relative, low, high, max_end in zip(
            delta.action_column(actions, "path"), delta.action_column(actions, "min.query"),
            delta.action_column(actions, "max.query"), delta.action_column(actions, "max.window_end"), strict=True)
        if may_hold_string(low, high, query)
    ]
    unknown = [f for f in files if f[0] is None]
    known = sorted((f for f in files if f[0] is not None), key=lambda f: micros_of(f[0]), reverse=True)
    rows: list[dict] = []
    for _, relative in unknown:
        rows.extend(_runs_of(path, [relative], query))
    ends = {micros_of(r["window_end"]) for r in rows}
    for max_end, relative in known:
        oldest_shown = sorted(ends, reverse=True)[limit - 1] if len(ends) >= limit else None
        if oldest_shown is not None and not may_hold_from(micros_of(max_end), oldest_shown):
            break  # this file and every later one hold only older windows
        found = _runs_of(path, [relative], query)
        rows.extend(found)
        ends.update(micros_of(r["window_end"]) for r in found)
    by_window: dict[int, list[dict]] = defaultdict(list)
    for row in rows:
        by_window[micros_of(row["window_end"])].append(row)
    windows = []
    for end in sorted(by_window, reverse=True)[:limit]:
        runs = sorted(by_window[end], key=lambda r: micros_of(r["started_at"]))
        last = runs[-1]
        windows.append(WindowRun(
            window_start=micros_of(last["window_start"]),
            window_end=end,
            state=window_state(last["status"], last.get("complete")),
            started_at=micros_of(last["started_at"]),
            triples_read=_json_counts(last.get("triples_read")),
            files_read=_json_counts(last.get("files_read")),
            rows_written=last.get("rows_written"),
            duration_ms=last.get("duration_ms"),
            error=last.get("error"),
            version=last.get("query_version"),
            run_id=last["run_id"],
            evaluations=len(runs),
            revision=last.get("revision"),
        ))
    return windows


def _runs_of(root, relatives: list[str], query: str) -> list[dict]:
    table = delta.read_files(root, relatives)
    if table is None:
        return []
    return table.filter(pc.equal(table["query"], query)).to_pylist()


def _json_counts(text: str | None) -> dict[str, int]:
    if not text:
        return {}
    try:
        return {str(k): int(v) for k, v in json.loads(text).items()}
    except (ValueError, TypeError, AttributeError):
        return {}


# --- late triples and stale windows ----------------------------------------------------------------------


@dataclass(frozen=True)
class Staleness:
    """What ``_csparql/stale_windows`` says of one window of a query: its state there (``pending``: to be
    revised; ``beyond_horizon``: stale, left as it is; ``revised``), why, when it was last found stale, and how
    many late triples (over every commit that reached it)."""

    status: str
    reasons: tuple[str, ...]
    detected_at: int
    late_triples: int
    lateness_max_ms: int | None


def window_staleness(warehouse: Warehouse, query: str) -> dict[int, Staleness]:
    """Per window end, the staleness of the query's windows that late triples reached (``Staleness``): pending
    when one of its records is, else beyond the horizon when one is, else revised."""
    from csparql.storage.stale_windows import stale_windows

    by_end: dict[int, list] = defaultdict(list)
    for window in stale_windows(warehouse, query):
        by_end[window.window_end].append(window)
    found = {}
    for end, records in by_end.items():
        statuses = {r.status for r in records}
        status = next((s for s in ("pending", "beyond_horizon") if s in statuses), "revised")
        reasons = tuple(sorted({f"{r.reason} on <{r.stream}>" for r in records}))
        detected = [r.detected_at for r in records if r.status != "revised"] or [r.detected_at for r in records]
        found[end] = Staleness(status, reasons, max(detected), sum(r.late_triples for r in records),
                               max((r.lateness_max_ms for r in records if r.lateness_max_ms is not None), default=None))
    return found


@dataclass(frozen=True)
class LateTriples:
    """Late triples of one stream: how many landed after a window holding them was evaluated, how late (the
    median and the greatest time from their event time to their commit, ms) and the windows they made stale."""

    triples: int
    lateness_p50_ms: int | None
    lateness_max_ms: int | None
    stale_windows: int


def late_triples_by_stream(warehouse: Warehouse) -> dict[str, LateTriples]:
    """Per stream IRI, its ``LateTriples``: the triples of each commit (its event times, from the stream's log)
    that fall in a window the commit made stale, each counted once, and how late they were. For a commit older
    than the log's history read (``csparql.storage.stale_windows.HISTORY_LOOKBACK``), what its stale windows
    recorded: the most late triples of one of them, and their medians weighted by their triples."""
    from csparql.core.lateness import lateness
    from csparql.storage.stale_windows import stale_windows, stream_commits

    per_commit: dict[str, dict[int, list]] = defaultdict(lambda: defaultdict(list))
    for window in stale_windows(warehouse):
        per_commit[window.stream][window.stream_version].append(window)
    found = {}
    for stream, commits in per_commit.items():
        history = {c.version: c for c in stream_commits(warehouse.stream(stream))}
        triples, greatest = 0, None
        weighted: list[tuple[int, int]] = []  # (lateness ms, triples)
        for version, records in commits.items():
            commit = history.get(version)
            if commit is None:
                triples += max(r.late_triples for r in records)
                weighted += [(r.lateness_p50_ms, r.late_triples) for r in records if r.lateness_p50_ms is not None]
                greatest = max([greatest or 0] + [r.lateness_max_ms for r in records if r.lateness_max_ms is not None])
                continue
            bounds = {(r.window_start, r.window_end) for r in records}
            late = tuple((ts, n) for ts, n in commit.event_times
                         if any((start is None or ts > start) and ts <= end for start, end in bounds))
            if late:
                triples += sum(n for _, n in late)
                weighted += [((commit.committed_at - ts) // 1000, n) for ts, n in late]
                greatest = max(greatest or 0, lateness(late, commit.committed_at)[1] // 1000)
        found[stream] = LateTriples(triples, _weighted_median(weighted), greatest,
                                    len({(r.query, r.window_end) for rs in commits.values() for r in rs}))
    return found


def _weighted_median(values: list[tuple[int, int]]) -> int | None:
    total, seen = sum(n for _, n in values), 0
    for value, n in sorted(values):
        seen += n
        if seen * 2 >= total:
            return value
    return None


# --- lag behind the watermarks ---------------------------------------------------------------------------


@dataclass(frozen=True)
class StreamLag:
    """How far a query is behind one stream it reads.

    ``ready_until`` is the latest window end the stream's watermark lets the query evaluate as complete
    (watermark minus the allowed lateness); ``lag`` is how far the latest evaluated window end is behind it
    (0 when the query is up to date, None when either is unknown); ``windows_behind`` counts the windows
    ready to be evaluated that have not been yet (None when unknown; at most ``WINDOWS_BEHIND_CAP``)."""

    stream: str
    producer: str | None
    watermark: int | None
    ready_until: int | None
    latest_evaluated: int | None
    lag: int | None
    windows_behind: int | None


WINDOWS_BEHIND_CAP = 1000


def stream_lags(deployment: Deployment, watermarks: dict[str, int], windows: list[WindowRun]) -> list[StreamLag]:
    """The lag of a query behind each stream it reads, from the watermarks and its recent windows."""
    evaluated = [w.window_end for w in windows if w.state != "failed" and w.state != "running"]
    latest = max(evaluated) if evaluated else None
    lags = []
    for stream in deployment.inputs:
        mark = watermarks.get(stream.iri)
        ready = mark - stream.lateness if mark is not None else None
        lag = max(0, ready - latest) if ready is not None and latest is not None else None
        behind = None
        if ready is not None and latest is not None and deployment.schedule is not None:
            period = deployment.schedule.period
            until = min(ready, latest + WINDOWS_BEHIND_CAP * period)
            behind = sum(1 for e in deployment.schedule.evaluations(latest + 1, until + period)
                         if latest < e.end <= until)
        lags.append(StreamLag(stream.iri, stream.producer, mark, ready, latest, lag, behind))
    return lags


# --- streams and static graphs ---------------------------------------------------------------------------


@dataclass(frozen=True)
class TableSize:
    """What a table's log says about its live files."""

    files: int
    bytes: int
    triples: int | None  # None when a file has no record count in the log


@dataclass(frozen=True)
class StreamStatistics:
    """One stream table: its IRI, size, watermark, and triples per hour (hour start µs → triples) for the
    hours that hold any."""

    iri: str
    folder: str
    size: TableSize
    watermark: int | None
    per_hour: dict[int, int] = field(default_factory=dict)
    produced_by: str | None = None

    @property
    def first_hour(self) -> int | None:
        return min(self.per_hour) if self.per_hour else None

    @property
    def last_hour(self) -> int | None:
        return max(self.per_hour) if self.per_hour else None


@dataclass(frozen=True)
class StaticGraph:
    """One static graph table (``iri`` None for the default graph) and its size."""

    iri: str | None
    folder: str
    size: TableSize


def table_size(actions: pa.Table) -> TableSize:
    records = delta.action_column(actions, "num_records")
    sizes = delta.action_column(actions, "size_bytes")
    triples = None if any(r is None for r in records) else sum(records)
    return TableSize(actions.num_rows, sum(s or 0 for s in sizes), triples)


def stream_statistics(warehouse: Warehouse, watermarks: dict[str, int] | None = None) -> list[StreamStatistics]:
    """Every stream table of the warehouse, in IRI order, from the logs alone (no data file is read)."""
    from csparql.storage.watermarks import read_watermarks

    marks = read_watermarks(warehouse) if watermarks is None else watermarks
    streams = []
    for folder in warehouse.stream_folders():
        table = delta.open_table(folder)
        configuration = table.metadata().configuration or {}
        iri = configuration.get(IRI_PROPERTY, folder.name)
        actions = delta.add_actions(table)
        per_hour: dict[int, int] = defaultdict(int)
        buckets = delta.action_column(actions, "partition.bucket")
        for bucket, records in zip(buckets, delta.action_column(actions, "num_records"), strict=True):
            hour = bucket_start(bucket)
            if hour is not None and records:
                per_hour[hour] += records
        streams.append(StreamStatistics(iri, str(folder), table_size(actions), marks.get(iri), dict(per_hour),
                                        configuration.get(QUERY_PROPERTY)))
    return sorted(streams, key=lambda s: s.iri)


def static_graphs(warehouse: Warehouse) -> list[StaticGraph]:
    """Every static graph table of the warehouse (the default graph first), from the logs alone."""
    graphs = []
    for folder in warehouse.static_folders():
        table = delta.open_table(folder)
        iri = (table.metadata().configuration or {}).get(IRI_PROPERTY)
        graphs.append(StaticGraph(iri, str(folder), table_size(delta.add_actions(table))))
    return sorted(graphs, key=lambda g: (g.iri is not None, g.iri or ""))


def hourly_series(per_hour: dict[int, int], hours: int) -> list[tuple[int, int]]:
    """Each hour, with its triples (0 when none), from the first hour with data to the last, at most the
    last ``hours`` of them."""
    if not per_hour:
        return []
    hour = 3_600_000_000
    last = max(per_hour)
    first = max(min(per_hour), last - (hours - 1) * hour)
    return [(moment, per_hour.get(moment, 0)) for moment in range(first, last + 1, hour)]


# --- the latest results of a query -----------------------------------------------------------------------


@dataclass(frozen=True)
class ResultWindow:
    """The results one window of a query wrote: column headings and rows of RDF terms in N-Triples syntax
    (``None`` for an unbound variable), at most ``limit`` of ``total`` rows."""

    kind: str
    window_start: int | None
    window_end: int
    columns: tuple[str, ...]
    rows: tuple[tuple[str | None, ...], ...]
    total: int
    version: str | None


def result_kind(warehouse: Warehouse, query: str) -> str | None:
    """Which result table a query has (``bindings``, ``answers``, ``triples``), None before its first write."""
    table = ResultTable.find(warehouse, query)
    return None if table is None else table.kind


def latest_results(warehouse: Warehouse, query: str, limit: int = 100, window_end: int | None = None) -> ResultWindow | None:
    """The rows of the query's latest window (or of the window ending at ``window_end``), reading only the
    files whose statistics say they hold it (``ResultTable.latest_window``); None when the query has written no
    results."""
    table = ResultTable.find(warehouse, query)
    rows = None if table is None else table.latest_window(window_end)
    if rows is None:
        return None
    first = rows.slice(0, 1).to_pylist()[0]
    if table.kind == "bindings":
        vars_ = table.variables()
        names = column_names(vars_)
        columns = tuple(str(v) for v in vars_)
        term_columns = [f"{names[v]}_term" for v in vars_]
    elif table.kind == "answers":
        columns, term_columns = ("answer",), ["answer"]
    else:
        columns = term_columns = ("subject", "predicate", "object")
    shown = rows.slice(0, limit).to_pylist()
    values = tuple(
        tuple(_shown(row.get(c)) for c in term_columns) for row in shown
    )
    return ResultWindow(table.kind, micros_of(first["window_start"]), micros_of(first["window_end"]),
                        tuple(columns), values, rows.num_rows, first.get("query_version"))


def _shown(value) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- windows as the monitor shows them: the runs table and Airflow's runs together ------------------------


@dataclass(frozen=True)
class AirflowRun:
    """What Airflow knows of one DAG run of a query (read by the Airflow layer): its id and state, the end of
    the window it evaluates, when it started, and the state of each of its tasks."""

    run_id: str
    state: str
    window_end: int
    run_type: str
    started_at: int | None
    task_states: dict[str, str | None] = field(default_factory=dict)

    @property
    def in_progress(self) -> bool:
        return self.state in ("queued", "running")

    @property
    def detail(self) -> str:
        """What the run is doing, in plain words. A run is one task, ``evaluate_window``, deferred while it
        waits for its inputs; runs made before that had a separate ``await_window`` task for the wait."""
        wait, evaluate = self.task_states.get("await_window"), self.task_states.get("evaluate_window")
        if self.state == "queued":
            return "queued"
        if "deferred" in (wait, evaluate):
            return "waiting for its inputs to land"
        if evaluate in ("running", "queued", "scheduled"):
            return "evaluating"
        if evaluate == "up_for_retry":
            return "failed once, will retry"
        return self.state


@dataclass(frozen=True)
class WindowView:
    """One row of a query's window table: the window, its state, the latest evaluation recorded for it
    (None while its first run is in progress) and the Airflow run that evaluated or evaluates it."""

    window_start: int | None
    window_end: int
    state: str
    detail: str | None
    evaluation: WindowRun | None
    dag_run: AirflowRun | None


def page_signature(dag_label: str, paused: bool | None, views: list[WindowView]) -> str:
    """What a query page shows that changes as runs progress: the DAG's state, and each window's state, its
    latest evaluation and the Airflow run it links to. The page's script compares it with
    ``GET /api/queries/NAME`` and reloads when they differ."""
    return f"dag={dag_label};paused={paused};" + ";".join(
        f"{v.window_end}={v.state}:{v.evaluation.run_id if v.evaluation else ''}:"
        f"{v.dag_run.run_id if v.dag_run else ''}" for v in views)


def window_views(windows: list[WindowRun], runs: list[AirflowRun], limit: int = 50,
                 schedule: Schedule | None = None) -> list[WindowView]:
    """The windows of a query, newest first: each evaluated window with its latest evaluation, ``running``
    when a run of it is in progress in Airflow (queued, waiting or evaluating) that started after that
    evaluation, and windows whose first run is in progress (their start from ``schedule`` when given)."""

    def start_of(end: int) -> int | None:
        return schedule.evaluation_at(end).start if schedule is not None else None

    by_end: dict[int, list[AirflowRun]] = defaultdict(list)
    for run in runs:
        by_end[run.window_end].append(run)
    views: dict[int, WindowView] = {}
    for window in windows:
        dag_runs = sorted(by_end.get(window.window_end, []), key=lambda r: r.started_at or 0)
        active = [r for r in dag_runs if r.in_progress and (r.started_at is None or r.started_at >= window.started_at)]
        if active:
            views[window.window_end] = WindowView(window.window_start, window.window_end, "running",
                                                  active[-1].detail, window, active[-1])
        else:
            done = [r for r in dag_runs if not r.in_progress]
            # a failed evaluation's error is its own (``evaluation.error``), shown once, below its row
            views[window.window_end] = WindowView(window.window_start, window.window_end, window.state, None,
                                                  window, done[-1] if done else None)
    for end, dag_runs in by_end.items():
        if end in views:
            continue
        active = [r for r in dag_runs if r.in_progress]
        if active:
            run = max(active, key=lambda r: r.started_at or 0)
            views[end] = WindowView(start_of(end), end, "running", run.detail, None, run)
        elif any(r.state == "failed" for r in dag_runs):
            # the run failed before the evaluation recorded anything (e.g. the wait itself failed)
            run = max(dag_runs, key=lambda r: r.started_at or 0)
            views[end] = WindowView(start_of(end), end, "failed",
                                    "the Airflow run failed before evaluating: see its log", None, run)
    return [views[end] for end in sorted(views, reverse=True)[:limit]]

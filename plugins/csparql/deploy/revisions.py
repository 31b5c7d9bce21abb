"""Which evaluated windows late triples made stale, and which of them to revise.

A stream commit (an ingest, a landed file, a ``REGISTER STREAM`` window written) records its event times
(``csparql.storage.stale_windows``). Two checks together find every window evaluated without some of its triples,
whatever the order in which an ingest and an evaluation of the same window finish:

- after a commit, ``detect_after_commits`` looks at the windows the runs table says were evaluated before it
  (their latest evaluation started before the commit): by the registered queries reading the stream, through
  their schedules, and by any other query whose run read the stream (``csparql run`` of a query file), through
  the window bounds its run recorded;
- after an evaluation, ``check_evaluation`` looks at the stream commits made since the evaluation started (an
  ingest that checked the runs table before this run was recorded).

A stale window ended at most the query's revision horizon before it was detected (``CSPARQL_REVISION_HORIZON``,
or the query's own ``# csparql revision-horizon``) is recorded ``pending`` and revised by the query's
revision DAG; an older one is recorded ``beyond_horizon`` and left as it is. A pending window is settled by any
successful evaluation of it that started after the commit (``pending_windows``). A query evaluated without
being registered has no revision DAG and only the first check: its stale windows are recorded (under the
deployment's ``CSPARQL_REVISION_HORIZON``) for whoever evaluates it again.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from csparql.deploy.plan import Deployment, deployment_of
from csparql.deploy.registry import QueryFacts, RegistrationError, registry_facts
from csparql.deploy.settings import Settings
from csparql.core.lateness import LateWindow, late_in_bounds, late_windows, lateness, within_horizon
from csparql.storage import revisions as rv
from csparql.storage import stale_windows as sw
from csparql.storage.stale_windows import StaleWindow, StreamCommit


def revision_asset_uri(query: str) -> str:
    """The URI of the Asset whose events start the revision DAG of ``query`` (``csparql.orchestration.revisions``)."""
    return f"csparql://revisions/{query}"


def windows_to_revise(stale: list[StaleWindow]) -> dict[str, list[int]]:
    """The window ends (µs) of each query that ``stale`` says to revise (those inside its revision horizon)."""
    ends: dict[str, set[int]] = {}
    for window in stale:
        if window.status == sw.PENDING:
            ends.setdefault(window.query, set()).add(window.window_end)
    return {query: sorted(windows) for query, windows in sorted(ends.items())}


def readers_of(stream: str, settings: Settings,
               registry: list[tuple[Path, QueryFacts | None]] | None = None) -> dict[str, Path]:
    """The registry files of the queries that read ``stream`` on a schedule, by query name (from the registry's
    facts, ``registry`` when already read: nothing is compiled)."""
    registry = registry_facts(settings) if registry is None else registry
    return {path.stem: path for path, facts in registry
            if facts is not None and facts.schedule is not None and stream in facts.streams}


def horizon_of(deployment: Deployment, settings: Settings) -> int:
    """How long after a window's end its staleness is still revised (µs)."""
    return deployment.revision_horizon if deployment.revision_horizon is not None else settings.revision_horizon


def detect_after_commits(settings: Settings, stream: str, after_version: int,
                         now: int | None = None) -> list[StaleWindow]:
    """Record (and return) the windows evaluated before one of the stream's commits newer than
    ``after_version`` that those commits' triples reach: of the registered queries reading ``stream``, by their
    schedules, and of the queries evaluated without being registered (``csparql run``, ``replay``), by the
    bounds their runs recorded (``late_in_bounds``)."""
    commits = sw.stream_commits(settings.warehouse.stream(stream), after_version=after_version)
    commits = [c for c in commits if c.event_times]
    if not commits:
        return []
    registry = registry_facts(settings)
    readers = readers_of(stream, settings, registry)
    evaluated = rv.evaluated_windows(settings.warehouse, set(readers))
    earliest = min(c.event_times[0][0] for c in commits)
    now = time.time_ns() // 1000 if now is None else now
    found = []
    for name, path in sorted(readers.items()):
        windows = {end: run for end, run in (evaluated.get(name) or {}).items() if end >= earliest}
        if not windows:
            continue  # no window evaluated that the commits can reach: nothing to compile
        try:
            deployment = deployment_of(path, settings)
        except RegistrationError:
            continue  # its loader reports it
        for commit in commits:
            before = [end for end, run in windows.items()
                      if sw.began_before_commit(run.started_at, commit.committed_at)]
            found += _stale(deployment, settings, stream, commit, before, now)
    registered = {path.stem for path, _ in registry}
    for name, runs in sorted(rv.evaluated_windows(settings.warehouse, None, reading=stream).items()):
        if name in registered:
            continue  # its schedule says which windows read what (above)
        windows = {end: run for end, run in runs.items() if end >= earliest}
        for commit in commits:
            before = {end: run.window_start for end, run in windows.items()
                      if sw.began_before_commit(run.started_at, commit.committed_at)}
            found += [_stale_window(name, stream, commit, window, now, settings.revision_horizon)
                      for window in late_in_bounds(commit.event_times, before)]
    return _record_new(settings, found)


def check_evaluation(settings: Settings, deployment: Deployment, window_end: int, started_at: int,
                     now: int | None = None) -> list[StaleWindow]:
    """Record (and return) the staleness of the window an evaluation that started at ``started_at`` (µs) just
    wrote, by stream commits made since it started that reach its window."""
    if deployment.schedule is None:
        return []
    now = time.time_ns() // 1000 if now is None else now
    found = []
    for stream in deployment.inputs:
        for commit in sw.stream_commits(settings.warehouse.stream(stream.iri), after_time=started_at):
            found += _stale(deployment, settings, stream.iri, commit, [window_end], now)
    return _record_new(settings, found)


def _stale(deployment: Deployment, settings: Settings, stream: str, commit: StreamCommit, evaluated: list[int],
           now: int) -> list[StaleWindow]:
    horizon = horizon_of(deployment, settings)
    windows = late_windows(deployment.schedule, stream, commit.event_times, evaluated,
                           deployment.plan.stream_operator)
    return [_stale_window(deployment.name, stream, commit, window, now, horizon) for window in windows]


def _stale_window(query: str, stream: str, commit: StreamCommit, window: LateWindow, now: int,
                  horizon: int) -> StaleWindow:
    median, greatest = lateness(window.late, commit.committed_at)
    inside = within_horizon(window.window_end, now, horizon)
    return StaleWindow(
        query=query, window_start=window.window_start, window_end=window.window_end, stream=stream,
        stream_version=commit.version, committed_at=commit.committed_at,
        reason=sw.PREVIOUS_WINDOW if window.previous_changed else sw.LATE_TRIPLES,
        late_triples=window.late_triples, lateness_p50_ms=median // 1000, lateness_max_ms=greatest // 1000,
        detected_at=now, within_horizon=inside, status=sw.PENDING if inside else sw.BEYOND_HORIZON,
    )


def _record_new(settings: Settings, found: list[StaleWindow]) -> list[StaleWindow]:
    """Append the stale windows not recorded yet (both checks may find the same one)."""
    if not found:
        return []
    queries = {w.query for w in found}
    known = {w.key for query in queries for w in sw.stale_windows(settings.warehouse, query)}
    new = list({w.key: w for w in found if w.key not in known}.values())
    sw.append_stale_windows(settings.warehouse, new)
    return new


@dataclass(frozen=True)
class PendingWindow:
    """A window to revise: its end and the stale records its revision settles."""

    window_end: int
    stale: tuple[StaleWindow, ...]


def pending_windows(settings: Settings, query: str) -> list[PendingWindow]:
    """The query's windows recorded ``pending`` and not evaluated with success since the commits that made
    them stale, oldest window first. Records found settled by such an evaluation (a backfill, a re-run) are
    marked ``revised`` on the way."""
    pending: dict[int, list[StaleWindow]] = {}
    for window in sw.stale_windows(settings.warehouse, query):
        if window.status == sw.PENDING:
            pending.setdefault(window.window_end, []).append(window)
    if not pending:
        return []
    evaluated = rv.evaluated_windows(settings.warehouse, {query})[query]
    found = []
    for end in sorted(pending):
        stale = [w for w in pending[end]
                 if end not in evaluated or sw.began_before_commit(evaluated[end].started_at, w.committed_at)]
        settled = [w for w in pending[end] if w not in stale]
        if settled:
            mark_revised(settings, settled, evaluated[end].revision)
        if stale:
            found.append(PendingWindow(end, tuple(stale)))
    return found


def mark_revised(settings: Settings, windows: list[StaleWindow] | tuple[StaleWindow, ...], revision: int,
                 now: int | None = None) -> None:
    """Record that ``revision`` of their windows saw the commits that made them stale."""
    now = time.time_ns() // 1000 if now is None else now
    sw.append_stale_windows(settings.warehouse, [
        StaleWindow(**{**w.__dict__, "status": sw.REVISED, "revision": revision, "detected_at": now}) for w in windows
    ])

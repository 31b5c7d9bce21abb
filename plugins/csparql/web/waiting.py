"""What the monitor page says when a query's windows wait for data that is not coming: the streams whose
watermarks are far behind the window the schedule evaluates now (or that have none), and the latest window
that does have data, offered for evaluation."""

from __future__ import annotations

from dataclasses import dataclass

from csparql.deploy.monitoring import StreamLag
from csparql.deploy.plan import Deployment
from csparql.web.views import duration
from csparql.core.windows import format_duration, format_instant

STALLED_AFTER = 10 * 60_000_000
"""A stream whose data stops more than this (or three periods of the query, if longer) before the window the
schedule evaluates now is taken for one where nothing is landing: a live stream keeps within a minute or two."""


@dataclass(frozen=True)
class WaitingNote:
    """The page's note: ``text``, in words, and the end of the latest window with data on every stream the
    query reads (µs), to evaluate instead; None when there is none."""

    text: str
    window_end: int | None


def waiting_note(deployment: Deployment | None, lags: list[StreamLag], now: int) -> WaitingNote | None:
    """The note for a scheduled query whose windows wait for data that is not coming, at the instant ``now``
    (µs): which of the streams it reads stop long before the window the schedule evaluates now
    (``STALLED_AFTER``) or have no data yet, and the latest window all of them have data for. None when every
    stream keeps up (or the query has no schedule, or its inputs are other queries' output streams)."""
    if deployment is None or deployment.schedule is None:
        return None
    schedule = deployment.schedule
    due = schedule.latest_evaluation(now)
    margin = max(STALLED_AFTER, 3 * schedule.period)
    stalled = [lag for lag in lags if lag.producer is None and (lag.ready_until is None
                                                                  or lag.ready_until < due.end - margin)]
    if not stalled:
        return None
    empty = [lag.stream for lag in stalled if lag.ready_until is None]
    if empty:
        names = ", ".join(f"<{iri}>" for iri in empty)
        return WaitingNote(f"Its windows wait for data that has not come: nothing has landed in {names} yet. "
                           "Each scheduled run waits for its window's data; drop files in the stream's landing "
                           "folder or push them (see Streams).", None)
    ready = min(lag.ready_until for lag in lags if lag.ready_until is not None)
    latest = schedule.latest_evaluation(ready)
    behind = ", ".join(f"<{lag.stream}> has data up to {format_instant(lag.watermark)}" for lag in stalled)
    gap = duration(due.end - min(lag.ready_until for lag in stalled))
    text = (f"Its windows wait for data that is not coming: {behind}, {gap} before the window ending "
            f"{format_instant(due.end)} that the schedule evaluates now, and nothing later has landed. Each "
            f"scheduled run waits for its window's data (every {format_duration(schedule.period)}); the latest "
            f"window with data ends {format_instant(latest.end)}: evaluate it below.")
    return WaitingNote(text, latest.end)

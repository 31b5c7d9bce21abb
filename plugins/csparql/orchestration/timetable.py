"""The schedule of a registered query as an Airflow timetable.

Runs fall on the query's evaluation instants — multiples of its period since the epoch (docs/semantics.md,
*When a query is evaluated*) — and never on the wall clock: a run's ``run_after`` is its instant t, its data
interval the bounds of the window it evaluates, ``(t_f − RANGE, t_f]`` (the longest window's; Airflow sets the
logical date to the interval's start). Instants that would see the same window as the previous run are
skipped. ``start_date``/``end_date`` and a backfill's range bound the instants, inclusively, exactly as
``csparql replay --from --to`` does. Without catch-up, windows missed for more than ``LATE_WINDOWS_KEPT``
periods are skipped.

Runs fall only on instants csparql evaluates (``EARLIEST_INSTANT`` to ``LATEST_INSTANT``): a range reaching
beyond them is cut there, and a schedule beyond the front end's limits (stored before they were checked) has
no runs, rather than one at an instant no layer can represent.
"""

from __future__ import annotations

from typing import Any

import pendulum
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction, Timetable

from csparql.core.schedule import EvaluationWindow, Schedule
from csparql.core.windows import EARLIEST_INSTANT, LATEST_INSTANT, format_duration, from_micros, to_micros


LATE_WINDOWS_KEPT = 4
"""Without catch-up, a window the scheduler reaches late (busy, restarted, or the DAG at its max_active_runs)
still runs when its instant is among the schedule's latest ``LATE_WINDOWS_KEPT`` instants (the latest window
and the three before it, when each period has its own window); windows missed for longer (a DAG paused for a
while, a scheduler down for long) are skipped, and a backfill replays them. A DAG's first run is the latest
closed window."""


def _moment(micros: int) -> pendulum.DateTime:
    return pendulum.instance(from_micros(micros), tz="UTC")


class WindowTimetable(Timetable):
    """One run per distinct window of a query's schedule (see the module docstring)."""

    periodic = True
    can_be_scheduled = True

    def __init__(self, schedule: Schedule) -> None:
        self.schedule = schedule
        windows = ", ".join(f"[{w}]" for _, w in schedule.windows)
        self.description = f"every {format_duration(schedule.period)} since the epoch" + (f", windows {windows}" if windows else "")

    def serialize(self) -> dict[str, Any]:
        return self.schedule.to_dict()

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> WindowTimetable:
        return cls(Schedule.from_dict(data))

    @property
    def summary(self) -> str:
        return f"every {format_duration(self.schedule.period)}"

    def data_interval(self, evaluation: EvaluationWindow) -> DataInterval:
        """The window's bounds; for count-based windows only, the period before the instant."""
        start = evaluation.start if evaluation.start is not None else evaluation.end - self.schedule.period
        return DataInterval(start=_moment(start), end=_moment(evaluation.end))

    def run_info(self, evaluation: EvaluationWindow) -> DagRunInfo:
        return DagRunInfo(run_after=_moment(evaluation.at), data_interval=self.data_interval(evaluation))

    def infer_manual_data_interval(self, *, run_after: pendulum.DateTime) -> DataInterval:
        return self.data_interval(self.schedule.latest_evaluation(to_micros(run_after)))

    def next_dagrun_info(
        self, *, last_automated_data_interval: DataInterval | None, restriction: TimeRestriction
    ) -> DagRunInfo | None:
        if not self.schedule.within_limits:
            return None
        now = to_micros(pendulum.now("UTC"))
        earliest = max(to_micros(restriction.earliest), EARLIEST_INSTANT) if restriction.earliest is not None else None
        if last_automated_data_interval is not None:
            last_end = to_micros(last_automated_data_interval.end)
            evaluation = self.schedule.next_evaluation(last_end, last_end + 1)
        elif earliest is not None:
            evaluation = self.schedule.next_evaluation(None, earliest)
        else:
            evaluation = self.schedule.latest_evaluation(now)
        if not restriction.catchup:
            latest = self.schedule.latest_evaluation(now)
            oldest_kept = latest
            if last_automated_data_interval is not None:
                oldest_kept = self.schedule.next_evaluation(
                    last_end, latest.at - (LATE_WINDOWS_KEPT - 1) * self.schedule.period)
            if oldest_kept.at > evaluation.at:
                evaluation = oldest_kept  # older missed windows are skipped; a backfill replays them
        if earliest is not None and evaluation.at < earliest:
            evaluation = self.schedule.next_evaluation(None, earliest)
        if restriction.latest is not None and evaluation.at > to_micros(restriction.latest):
            return None
        if evaluation.at > LATEST_INSTANT:
            return None
        return self.run_info(evaluation)

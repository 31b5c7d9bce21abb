"""The deferrable wait for a complete window, run by Airflow's triggerer (no worker slot, no task process)."""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from csparql.deploy.plan import WindowRequirements, WindowWait
from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import missing_for_window
from csparql.windows import format_instant, parse_instant


class WindowCompleteTrigger(BaseTrigger):
    """Fires ``{"status": "complete", "window_end": µs}`` once nothing is missing for the window a run
    evaluates (see ``csparql.storage.watermarks.missing_for_window``), polling every ``poll_seconds``.

    ``wait`` is the query's ``WindowWait.to_dict()``; ``window_instant`` the run's instant (ISO 8601). When the
    task starts on the triggerer (``start_from_trigger``) the triggerer renders ``window_instant`` from the
    run — it is a template field of the task too (``CsparqlEvaluateWindowOperator``) — before ``run``. The wait's
    timeout is Airflow's (the task instance's trigger timeout), not the trigger's."""

    def __init__(self, warehouse: str, wait: dict, window_instant: str, poll_seconds: float) -> None:
        super().__init__()
        self.warehouse = warehouse
        self.wait = wait
        self.window_instant = window_instant
        self.poll_seconds = poll_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "csparql.orchestration.triggers.WindowCompleteTrigger",
            {"warehouse": self.warehouse, "wait": self.wait, "window_instant": self.window_instant,
             "poll_seconds": self.poll_seconds},
        )

    def requirements(self) -> WindowRequirements:
        """What the run's window waits for."""
        return WindowWait.from_dict(self.wait).requirements(parse_instant(str(self.window_instant)))

    def missing(self) -> list[str]:
        """What the run's window still waits for, in plain words (empty once it is complete)."""
        requirements = self.requirements()
        return missing_for_window(Warehouse(self.warehouse), requirements.streams, requirements.producer_windows)

    async def run(self):
        requirements = self.requirements()
        warehouse = Warehouse(self.warehouse)
        reported: list[str] | None = None
        while True:
            # Delta reads must not block the triggerer's loop
            missing = await asyncio.to_thread(missing_for_window, warehouse, requirements.streams,
                                              requirements.producer_windows)
            if not missing:
                yield TriggerEvent({"status": "complete", "window_end": requirements.window_end})
                return
            if missing != reported:
                self.log.info("window ending %s waits for: %s", format_instant(requirements.window_end),
                              "; ".join(missing))
                reported = missing
            await asyncio.sleep(self.poll_seconds)

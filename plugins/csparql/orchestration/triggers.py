"""The deferrable wait for a complete window, run by Airflow's triggerer (no worker slot is held)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from airflow.triggers.base import BaseTrigger, TriggerEvent

from csparql.storage.warehouse import Warehouse
from csparql.storage.watermarks import missing_for_window


class WindowCompleteTrigger(BaseTrigger):
    """Fires ``{"status": "complete"}`` once nothing is missing for the window (see
    ``csparql.storage.watermarks.missing_for_window``), or ``{"status": "timeout", "missing": [...]}`` at
    ``deadline`` (µs since the epoch): the evaluation then runs anyway and records the window as incomplete."""

    def __init__(self, warehouse: str, streams: dict[str, int], producer_windows: dict[str, list[int]],
                 deadline: int, poll_seconds: float) -> None:
        super().__init__()
        self.warehouse = warehouse
        self.streams = streams
        self.producer_windows = producer_windows
        self.deadline = deadline
        self.poll_seconds = poll_seconds

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (
            "csparql.orchestration.triggers.WindowCompleteTrigger",
            {"warehouse": self.warehouse, "streams": self.streams, "producer_windows": self.producer_windows,
             "deadline": self.deadline, "poll_seconds": self.poll_seconds},
        )

    def missing(self) -> list[str]:
        return missing_for_window(Warehouse(self.warehouse), self.streams, self.producer_windows)

    async def run(self):
        while True:
            missing = await asyncio.to_thread(self.missing)  # Delta reads must not block the triggerer's loop
            if not missing:
                yield TriggerEvent({"status": "complete", "missing": []})
                return
            remaining = self.deadline / 1e6 - time.time()
            if remaining <= 0:
                yield TriggerEvent({"status": "timeout", "missing": missing})
                return
            await asyncio.sleep(min(self.poll_seconds, remaining))

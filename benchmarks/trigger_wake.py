"""From the commit that completes a window to its trigger's event, with the commit watch and with the poll
alone, side by side in one run (``./bench.sh --wake --set trials=30``).

Each trial registers ``02-cars-per-tollgate.rq`` in a new warehouse, records its stream's watermark a minute short
of what the window ending 08:50 needs, starts the real ``WindowCompleteTrigger`` (the default
``CSPARQL_POLL_INTERVAL``, 2 s) on an asyncio loop as the triggerer runs it, and after a random 0.5–2.5 s commits
the watermark that completes the window; the figure is the time from the end of that commit to the trigger's
event. The two ways alternate trial by trial: ``watch`` is the trigger as it is (``CommitWatch``); ``poll`` is
the same trigger waiting ``poll_seconds`` between its looks, as it did before the watch. Prints the medians, p95
and maxima (ms) and their ratio."""

from __future__ import annotations

import asyncio
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import csparql
from csparql.core.windows import format_instant, parse_instant
from csparql.deploy.plan import deployment_of_query
from csparql.deploy.registration import register
from csparql.deploy.settings import Settings
from csparql.orchestration.triggers import WindowCompleteTrigger
from csparql.storage.watermarks import advance_watermark

QUERY = Path(csparql.__file__).parent / "examples" / "queries" / "02-cars-per-tollgate.rq"
WINDOW_END = parse_instant("2010-03-22T08:50:00Z")


class PollingTrigger(WindowCompleteTrigger):
    """The trigger without the commit watch: it waits ``poll_seconds`` between its looks."""

    async def next_commit_or_poll(self, warehouse, requirements) -> None:
        await asyncio.sleep(self.poll_seconds)


def trial(kind: type[WindowCompleteTrigger], rng: random.Random) -> float:
    """Milliseconds from the end of the completing commit to the trigger's event."""
    root = Path(tempfile.mkdtemp(prefix="trigger-wake-"))
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(root / "registry"),
                                          "CSPARQL_WAREHOUSE": str(root / "warehouse")})
    register(QUERY, settings, name="per_tollgate")
    deployment = deployment_of_query("per_tollgate", settings)
    ((stream, threshold),) = deployment.requirements(WINDOW_END).streams.items()
    advance_watermark(settings.warehouse, stream, threshold - 60_000_000, "benchmark")
    trigger = kind(str(settings.warehouse.root), deployment.wait.to_dict(), format_instant(WINDOW_END),
                   settings.poll_interval / 1e6)
    pause = 0.5 + 2.0 * rng.random()

    async def scenario() -> float:
        async def fired() -> float:
            async for _ in trigger.run():
                return time.monotonic()
            raise RuntimeError("the trigger ended without an event")

        waiting = asyncio.ensure_future(fired())
        await asyncio.sleep(pause)
        await asyncio.to_thread(advance_watermark, settings.warehouse, stream, threshold, "benchmark")
        committed = time.monotonic()
        return (await waiting - committed) * 1000

    return asyncio.run(scenario())


def main(trials: int = 15) -> dict[str, list[float]]:
    rng = random.Random(2010)
    delays: dict[str, list[float]] = {"watch": [], "poll": []}
    for _ in range(trials):
        delays["watch"].append(trial(WindowCompleteTrigger, rng))
        delays["poll"].append(trial(PollingTrigger, rng))
    for name, values in delays.items():
        values.sort()
        print(f"{name}: median {statistics.median(values):.0f} ms, p95 {values[int(0.95 * (len(values) - 1))]:.0f} ms, "
              f"max {values[-1]:.0f} ms over {len(values)} trials")
    ratio = statistics.median(delays["poll"]) / max(statistics.median(delays["watch"]), 1e-3)
    print(f"poll ÷ watch (medians): {ratio:.1f}×")
    return delays


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)

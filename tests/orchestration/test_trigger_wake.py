"""A waiting window is looked at again as soon as a commit may have completed it, not at its trigger's next
poll: the watermark commit that completes a window wakes its trigger (``CommitWatch``), and one watch serves
every trigger waiting on the same table. Real Delta tables and the real trigger, run on an asyncio loop as the
triggerer runs it; the poll is set to ten minutes, so only the commit can end these waits within the test."""

from __future__ import annotations

import asyncio
from pathlib import Path

from csparql.deploy.plan import deployment_of_query
from csparql.deploy.registration import register
from csparql.deploy.settings import Settings
from csparql.orchestration.triggers import CommitWatch, WindowCompleteTrigger
from csparql.storage.watermarks import advance_watermark
from csparql.core.windows import format_instant, parse_instant

EXAMPLES = (Path(__file__).resolve().parents[2] / "examples" / "queries").resolve()
POLL_SECONDS = 600.0
WINDOW_END = parse_instant("2010-03-22T08:50:00Z")


def waiting_triggers(tmp_path: Path, count: int) -> tuple[Settings, list[WindowCompleteTrigger], str, int]:
    settings = Settings.from_environment({"CSPARQL_REGISTRY": str(tmp_path / "registry"),
                                          "CSPARQL_WAREHOUSE": str(tmp_path / "warehouse")})
    register(EXAMPLES / "02-cars-per-tollgate.rq", settings, name="per_tollgate")
    deployment = deployment_of_query("per_tollgate", settings)
    ((stream, threshold),) = deployment.requirements(WINDOW_END).streams.items()
    advance_watermark(settings.warehouse, stream, threshold - 60_000_000, "test")  # a minute short
    triggers = [WindowCompleteTrigger(str(settings.warehouse.root), deployment.wait.to_dict(),
                                      format_instant(WINDOW_END), POLL_SECONDS) for _ in range(count)]
    return settings, triggers, stream, threshold


async def first_event(trigger: WindowCompleteTrigger):
    async for event in trigger.run():
        return event


def test_the_commit_that_completes_a_window_wakes_every_trigger_waiting_for_it(tmp_path):
    settings, triggers, stream, threshold = waiting_triggers(tmp_path, 3)

    async def scenario():
        waits = [asyncio.ensure_future(first_event(trigger)) for trigger in triggers]
        await asyncio.sleep(1.0)
        assert not any(wait.done() for wait in waits)  # the watermark is a minute short: they wait
        await asyncio.to_thread(advance_watermark, settings.warehouse, stream, threshold, "test")
        # woken by the commit: the poll would take ten minutes, so waiting for the poll times out here
        events = await asyncio.wait_for(asyncio.gather(*waits), timeout=60)
        return events, CommitWatch._watches

    events, watches = asyncio.run(scenario())
    assert [event.payload for event in events] == [{"status": "complete", "window_end": WINDOW_END}] * 3
    watched = [key for key in watches if key[1] == str(settings.warehouse.watermarks)]
    assert len(watched) == 1  # one watch of the watermarks for the three triggers


def test_a_commit_that_does_not_complete_the_window_leaves_its_trigger_waiting(tmp_path):
    settings, (trigger,), stream, threshold = waiting_triggers(tmp_path, 1)

    async def scenario():
        wait = asyncio.ensure_future(first_event(trigger))
        await asyncio.sleep(0.5)
        await asyncio.to_thread(advance_watermark, settings.warehouse, stream, threshold - 1, "test")
        await asyncio.sleep(1.5)  # the watch has seen the commit and the trigger has looked again
        still_waiting = not wait.done()
        await asyncio.to_thread(advance_watermark, settings.warehouse, stream, threshold, "test")
        return still_waiting, await asyncio.wait_for(wait, timeout=60)

    still_waiting, event = asyncio.run(scenario())
    assert still_waiting and event.payload == {"status": "complete", "window_end": WINDOW_END}

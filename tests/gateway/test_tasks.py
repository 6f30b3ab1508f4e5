"""Tracked tasks and the bounded drain that shutdown relies on."""

from __future__ import annotations

import asyncio

from gateway.tasks import TaskTracker
from tests.waiting import eventually


async def test_drain_waits_for_work_that_finishes_and_cancels_the_rest() -> None:
    tracker = TaskTracker()
    release = asyncio.Event()
    finished: list[str] = []
    cancelled: list[str] = []

    async def quick() -> None:
        await release.wait()
        finished.append("quick")

    async def stuck() -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append("stuck")
            raise

    tracker.spawn(quick(), name="quick")
    tracker.spawn(stuck(), name="stuck")
    assert len(tracker) == 2
    asyncio.get_running_loop().call_soon(release.set)
    result = await tracker.drain(timeout=0.2)
    assert (result.finished, result.cancelled) == (1, 1)
    assert finished == ["quick"] and cancelled == ["stuck"]
    assert len(tracker) == 0


async def test_drain_with_nothing_running_returns_at_once() -> None:
    result = await TaskTracker().drain(timeout=30)
    assert (result.finished, result.cancelled) == (0, 0)


async def test_finished_tasks_are_forgotten() -> None:
    tracker = TaskTracker()
    task = tracker.spawn(asyncio.sleep(0), name="noop")
    await task
    await eventually(lambda: len(tracker) == 0, "the finished task to be forgotten")

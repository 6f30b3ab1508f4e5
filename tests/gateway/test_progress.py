"""Tool progress: one message per turn, throttled and coalesced edits, a final line. Clock and sleep are fakes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from gateway.delivery.outbox import Delivery
from gateway.operations.metrics import Metrics
from gateway.delivery.progress import ToolProgress, final_line, working_line
from storage import Store
from tests.fakes.adapter import LoopbackAdapter
from tests.waiting import eventually


class FakeTime:
    """A clock that moves only when told; ``sleep`` blocks until the test opens the gate."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []
        self.gate = asyncio.Event()
        self.sleeping = asyncio.Event()

    def clock(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.sleeping.set()
        await self.gate.wait()
        self.gate.clear()
        self.sleeping.clear()
        self.now += seconds


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "state.db")
    yield opened
    await opened.close()


def progress_for(store: Store, adapter: LoopbackAdapter, time: FakeTime) -> ToolProgress:
    delivery = Delivery(store, {adapter.platform: adapter}, Metrics())
    return ToolProgress(
        delivery, turn_id="loopback:1", platform="loopback", chat_id="c1", interval=1.5, clock=time.clock, sleep=time.sleep
    )


def test_wording() -> None:
    assert working_line(["session_search"]) == "Working on it: searching past conversations…"
    assert working_line(["session_search", "memory", "session_search"]) == (
        "Working on it: searching past conversations, updating my notes…"
    )
    assert working_line(["weather"]) == "Working on it: using weather…"  # unknown tools fall back to their name
    assert working_line([f"tool{i}" for i in range(9)]).endswith("using tool5 and 3 more…")
    assert final_line(["session_search", "memory", "session_search"]) == "Used: session_search, memory"


async def test_nothing_is_sent_without_tool_calls(store: Store) -> None:
    adapter, time = LoopbackAdapter(), FakeTime()
    progress = progress_for(store, adapter, time)
    progress.note([])
    await progress.stop()
    await progress.finish()
    assert not progress.started and adapter.sent == [] and adapter.edits == []
    assert await store.outbox_pending() == []


async def test_edits_are_throttled_and_coalesced_then_the_final_line(store: Store) -> None:
    adapter, time = LoopbackAdapter(), FakeTime()
    progress = progress_for(store, adapter, time)
    progress.note(["session_search"])
    await eventually(lambda: progress.shown is not None, "the message to be recorded")  # sent and recorded: the interval runs from here
    (first,) = adapter.sent
    assert first.text == "Working on it: searching past conversations…"

    time.now += 0.5
    progress.note(["memory"])
    await asyncio.wait_for(time.sleeping.wait(), 5)  # waits out the rest of the interval...
    assert time.sleeps == [1.0] and adapter.edits == []
    progress.note(["weather"])  # ...and what arrives meanwhile joins the same edit
    time.gate.set()
    await eventually(lambda: progress.shown != first.text, "the edit to be recorded")
    assert [(e.message_id, e.text) for e in adapter.edits] == [
        ("m1", "Working on it: searching past conversations, updating my notes, using weather…")
    ]

    await progress.stop()
    finishing = asyncio.create_task(progress.finish())
    await asyncio.wait_for(time.sleeping.wait(), 5)
    assert time.sleeps == [1.0, 1.5]  # the final edit keeps the interval too
    time.gate.set()
    await asyncio.wait_for(finishing, 5)
    assert adapter.edits[-1].text == "Used: session_search, memory, weather"
    assert len(adapter.sent) == 1 and len(adapter.edits) == 2
    assert await store.outbox_pending() == []


async def test_stop_drops_a_throttled_edit_in_favour_of_the_final_line(store: Store) -> None:
    adapter, time = LoopbackAdapter(), FakeTime()
    progress = progress_for(store, adapter, time)
    progress.note(["session_search"])
    await eventually(lambda: progress.shown is not None, "the message to be recorded")
    progress.note(["memory"])
    await asyncio.wait_for(time.sleeping.wait(), 5)
    await progress.stop()  # returns although the throttle sleep never ended
    time.now += 1.5
    await progress.finish()
    assert [e.text for e in adapter.edits] == ["Used: session_search, memory"]
    assert time.sleeps == [1.5]  # the interrupted throttle; the final edit was due already

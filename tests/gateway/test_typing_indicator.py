"""The typing indicator: shown at once, refreshed while the block runs, never after it."""

from __future__ import annotations

import asyncio

from gateway.delivery.typing_indicator import typing
from tests.fakes.adapter import LoopbackAdapter
from tests.waiting import eventually


async def test_typing_is_shown_at_once_refreshed_and_stopped_with_the_block() -> None:
    adapter = LoopbackAdapter()
    async with typing(adapter, "c1", "t1", every=0.02):
        await asyncio.sleep(0)  # one round of the event loop: the first indicator is out
        assert adapter.typing_chats == ["c1"]
        await eventually(lambda: len(adapter.typing_chats) >= 3, "two refreshes of the indicator")
    shown = len(adapter.typing_chats)
    await asyncio.sleep(0.1)  # five refresh periods: the chance to refresh after the block, which nothing else shows
    assert len(adapter.typing_chats) == shown


async def test_a_block_over_before_the_indicator_started_shows_none() -> None:
    adapter = LoopbackAdapter()
    async with typing(adapter, "c1", None, every=0.01):
        pass
    await asyncio.sleep(0.05)  # five refresh periods: the chance to show it late, which nothing else shows
    assert adapter.typing_chats == []


class _Flaky(LoopbackAdapter):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self.calls += 1
        if self.calls == 1:
            raise ConnectionError("platform unreachable")
        await super().typing(chat_id, thread_id)


async def test_a_failing_indicator_neither_breaks_the_block_nor_stops_refreshing() -> None:
    adapter = _Flaky()
    async with typing(adapter, "c1", None, every=0.01):
        await eventually(lambda: adapter.typing_chats, "an indicator after the failed one")
    assert adapter.calls >= 2 and adapter.typing_chats[0] == "c1"

"""A reply goes out whole: no other reply lands between its chunks, and /stop or a newer
message during its delivery neither strands the rest in the outbox nor cuts it off."""

from __future__ import annotations

import asyncio

import pytest

import gateway.progress
from gateway.events import ChatType, OutboundMessage
from tests.fakes.adapter import LoopbackAdapter
from tests.fakes.model_server import ModelServer, Text, Timeout, ToolCalls, ToolUse
from tests.gateway.conftest import GatewayFactory


class SlowAdapter(LoopbackAdapter):
    """Every send takes a moment, like a platform API over a real network."""

    async def send(self, message: OutboundMessage) -> str:
        await asyncio.sleep(0.15)
        return await super().send(message)


def long_reply(tag: str) -> str:
    """Three chunks of the loopback adapter's 4,096 characters."""
    return "\n\n".join(f"{tag}{n}: " + "word " * 150 for n in range(12))


def heads(texts: list[str]) -> list[str]:
    return [text.split(":")[0] for text in texts]


async def test_two_replies_in_one_group_chat_do_not_interleave(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    adapter = SlowAdapter()
    await start_gateway(adapter=adapter)  # a session per user in groups: two turns at once in one chat
    model_server.responder = lambda record: Text(long_reply("A" if "alice" in record.last_user_text else "B"))
    for user in ("alice", "bob"):
        await adapter.inject(f"@loopbot {user} asks", chat_id="g", user_id=user, chat_type=ChatType.GROUP, mentioned=True)
    await adapter.wait_sent(6)
    assert heads(adapter.texts("g")) in (["A0", "A5", "A10", "B0", "B5", "B10"], ["B0", "B5", "B10", "A0", "A5", "A10"])


@pytest.mark.parametrize("then", ["/stop", "and one more thing"])
async def test_stop_or_a_newer_message_during_delivery_lets_the_reply_finish(
    start_gateway: GatewayFactory, model_server: ModelServer, then: str
) -> None:
    adapter = SlowAdapter()
    overrides = {"sessions": {"debounce_ms": 0, "busy": "interrupt"}} if not then.startswith("/") else None
    running = await start_gateway(overrides, adapter=adapter)
    model_server.script(Text(long_reply("A")), Text("B0: the next answer"))
    await adapter.inject("tell me a lot", chat_id="c1")
    await adapter.wait_sent(1)  # the first chunk is out, two to go
    await adapter.inject(then, chat_id="c1")
    await adapter.wait_sent(4)
    assert heads(adapter.texts("c1"))[:3] == ["A0", "A5", "A10"]  # whole, nothing in between
    async with asyncio.timeout(30):
        while await running.store.outbox_pending():
            await asyncio.sleep(0.02)


async def test_a_stopped_turn_leaves_its_progress_message_saying_so(
    start_gateway: GatewayFactory, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway.progress, "EDIT_INTERVAL", 0.0)
    running = await start_gateway()
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "Lisbon"})), Timeout(seconds=8))
    await running.adapter.inject("what did we plan for Lisbon?", chat_id="c1")
    (progress,) = await running.adapter.wait_sent(1)
    assert progress.text.startswith("Working on it")
    await running.adapter.inject("/stop", chat_id="c1")
    await running.adapter.wait_sent(2)
    async with asyncio.timeout(30):
        while not running.adapter.edits:
            await asyncio.sleep(0.02)
    assert running.adapter.edits[-1].text == "Stopped. Used: session_search"

"""A reply goes out whole: no other reply lands between its chunks, and /stop or a newer
message during its delivery neither strands the rest in the outbox nor cuts it off. Chunks
left from the last run go out in the background, each chat on its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

import gateway.delivery.progress
from adapters.contract import AccessPolicy, ChatType, OutboundMessage, TransientDeliveryError
from config import load_config
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.runner import search_function
from storage import Store
from tests.fakes.adapter import LoopbackAdapter
from tests.fakes.model_server import ModelServer, Text, Timeout, ToolCalls, ToolUse
from tests.gateway.conftest import GatewayFactory, delivered, write_config
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL


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
    await delivered(running.store)


async def test_a_stopped_turn_leaves_its_progress_message_saying_so(
    start_gateway: GatewayFactory, model_server: ModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gateway.delivery.progress, "EDIT_INTERVAL", 0.0)
    running = await start_gateway()
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "Lisbon"})), Timeout(seconds=8))
    await running.adapter.inject("what did we plan for Lisbon?", chat_id="c1")
    (progress,) = await running.adapter.wait_sent(1)
    assert progress.text.startswith("Working on it")
    await running.adapter.inject("/stop", chat_id="c1")
    await running.adapter.wait_sent(2)
    await eventually(lambda: running.adapter.edits, "the progress message to be edited")
    assert running.adapter.edits[-1].text == "Stopped. Used: session_search"


class DownAdapter(LoopbackAdapter):
    """A second platform whose API cannot be reached right now."""

    platform = "down"

    async def send(self, message: OutboundMessage) -> str:
        raise TransientDeliveryError("connection reset by peer")


async def test_a_chunk_left_for_a_platform_that_is_down_holds_up_no_one_else(
    model_server: ModelServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    loaded = load_config(write_config(home, model_server), {"SWITCHBOARD_HOME": str(home)}, create_home=True)
    store = await Store.open(loaded.db_path)
    await store.outbox_add("down:1", "down", "d1", None, ["a reply queued before the restart"])  # left by the last run
    healthy = LoopbackAdapter()
    gateway = Gateway(loaded, store, [DownAdapter(), healthy], build_agent(loaded, search=search_function(store)),
                      extra_access={"loopback": AccessPolicy(allow_all=True)})  # fmt: skip
    try:
        await gateway.start()  # does not wait for the old chunk's retries
        await healthy.inject("hi", chat_id="c1")
        await healthy.wait_sent(1)
        row = await store.outbox_get(1)
        assert row is not None and row.status == "pending"  # still being retried, in the background
    finally:
        await gateway.shutdown()

"""``sessions.max_concurrent_turns`` limits the agents working at once, not the replies being delivered."""

from __future__ import annotations

import asyncio

import pytest

from adapters.contract import RateLimited
from tests.fakes.model_server import ModelServer, Text, Timeout, ToolCalls, ToolUse
from tests.gateway.conftest import GatewayFactory
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL


async def test_no_more_agents_work_at_once_than_the_limit(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway({"sessions": {"max_concurrent_turns": 2}})
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    model_server.script(Timeout(seconds=2.0), Timeout(seconds=2.0))  # the first two model calls take a while
    for chat in "abcde":
        await running.adapter.inject(f"hello from {chat}", chat_id=chat)
    await eventually(lambda: len(model_server.requests) == 2)
    await asyncio.sleep(0.3)  # a chance to break the limit: nothing observable says the waiting turns had it
    assert len(model_server.requests) == 2  # three sessions wait for a slot
    assert running.gateway.lanes.running() == 5
    await eventually(lambda: all(running.adapter.texts(chat) for chat in "abcde"))
    assert len(model_server.requests) == 5


async def test_a_rate_limited_reply_does_not_keep_other_chats_waiting(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway({"sessions": {"max_concurrent_turns": 1}})
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    running.adapter.failures = [RateLimited(1.5)]  # the platform tells chat "a" to wait
    await running.adapter.inject("first", chat_id="a")
    await eventually(lambda: not running.adapter.failures)  # a's reply is waiting out the rate limit
    await running.adapter.inject("second", chat_id="b")
    (first_sent,) = await running.adapter.wait_sent(1)
    assert (first_sent.chat_id, first_sent.text) == ("b", "re: second")
    await running.adapter.wait_sent(2)
    assert running.adapter.texts("a") == ["re: first"]


async def test_a_rate_limited_progress_message_does_not_keep_other_chats_waiting(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway({"sessions": {"max_concurrent_turns": 1}})
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "plans"})), Text("re: first"))
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    running.adapter.failures = [RateLimited(1.5)]  # the progress message of chat "a" must wait
    await running.adapter.inject("first", chat_id="a")
    await eventually(lambda: not running.adapter.failures and len(model_server.requests) == 2)  # a's agent is done
    await running.adapter.inject("second", chat_id="b")
    (first_sent,) = await running.adapter.wait_sent(1)
    assert (first_sent.chat_id, first_sent.text) == ("b", "re: second")
    await running.adapter.wait_sent(3)
    assert running.adapter.texts("a")[0].startswith("Working on it") and running.adapter.texts("a")[1] == "re: first"

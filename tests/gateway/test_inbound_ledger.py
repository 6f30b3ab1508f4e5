"""One place settles every inbound event: each outcome marks the event done exactly once.

Driven through the real gateway with the in-process adapter; what was settled, and how, is
read from ``switchboard_inbound_settled_total`` and the inbox itself.
"""

from __future__ import annotations

import asyncio

import pytest

from adapters.contract import AccessPolicy, ChatType
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.gateway.conftest import GatewayFactory, Running, settled
from tests.gateway.engines import count, refused
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL


def settlements(running: Running) -> dict[str, float]:
    """How many events were settled, by outcome (the loopback platform's only)."""
    return {outcome: n for (platform, outcome), n in running.gateway.metrics.settled.totals.items() if platform == "loopback"}


async def done_once(running: Running, expected: dict[str, float]) -> None:
    """Every accepted event is done, and was settled once, the way ``expected`` says."""
    await settled(running.store)
    await eventually(lambda: len(running.gateway.lanes) == 0)
    assert settlements(running) == expected
    (accepted,) = await count(running.database, "SELECT count(*) FROM inbox")
    assert sum(expected.values()) == accepted  # one settlement per event: none twice, none left out


async def test_a_message_answered_by_its_turn(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    await running.adapter.inject("hello")
    await running.adapter.wait_sent(1)
    await done_once(running, {"answered": 1})


async def test_a_command(start_gateway: GatewayFactory) -> None:
    running = await start_gateway()
    await running.adapter.inject("/help")
    await running.adapter.wait_sent(1)
    await done_once(running, {"command": 1})


async def test_messages_ignored_with_a_reason(start_gateway: GatewayFactory) -> None:
    running = await start_gateway(policy=AccessPolicy())  # nobody is let in by the config
    await running.adapter.inject("hello everyone", chat_type=ChatType.GROUP, chat_id="group-1")  # not mentioned
    await running.adapter.inject("hi, who are you?", user_id="stranger")  # an unknown user in a DM: pairing
    [offer] = await running.adapter.wait_sent(1)
    assert "stranger" in offer.text
    await done_once(running, {"ignored": 2})


async def test_a_stopped_turn(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.gate = asyncio.Event()
    await running.adapter.inject("think about this for a long time")
    await eventually(lambda: len(model_server.requests) == 1)
    await running.adapter.inject("/stop")
    await running.adapter.wait_sent(1)
    model_server.gate.set()
    await done_once(running, {"stopped": 1, "command": 1})


async def test_a_turn_given_up_with_the_apology(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway({"gateway": {"tool_progress": False}})
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "plans"})))
    async with refused(running.database, "messages", "INSERT", "NEW.tool_calls IS NOT NULL"):  # cannot be stored
        await running.adapter.inject("what were my plans?")
        [apology] = await running.adapter.wait_sent(1)
        assert apology.text.startswith("Sorry, something went wrong on my side")
        await done_once(running, {"given_up": 1})

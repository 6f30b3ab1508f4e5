"""Chat commands through the whole gateway."""

from __future__ import annotations

import pytest

from tests.fakes.model_server import ModelServer, RequestRecord, Text, Timeout
from tests.gateway.conftest import GatewayFactory, Running
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL


def is_summary(record: RequestRecord) -> bool:
    system = record.body.get("system") or []
    return "".join(block.get("text", "") for block in system).startswith("You condense conversations")


async def test_help_status_usage(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    await running.adapter.inject("/help@loopbot")
    (help_reply,) = await running.adapter.wait_sent(1)
    assert "/new" in help_reply.text and "/compress" in help_reply.text
    assert "/memory - " in help_reply.text and "/forget - " in help_reply.text
    await running.adapter.inject("/status")
    await running.adapter.wait_sent(2)
    assert running.adapter.texts()[-1].startswith("No conversation yet")
    await running.adapter.inject("hello")
    await running.adapter.wait_sent(3)
    await turns_finished(running)
    await running.adapter.inject("/status")
    await running.adapter.wait_sent(4)
    status = running.adapter.texts()[-1]
    assert "Session: " in status and "Messages: 2" in status and "Model: claude-sonnet-4-6" in status
    assert "Now: waiting for your next message" in status
    await running.adapter.inject("/usage")
    await running.adapter.wait_sent(5)
    usage = running.adapter.texts()[-1]
    assert "This conversation:" in usage and "Today (all conversations):" in usage and "1 model calls" in usage


async def test_new_starts_a_fresh_session(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    await running.adapter.inject("remember 42")
    await running.adapter.wait_sent(1)
    await running.adapter.inject("/reset")
    await running.adapter.wait_sent(2)
    assert running.adapter.texts()[-1].startswith("Started a new conversation")
    await running.adapter.inject("what number?")
    await running.adapter.wait_sent(3)
    sessions = await running.store.list_sessions()
    assert sorted(s.end_reason or "open" for s in sessions) == ["open", "user"]
    last = model_server.requests[-1].body["messages"]
    assert "remember 42" not in str(last)


async def test_compress_with_a_focus_summarises_and_splits(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway({"compression": {"protect_last_n": 2}, "model": {"context_length": 20000}})
    model_server.responder = lambda r: Text("## Goal\nthe database") if is_summary(r) else Text("ok " + "text " * 200)
    await fill_a_long_conversation(running, model_server)
    await running.adapter.inject("/compress the database migration")
    await running.adapter.wait_sent(7)
    reply = running.adapter.texts()[-1]
    assert reply.startswith("Summarised "), reply
    summary_calls = [r for r in model_server.requests if is_summary(r)]
    assert summary_calls and "the database migration" in str(summary_calls[-1].body["messages"])
    sessions = await running.store.list_sessions()
    assert [s.end_reason for s in sessions if s.end_reason] == ["compression"]


async def test_commands_are_answered_while_a_turn_runs(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    model_server.script(Timeout(seconds=3))
    await running.adapter.inject("slow one")
    await eventually(lambda: model_server.requests, "the model to be asked")
    await running.adapter.inject("/status")
    (status,) = await running.adapter.wait_sent(1)
    assert "Now: answering now" in status.text


async def fill_a_long_conversation(running: Running, model_server: ModelServer) -> None:
    for index in range(6):
        await running.adapter.inject(f"step {index}: " + "words " * 400)
        await running.adapter.wait_sent(index + 1)
    await turns_finished(running)


async def turns_finished(running: Running) -> None:
    """Wait until no turn runs: a turn finishes just after its reply is sent."""
    await eventually(lambda: not running.gateway.lanes.running(), "every turn to finish")


async def test_a_message_sent_during_compress_lands_in_the_summarised_session(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway({"compression": {"protect_last_n": 2}, "model": {"context_length": 20000}})
    model_server.responder = lambda r: Text("ok " + "text " * 200)
    await fill_a_long_conversation(running, model_server)
    model_server.responder = lambda r: Timeout(seconds=1.0) if is_summary(r) else Text("noted")
    await running.adapter.inject("/compress")
    await eventually(lambda: any(is_summary(r) for r in model_server.requests), "the summary to be asked for")
    await running.adapter.inject("one more thing")  # arrives while the summary is being written
    await running.adapter.wait_sent(8)
    assert running.adapter.texts()[6].startswith("Summarised ") and running.adapter.texts()[7] == "noted"
    (child,) = [s for s in await running.store.list_sessions() if s.end_reason is None]
    assert "one more thing" in [m.content for m in await running.store.load_messages(child.id)][-2]


async def test_compress_in_a_new_chat_starts_no_session(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    await running.adapter.inject("/compress")
    (reply,) = await running.adapter.wait_sent(1)
    assert "still short" in reply.text
    assert await running.store.list_sessions() == [] and not model_server.requests

"""Session hygiene at 85% (estimated and API-reported paths), lineage splits, and shutdown/resume."""

from __future__ import annotations

import asyncio
import json
import urllib.request

import pytest

from storage import NewMessage, SessionRecord, Store
from gateway.turn.runner import HYGIENE_FAILED_NOTICE
from tests.fakes.model_server import InvalidRequest, ModelServer, RequestRecord, Text, Timeout
from tests.gateway.conftest import GatewayFactory, settled
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL

SMALL_WINDOW = {
    "model": {"context_length": 4000},
    "compression": {"threshold": 0.99, "hygiene_threshold": 0.85, "protect_last_n": 4},
}


def is_summary(record: RequestRecord) -> bool:
    system = record.body.get("system") or []
    text = system if isinstance(system, str) else "".join(block.get("text", "") for block in system)
    return text.startswith("You condense conversations")


def summary_or_echo(record: RequestRecord) -> Text:
    if is_summary(record):
        return Text("## Goal\nKeep helping.\n## Progress\n### Done\n- talked")
    return Text("re: " + record.last_user_text[:40])


def oversized() -> list[NewMessage]:
    """A stored conversation the estimate puts above 85% of ``SMALL_WINDOW``."""
    return [NewMessage(role=r, content=f"{r} {i}: " + "lorem ipsum dolor " * 60) for i in range(14) for r in ("user", "assistant")]


async def stored_session(store: Store, messages: list[NewMessage]) -> SessionRecord:
    """The DM session of ``chat-1`` on the loopback adapter, holding ``messages``."""
    session = await store.create_session(session_key="loopback:dm:chat-1", platform="loopback", chat_id="chat-1",
                                         system_prompt="You are a test.", model="claude-sonnet-4-6")  # fmt: skip
    await store.append_messages(session.id, messages)
    return session


async def test_hygiene_compacts_an_oversized_stored_session_from_the_estimate(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(SMALL_WINDOW)
    typing_when_summarising: list[int] = []

    def responder(record: RequestRecord) -> Text:
        if is_summary(record):
            typing_when_summarising.append(len(running.adapter.typing_chats))
        return summary_or_echo(record)

    model_server.responder = responder
    store = running.store
    big = oversized()
    session = await stored_session(store, big)
    await running.adapter.inject("and now?")
    await running.adapter.wait_sent(1)
    assert is_summary(model_server.requests[0]), "hygiene must compact before the turn's model call"
    assert typing_when_summarising == [1], "the chat shows typing while the summary is written"
    chain = await store.lineage(session.id)
    assert [s.end_reason for s in chain] == ["compression", None]
    child = chain[-1]
    assert child.parent_session_id == session.id and child.session_key == session.session_key
    messages = await store.load_messages(child.id)
    assert messages[-1].content.startswith("re: ") and messages[-2].content == "and now?"
    assert len(messages) < len(big)


async def test_a_failed_hygiene_compaction_drops_nothing_tells_the_user_once_and_the_turn_runs(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(SMALL_WINDOW)
    model_server.responder = lambda record: InvalidRequest() if is_summary(record) else summary_or_echo(record)
    store = running.store
    big = oversized()
    session = await stored_session(store, big)
    await running.adapter.inject("and now?")
    await running.adapter.wait_sent(2)
    summaries = sum(is_summary(r) for r in model_server.requests)
    assert summaries >= 1
    await store.add_usage(session.id, last_prompt_tokens=3500)  # the API says the prompt is still too large
    # Hygiene fires again and fails again: no second notice (the gateway remembers, and the notice's
    # outbox key is the session's, so even after a restart it would not go out twice).
    await running.adapter.inject("and again?")
    await running.adapter.wait_sent(3)
    assert sum(is_summary(r) for r in model_server.requests) > summaries
    assert running.adapter.texts() == [HYGIENE_FAILED_NOTICE, "re: and now?", "re: and again?"]
    assert [s.end_reason for s in await store.lineage(session.id)] == [None]  # not split
    messages = await store.load_messages(session.id)
    assert [m.content for m in messages[: len(big)]] == [m.content for m in big]  # nothing dropped
    assert [m.content for m in messages[len(big) :]] == ["and now?", "re: and now?", "and again?", "re: and again?"]


async def test_hygiene_uses_the_api_reported_prompt_size(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway(SMALL_WINDOW)
    model_server.responder = summary_or_echo
    store = running.store
    # Stored messages the estimate puts well below 85% of the window, but the API said the last prompt was larger.
    stored = [NewMessage(role=r, content=f"{r} {i}: " + "lorem ipsum " * 40) for i in range(7) for r in ("user", "assistant")]
    session = await stored_session(store, stored)
    await store.add_usage(session.id, input_tokens=3500, last_prompt_tokens=3500)
    await running.adapter.inject("next")
    await running.adapter.wait_sent(1)
    assert is_summary(model_server.requests[0])
    assert len(await store.lineage(session.id)) == 2


async def test_small_sessions_are_left_alone(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway(SMALL_WINDOW)
    model_server.responder = summary_or_echo
    await running.adapter.inject("hi")
    await running.adapter.wait_sent(1)
    assert not any(is_summary(r) for r in model_server.requests)
    assert len(await running.store.list_sessions()) == 1


async def test_with_compression_off_an_oversized_session_is_not_compacted(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    # About 5,200 tokens: past 85% of a 6,000-token window (hygiene's line), within the window itself
    # (with compression off the agent still compacts a prompt that would not fit at all).
    compression = {**SMALL_WINDOW["compression"], "enabled": False}
    running = await start_gateway({"model": {"context_length": 6000}, "compression": compression})
    model_server.responder = summary_or_echo
    session = await stored_session(running.store, oversized())
    await running.adapter.inject("and now?")
    await running.adapter.wait_sent(1)
    assert not any(is_summary(r) for r in model_server.requests)
    assert [s.id for s in await running.store.lineage(session.id)] == [session.id]


async def test_compaction_inside_a_turn_splits_the_session(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway({"model": {"context_length": 6000}, "compression": {"threshold": 0.5, "hygiene_threshold": 0.99, "protect_last_n": 4}})
    # Each turn adds about 300 tokens: the agent passes 50% of the 6,000-token window within ten turns.
    model_server.responder = summary_or_echo
    for index in range(10):
        await running.adapter.inject(f"question {index}: " + "details " * 300)
        await running.adapter.wait_sent(index + 1)
    assert any(is_summary(r) for r in model_server.requests)
    sessions = await running.store.list_sessions(limit=20)
    assert any(s.end_reason == "compression" for s in sessions)
    open_sessions = [s for s in sessions if s.ended_at is None]
    assert len(open_sessions) == 1
    chain = await running.store.lineage(open_sessions[0].id)
    assert len(chain) >= 2 and chain[0].parent_session_id is None


async def test_shutdown_mid_turn_resumes_and_answers_once_after_restart(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    first = await start_gateway({"gateway": {"drain_timeout": 0.2}})
    model_server.script(Timeout(seconds=5))
    await first.adapter.inject("a question that takes a while")
    await eventually(lambda: len(model_server.requests) == 1)
    await first.gateway.shutdown()
    assert first.adapter.sent == []
    model_server.reset()
    model_server.responder = lambda record: Text("the answer")
    second = await start_gateway(home=first.home)
    await second.adapter.wait_sent(1)
    await settled(second.store)
    assert second.adapter.texts() == ["the answer"]
    (session,) = await second.store.list_sessions()
    roles = [m.role for m in await second.store.load_messages(session.id)]
    assert roles == ["user", "assistant"]  # the user message was stored once


async def test_metrics_and_health_while_running(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway()
    await running.adapter.inject("hi")
    await running.adapter.wait_sent(1)
    url = running.gateway.health_url or ""

    def fetch(path: str) -> tuple[int, bytes]:
        with urllib.request.urlopen(url.replace("/health", path), timeout=10) as response:
            return response.status, response.read()

    status, body = await asyncio.to_thread(fetch, "/health")
    health = json.loads(body)
    assert status == 200 and health["adapters"]["loopback"]["seconds_since_inbound"] is not None
    assert health["database"] == {"ok": True} and "queue_depth" in health and "turns_running" in health
    status, body = await asyncio.to_thread(fetch, "/metrics")
    text = body.decode()
    assert 'switchboard_inbound_total{platform="loopback"} 1.0' in text
    assert 'switchboard_turns_total{outcome="answered",platform="loopback"} 1.0' in text
    assert "switchboard_tokens_total" in text and "switchboard_lane_wait_seconds_count 1.0" in text
    assert "switchboard_queue_wait_seconds_count 1.0" in text

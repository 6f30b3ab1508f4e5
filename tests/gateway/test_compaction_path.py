"""Compaction has one path: every compaction of a session goes through its agent session's entry and lock.

The pre-turn hygiene compaction, ``/compress`` and the agent's compaction inside a turn all
run under ``AgentSession``'s lock, so two compactions of one session never run at once: a
second one waits for the first instead of meeting it half done.
"""

from __future__ import annotations

import asyncio

from structlog.testing import capture_logs

from adapters.contract import ChatType
from gateway.inbound.session_key import SessionKey
from tests.fakes.model_server import ModelServer
from tests.gateway.conftest import GatewayFactory
from tests.gateway.test_compaction_e2e import SMALL_WINDOW, is_summary, oversized, stored_session, summary_or_echo
from tests.waiting import eventually


async def test_a_hygiene_compaction_waits_for_a_compaction_of_the_session_already_running(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(SMALL_WINDOW)
    model_server.responder = summary_or_echo
    model_server.gate = asyncio.Event()  # every model call waits until the test lets it through
    session = await stored_session(running.store, oversized())
    conversations = running.gateway.conversations
    conversation = await conversations.open(SessionKey("loopback", ChatType.DM, "chat-1", user_id="user-1"))
    agent = conversations.agent_session(conversation.record, conversation.records)
    with capture_logs() as logs:
        # A compaction of the session is summarising (what /compress runs, taken here without the
        # lane that keeps /compress and turns of one chat apart) when a turn's hygiene wants one too.
        manual = asyncio.create_task(agent.compact(conversation.history))
        await eventually(lambda: len(model_server.requests) == 1)
        await running.adapter.inject("and now?")
        await eventually(lambda: any(e["event"] == "hygiene.compacting" for e in logs))
        model_server.gate.set()
        await running.adapter.wait_sent(1)
        assert (await manual).compacted
    kinds = ["summary" if is_summary(r) else "answer" for r in model_server.requests]
    skipped = [e for e in logs if e["event"] in ("compaction.skipped", "hygiene.not_compacted")]
    assert skipped == [], "the hygiene compaction ran into the running one instead of waiting for it"
    assert kinds == ["summary", "summary", "answer"]
    assert [s.end_reason for s in await running.store.lineage(session.id)] == ["compression", None]

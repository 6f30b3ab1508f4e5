"""The guarantees the gateway builds on, checked through the contract alone, on every engine.

Inbound events are stored once however often a platform redelivers them; a turn ends all or nothing;
the outbox hands each chunk to delivery until it is marked sent, and a replayed turn queues nothing
new; and whatever a user types into search is a query, never an error.
"""

from __future__ import annotations

import asyncio

import pytest

from storage import (
    MessageAppend,
    NewMessage,
    OutboxChunk,
    SessionNotFoundError,
    StorageEngine,
    TurnEnd,
    Usage,
)
from tests.storage.conformance.conftest import Opener


def reply(turn_id: str, texts: list[str], **fields: object) -> TurnEnd:
    chunks = [OutboxChunk(text=t) for t in texts]
    return TurnEnd(turn_id, "telegram", "1", None, chunks, **fields)  # type: ignore[arg-type]


async def test_an_inbound_event_is_stored_once_however_often_it_arrives(engine: StorageEngine, reopen: Opener) -> None:
    at_once = [engine.inbox_accept("telegram", "u1", "telegram:1", {"text": "hi"}) for _ in range(5)]
    firsts = await asyncio.gather(*at_once)
    assert sorted(firsts) == [False, False, False, False, True]
    assert await engine.inbox_accept("telegram", "u1", "telegram:1", {"text": "again"}) is False
    assert await engine.inbox_accept("discord", "u1", "discord:1", {}) is True  # the id is per platform

    durable = await reopen()  # stored before the accept returned: another store sees it
    unfinished = await durable.inbox_unfinished()
    assert [(r.platform, r.event_id, r.payload) for r in unfinished] == [
        ("telegram", "u1", {"text": "hi"}), ("discord", "u1", {}),
    ]  # fmt: skip
    assert await durable.inbox_mark_done("telegram", "u1") is True
    assert await durable.inbox_mark_done("telegram", "u1") is False
    assert [r.event_id for r in await engine.inbox_unfinished()] == ["u1"]  # discord's is left
    assert await engine.inbox_accept("telegram", "u1", "telegram:1", {}) is False  # done is still seen


async def test_a_turn_ends_all_or_nothing_and_once(engine: StorageEngine, reopen: Opener) -> None:
    session = await engine.create_session(session_key="telegram:1", platform="telegram", chat_id="1")
    await engine.inbox_accept("telegram", "u1", "telegram:1", {})
    orphan = MessageAppend("no-such-session", [NewMessage("assistant", "lost")])
    with pytest.raises(SessionNotFoundError):
        await engine.finish_turn(reply("turn-u1", ["lost"], answered=[("telegram", "u1")], messages=orphan))
    assert await engine.outbox_pending() == []
    assert [r.event_id for r in await engine.inbox_unfinished()] == ["u1"]

    final = MessageAppend(session.id, [NewMessage("assistant", "the answer")], Usage(input_tokens=7, cost_usd=0.5))
    rows = await engine.finish_turn(reply("turn-u1", ["the answer", "part 2"], answered=[("telegram", "u1")],
                                          messages=final))  # fmt: skip
    assert [(r.chunk_index, r.text, r.status) for r in rows] == [(0, "the answer", "pending"), (1, "part 2", "pending")]

    durable = await reopen()
    stored = await durable.get_session(session.id)
    assert stored is not None and (stored.message_count, stored.input_tokens, stored.cost_usd) == (1, 7, 0.5)
    assert [m.content for m in await durable.load_messages(session.id)] == ["the answer"]
    assert await durable.inbox_unfinished() == []
    again = await durable.finish_turn(reply("turn-u1", ["the answer", "part 2"], answered=[("telegram", "u1")]))
    assert [r.id for r in again] == [r.id for r in rows]  # a replayed turn queues nothing new
    assert [r.id for r in await durable.outbox_pending()] == [r.id for r in rows]


async def test_the_outbox_keeps_a_chunk_pending_until_it_is_sent_once(engine: StorageEngine) -> None:
    queued = await engine.outbox_add("notice-1", "telegram", "1", None, ["one", OutboxChunk(text="two")])
    assert [(r.chunk_index, r.text) for r in queued] == [(0, "one"), (1, "two")]
    replayed = await engine.outbox_add("notice-1", "telegram", "1", None, ["one, again", "two, again"])
    assert [(r.id, r.text) for r in replayed] == [(r.id, r.text) for r in queued]  # kept as first queued

    first, second = queued
    assert await engine.outbox_mark_failed(first.id, "timed out") is True
    failed = await engine.outbox_get(first.id)
    assert failed is not None and (failed.status, failed.attempts, failed.last_error) == ("pending", 1, "timed out")
    assert [r.id for r in await engine.outbox_pending()] == [first.id, second.id]

    assert await engine.outbox_mark_sent(first.id, "m-1") is True
    assert await engine.outbox_mark_sent(first.id, "m-again") is False  # sent once: the first mark stays
    sent = await engine.outbox_get(first.id)
    assert sent is not None and (sent.status, sent.platform_message_id) == ("sent", "m-1")
    assert [r.id for r in await engine.outbox_pending()] == [second.id]

    assert await engine.outbox_mark_failed(second.id, "chat is gone", give_up=True) is True
    assert await engine.outbox_pending() == []


@pytest.mark.parametrize(
    "query",
    ["chat-send", "P2.2", '"unbalanced', 'un"balanced', "key: value", "NEAR(", "AND", "-", "*", "()", '""', "", "   "],
)
async def test_search_takes_whatever_a_user_types(engine: StorageEngine, query: str) -> None:
    session = await engine.create_session(session_key="telegram:1", platform="telegram", chat_id="1")
    await engine.append_messages(session.id, [NewMessage("user", "run chat-send for P2.2 with key: value")])
    await engine.index_words()
    hits = await engine.search(query)
    assert all(hit.session_id == session.id for hit in hits)


@pytest.mark.parametrize("query", ["chat-send", "P2.2", "key: value", "send", "P2"])
async def test_search_finds_what_was_written_with_punctuation(engine: StorageEngine, query: str) -> None:
    session = await engine.create_session(session_key="telegram:1", platform="telegram", chat_id="1")
    written = await engine.append_messages(session.id, [NewMessage("user", "run chat-send for P2.2 with key: value")])
    await engine.append_messages(session.id, [NewMessage("assistant", "something else entirely")])
    await engine.index_words()
    assert [hit.message_id for hit in await engine.search(query)] == [written[0].id]

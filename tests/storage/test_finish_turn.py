"""``Store.finish_turn``: a turn's final messages, usage, reply chunks and finished events in one transaction."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from storage import (
    Fault,
    MessageAppend,
    NewMessage,
    OutboxChunk,
    RetryPolicy,
    SessionNotFoundError,
    Store,
    TurnEnd,
    Usage,
    WriteFailedError,
    fault_of,
)
from tests.storage.conftest import transaction_sizes
from tests.storage.test_concurrency import lock_held


def end(
    turn_id: str,
    chunks: Sequence[str | OutboxChunk],
    *,
    answered: Sequence[tuple[str, str]] = (),
    messages: MessageAppend | None = None,
    chat: str = "1",
) -> TurnEnd:
    return TurnEnd(
        turn_id, "telegram", chat, None, [c if isinstance(c, OutboxChunk) else OutboxChunk(text=c) for c in chunks],
        answered=answered, messages=messages,
    )  # fmt: skip


@contextmanager
def refused(db_path: Path, table: str, event: str, when: str = "1") -> Iterator[None]:
    """Every ``event`` (INSERT, UPDATE) on ``table`` fails while this lasts (a trigger added from outside)."""
    with sqlite3.connect(db_path) as db:
        db.execute(f"CREATE TRIGGER refuse BEFORE {event} ON {table} WHEN {when} "
                   "BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END")  # fmt: skip
    try:
        yield
    finally:
        with sqlite3.connect(db_path) as db:
            db.execute("DROP TRIGGER refuse")


async def test_a_queued_reply_finishes_the_events_it_answers(store: Store) -> None:
    for n in range(3):
        await store.inbox_accept("telegram", f"u{n}", "telegram:1", {"n": n})
    rows = await store.finish_turn(end("turn-u0", ["answer"], answered=[("telegram", "u0"), ("telegram", "u1")]))
    assert [r.text for r in rows] == ["answer"]
    assert [r.event_id for r in await store.inbox_unfinished()] == ["u2"]
    # Queued again after a crash: the same rows, and the events stay done.
    assert await store.finish_turn(end("turn-u0", ["answer"], answered=[("telegram", "u0")])) == rows
    assert [r.event_id for r in await store.inbox_unfinished()] == ["u2"]


async def test_a_reply_and_the_message_it_delivers_are_stored_together(store: Store) -> None:
    session = await store.create_session(session_key="telegram:dm:1", platform="telegram", chat_id="1")
    await store.append_messages(session.id, [NewMessage("user", "question")])
    for n in range(2):
        await store.inbox_accept("telegram", f"u{n}", "telegram:1", {"n": n})
    usage = Usage(input_tokens=11, output_tokens=4, last_prompt_tokens=120, cost_usd=0.25)
    reply = MessageAppend(session.id, [NewMessage("assistant", "the answer")], usage)
    rows = await store.finish_turn(end("turn-u0", ["the answer"], answered=[("telegram", "u0")], messages=reply))
    assert [(r.text, r.status) for r in rows] == [("the answer", "pending")]
    assert [r.event_id for r in await store.inbox_unfinished()] == ["u1"]
    assert [m.content for m in await store.load_messages(session.id)] == ["question", "the answer"]
    fresh = await Store.open(store.path)  # straight from the database, no cache or open-session map
    try:
        stored = await fresh.get_session(session.id)
        assert stored is not None and (stored.message_count, stored.input_tokens, stored.last_prompt_tokens) == (2, 11, 120)
        assert await store.find_open_session("telegram:dm:1") == stored  # this store's map moved along
        assert [m.content for m in await fresh.load_messages(session.id)] == ["question", "the answer"]
    finally:
        await fresh.close()


async def test_a_reply_without_chunks_still_stores_its_message_and_finishes_its_events(store: Store) -> None:
    session = await store.create_session(session_key="telegram:dm:1", platform="telegram", chat_id="1")
    await store.inbox_accept("telegram", "u0", "telegram:1", {})
    rows = await store.finish_turn(end("turn-u0", [], answered=[("telegram", "u0")],
                                       messages=MessageAppend(session.id, [NewMessage("assistant", "  ")])))  # fmt: skip
    assert rows == [] and await store.outbox_pending() == []
    assert await store.inbox_unfinished() == []
    assert [m.content for m in await store.load_messages(session.id)] == ["  "]


async def test_writes_are_queued_in_call_order_whether_or_not_they_carry_messages(store: Store) -> None:
    session = await store.create_session(session_key="telegram:dm:1", platform="telegram", chat_id="1")
    reply = store.finish_turn(end("turn-1", ["a"], messages=MessageAppend(session.id, [NewMessage("assistant", "a")])))
    later = store.append_messages(session.id, [NewMessage("user", "b")])
    await asyncio.gather(later, reply)
    assert [(m.seq, m.content) for m in await store.load_messages(session.id)] == [(1, "a"), (2, "b")]


async def test_no_reply_is_queued_when_its_message_cannot_be_stored(store: Store) -> None:
    await store.inbox_accept("telegram", "u0", "telegram:1", {})
    orphan = MessageAppend("no-such-session", [NewMessage("assistant", "lost")])
    with pytest.raises(SessionNotFoundError):
        await store.finish_turn(end("turn-u0", ["lost"], answered=[("telegram", "u0")], messages=orphan))
    assert await store.outbox_pending() == []
    assert [r.event_id for r in await store.inbox_unfinished()] == ["u0"]


async def test_no_message_is_stored_when_its_reply_cannot_be_queued(store: Store) -> None:
    session = await store.create_session(session_key="telegram:dm:1", platform="telegram", chat_id="1")
    broken = OutboxChunk(text=None)  # type: ignore[arg-type]  # the outbox refuses a chunk without text
    with pytest.raises(Exception, match="NOT NULL"):
        await store.finish_turn(end("turn-x", [broken], messages=MessageAppend(session.id, [NewMessage("assistant", "x")])))
    assert await store.load_messages(session.id) == []
    found = await store.find_open_session("telegram:dm:1")
    assert found is not None and found.message_count == 0


async def _turn_half_written(store: Store, db_path: Path) -> tuple[str, TurnEnd]:
    session = await store.create_session(session_key="telegram:dm:1", platform="telegram", chat_id="1")
    await store.append_messages(session.id, [NewMessage("user", "question")])
    await store.inbox_accept("telegram", "u0", "telegram:1", {})
    usage = Usage(input_tokens=11, output_tokens=4, last_prompt_tokens=120, cost_usd=0.25)
    final = MessageAppend(session.id, [NewMessage("assistant", "the answer")], usage)
    return session.id, end("turn-u0", ["the answer, part 1", "part 2"], answered=[("telegram", "u0")], messages=final)


async def _nothing_of_the_turn_is_stored(db_path: Path, session_id: str) -> None:
    fresh = await Store.open(db_path)  # what the file holds, past every cache
    try:
        stored = await fresh.get_session(session_id)
        assert stored is not None and (stored.message_count, stored.input_tokens, stored.cost_usd) == (1, 0, 0.0)
        assert [m.content for m in await fresh.load_messages(session_id)] == ["question"]
        assert await fresh.outbox_pending() == []
        assert [r.event_id for r in await fresh.inbox_unfinished()] == ["u0"]
    finally:
        await fresh.close()


@pytest.mark.parametrize(("table", "event"), [("inbox", "UPDATE"), ("outbox", "INSERT")])
async def test_a_turn_end_that_fails_half_way_leaves_nothing_of_it(
    store: Store, db_path: Path, table: str, event: str
) -> None:
    # The answer's message and usage are written first, then the events are marked done, then the
    # chunks queued: a failure at either later step takes the earlier ones back with it.
    session_id, turn = await _turn_half_written(store, db_path)
    with refused(db_path, table, event), pytest.raises(WriteFailedError, match="simulated write failure"):
        await store.finish_turn(turn)
    assert [m.content for m in await store.load_messages(session_id)] == ["question"]
    await _nothing_of_the_turn_is_stored(db_path, session_id)
    # Tried again once the database takes it: the whole end, once.
    rows = await store.finish_turn(turn)
    assert [r.text for r in rows] == ["the answer, part 1", "part 2"]
    assert [m.content for m in await store.load_messages(session_id)] == ["question", "the answer"]
    assert await store.inbox_unfinished() == []


async def test_a_turn_end_the_database_refuses_leaves_nothing_and_says_why(db_path: Path) -> None:
    store = await Store.open(db_path, retry=RetryPolicy(attempts=2, first_delay=0.01, max_delay=0.02))
    try:
        session_id, turn = await _turn_half_written(store, db_path)
        async with lock_held(db_path, 1.0):  # another process holds the write lock past the store's retries
            with pytest.raises(Exception) as caught:
                await store.finish_turn(turn)
        assert fault_of(caught.value) is Fault.LOCKED
        await _nothing_of_the_turn_is_stored(db_path, session_id)
    finally:
        await store.close()


async def test_turn_ends_share_the_writers_group_commit_and_one_failing_spoils_no_other(store: Store, db_path: Path) -> None:
    sessions = [await store.create_session(session_key=f"telegram:dm:{n}", platform="telegram", chat_id=str(n))
                for n in range(20)]  # fmt: skip
    for n in range(20):
        await store.inbox_accept("telegram", f"u{n}", f"telegram:dm:{n}", {})
    before = len(transaction_sizes(db_path))
    turns = [
        end(f"turn-{n}", [f"answer {n}"], answered=[("telegram", f"u{n}")], chat=str(n),
            messages=MessageAppend(s.id, [NewMessage("assistant", f"answer {n}")], Usage(output_tokens=n)))
        for n, s in enumerate(sessions)
    ]  # fmt: skip
    with refused(db_path, "outbox", "INSERT", when="NEW.turn_id = 'turn-7'"):
        results = await asyncio.gather(*(store.finish_turn(t) for t in turns), return_exceptions=True)
    assert [n for n, r in enumerate(results) if isinstance(r, BaseException)] == [7]
    assert [r.event_id for r in await store.inbox_unfinished()] == ["u7"]
    assert [m.content for m in await store.load_messages(sessions[7].id)] == []
    for n in (0, 19):
        assert [m.content for m in await store.load_messages(sessions[n].id)] == [f"answer {n}"]
    # Twenty turn ends went in as group commits, not a transaction each (and the failed batch was
    # written again one by one to find the faulty end).
    assert len(transaction_sizes(db_path)) - before < 20

"""``Store.finish_turn``: a turn's final messages, usage, reply chunks and finished events in one transaction."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from storage import (
    Fault,
    MessageAppend,
    NewMessage,
    OutboxChunk,
    RetryPolicy,
    SessionNotFoundError,
    SessionRecord,
    Store,
    TurnEnd,
    Usage,
    PostgresStore,
    WriteFailedError,
    fault_of,
)
from tests.storage.conftest import transaction_sizes
from tests.storage.test_concurrency import lock_held

pytestmark = pytest.mark.both_engines

Reopen = Callable[[], Awaitable[Store]]


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


@pytest.fixture
def database(engine_name: str, db_path: Path, request: pytest.FixtureRequest) -> Path | str:
    """Where the ``store`` fixture's database is: its file for SQLite, its URL for PostgreSQL."""
    if engine_name == "postgresql":
        dsn: str = request.getfixturevalue("postgres_dsn")
        return dsn
    return db_path


@pytest_asyncio.fixture
async def reopen(database: Path | str) -> AsyncIterator[Reopen]:
    """Opens another store on the ``store`` fixture's database (what it holds, past any cache); closed after."""
    opened: list[Store] = []

    async def open_one() -> Store:
        store: Store = await (PostgresStore.open(database) if isinstance(database, str) else Store.open(database))  # type: ignore[assignment]
        opened.append(store)
        return store

    try:
        yield open_one
    finally:
        for store in opened:
            await store.close()


@asynccontextmanager
async def refused(database: Path | str, table: str, event: str, when: str = "true") -> AsyncIterator[None]:
    """Every ``event`` (INSERT, UPDATE) on ``table`` for which ``when`` holds fails while this lasts (a trigger added
    from outside, on either engine)."""
    if isinstance(database, str):
        conn = await asyncpg.connect(database)
        try:
            await conn.execute("CREATE FUNCTION refuse() RETURNS trigger LANGUAGE plpgsql AS "
                               "$$ BEGIN RAISE EXCEPTION 'simulated write failure'; END $$")  # fmt: skip
            await conn.execute(f"CREATE TRIGGER refuse BEFORE {event} ON {table} FOR EACH ROW WHEN ({when}) "
                               "EXECUTE FUNCTION refuse()")  # fmt: skip
            yield
        finally:
            await conn.execute(f"DROP TRIGGER IF EXISTS refuse ON {table}; DROP FUNCTION IF EXISTS refuse()")
            await conn.close()
        return
    with sqlite3.connect(database) as db:
        db.execute(f"CREATE TRIGGER refuse BEFORE {event} ON {table} WHEN {when} "
                   "BEGIN SELECT RAISE(ABORT, 'simulated write failure'); END")  # fmt: skip
    try:
        yield
    finally:
        with sqlite3.connect(database) as db:
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


async def test_a_reply_and_the_message_it_delivers_are_stored_together(store: Store, reopen: Reopen) -> None:
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
    fresh = await reopen()  # straight from the database, no cache or open-session map
    stored = await fresh.get_session(session.id)
    assert stored is not None and (stored.message_count, stored.input_tokens, stored.last_prompt_tokens) == (2, 11, 120)
    assert await store.find_open_session("telegram:dm:1") == stored  # this store's map moved along
    assert [m.content for m in await fresh.load_messages(session.id)] == ["question", "the answer"]


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
    with pytest.raises(WriteFailedError, match="(?i)not.null"):  # each engine words it its own way
        await store.finish_turn(end("turn-x", [broken], messages=MessageAppend(session.id, [NewMessage("assistant", "x")])))
    assert await store.load_messages(session.id) == []
    found = await store.find_open_session("telegram:dm:1")
    assert found is not None and found.message_count == 0


async def _turn_half_written(store: Store) -> tuple[str, TurnEnd]:
    session = await store.create_session(session_key="telegram:dm:1", platform="telegram", chat_id="1")
    await store.append_messages(session.id, [NewMessage("user", "question")])
    await store.inbox_accept("telegram", "u0", "telegram:1", {})
    usage = Usage(input_tokens=11, output_tokens=4, last_prompt_tokens=120, cost_usd=0.25)
    final = MessageAppend(session.id, [NewMessage("assistant", "the answer")], usage)
    return session.id, end("turn-u0", ["the answer, part 1", "part 2"], answered=[("telegram", "u0")], messages=final)


async def _nothing_of_the_turn_is_stored(reopen: Reopen, session_id: str) -> None:
    fresh = await reopen()  # what the database holds, past every cache
    stored = await fresh.get_session(session_id)
    assert stored is not None and (stored.message_count, stored.input_tokens, stored.cost_usd) == (1, 0, 0.0)
    assert [m.content for m in await fresh.load_messages(session_id)] == ["question"]
    assert await fresh.outbox_pending() == []
    assert [r.event_id for r in await fresh.inbox_unfinished()] == ["u0"]


@pytest.mark.parametrize(("table", "event"), [("inbox", "UPDATE"), ("outbox", "INSERT")])
async def test_a_turn_end_that_fails_half_way_leaves_nothing_of_it(
    store: Store, database: Path | str, reopen: Reopen, table: str, event: str
) -> None:
    # The answer's message and usage are written first, then the events are marked done, then the
    # chunks queued: a failure at either later step takes the earlier ones back with it.
    session_id, turn = await _turn_half_written(store)
    async with refused(database, table, event):
        with pytest.raises(WriteFailedError, match="simulated write failure"):
            await store.finish_turn(turn)
    assert [m.content for m in await store.load_messages(session_id)] == ["question"]
    await _nothing_of_the_turn_is_stored(reopen, session_id)
    # Tried again once the database takes it: the whole end, once.
    rows = await store.finish_turn(turn)
    assert [r.text for r in rows] == ["the answer, part 1", "part 2"]
    assert [m.content for m in await store.load_messages(session_id)] == ["question", "the answer"]
    assert await store.inbox_unfinished() == []


async def test_a_turn_end_the_database_refuses_leaves_nothing_and_says_why(db_path: Path, reopen: Reopen) -> None:
    store = await Store.open(db_path, retry=RetryPolicy(attempts=2, first_delay=0.01, max_delay=0.02))
    try:
        session_id, turn = await _turn_half_written(store)
        async with lock_held(db_path, 1.0):  # another process holds the write lock past the store's retries
            with pytest.raises(Exception) as caught:
                await store.finish_turn(turn)
        assert fault_of(caught.value) is Fault.LOCKED
        await _nothing_of_the_turn_is_stored(reopen, session_id)
    finally:
        await store.close()


async def _twenty_turns(store: Store) -> tuple[list[SessionRecord], list[TurnEnd]]:
    sessions = [await store.create_session(session_key=f"telegram:dm:{n}", platform="telegram", chat_id=str(n))
                for n in range(20)]  # fmt: skip
    for n in range(20):
        await store.inbox_accept("telegram", f"u{n}", f"telegram:dm:{n}", {})
    turns = [
        end(f"turn-{n}", [f"answer {n}"], answered=[("telegram", f"u{n}")], chat=str(n),
            messages=MessageAppend(s.id, [NewMessage("assistant", f"answer {n}")], Usage(output_tokens=n)))
        for n, s in enumerate(sessions)
    ]  # fmt: skip
    return sessions, turns


async def test_one_turn_end_failing_among_many_at_once_spoils_no_other(store: Store, database: Path | str) -> None:
    sessions, turns = await _twenty_turns(store)
    async with refused(database, "outbox", "INSERT", when="NEW.turn_id = 'turn-7'"):
        results = await asyncio.gather(*(store.finish_turn(t) for t in turns), return_exceptions=True)
    assert [n for n, r in enumerate(results) if isinstance(r, BaseException)] == [7]
    assert [r.event_id for r in await store.inbox_unfinished()] == ["u7"]
    assert [m.content for m in await store.load_messages(sessions[7].id)] == []
    for n in (0, 19):
        assert [m.content for m in await store.load_messages(sessions[n].id)] == [f"answer {n}"]


@pytest.mark.sqlite_only
async def test_turn_ends_share_the_writers_group_commit(store: Store, db_path: Path) -> None:
    _, turns = await _twenty_turns(store)
    before = len(transaction_sizes(db_path))
    async with refused(db_path, "outbox", "INSERT", when="NEW.turn_id = 'turn-7'"):
        await asyncio.gather(*(store.finish_turn(t) for t in turns), return_exceptions=True)
    # Twenty turn ends went in as group commits, not a transaction each (and the failed batch was
    # written again one by one to find the faulty end).
    assert len(transaction_sizes(db_path)) - before < 20

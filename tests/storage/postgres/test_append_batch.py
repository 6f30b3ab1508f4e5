"""Appends of many conversations at once go to PostgreSQL together, and one bad append fails alone."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from storage import NewMessage, PostgresStore, SessionNotFoundError, Usage, WriteFailedError
from tests.waiting import eventually


@pytest_asyncio.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(postgres_dsn)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_burst_over_many_chats_is_stored_whole_and_in_order(store: PostgresStore) -> None:
    sessions = [await store.create_session(session_key=f"telegram:{i}", platform="telegram", chat_id=str(i))
                for i in range(40)]  # fmt: skip
    queued = [store.append_messages(s.id, [NewMessage("user", f"{s.chat_id}-{n}")], usage=Usage(input_tokens=1))
              for n in range(5) for s in sessions]  # fmt: skip
    await asyncio.gather(*queued)
    for s in sessions:
        history = await store.load_messages(s.id)
        assert [(m.seq, m.content) for m in history] == [(n + 1, f"{s.chat_id}-{n}") for n in range(5)]
        stored = await store.get_session(s.id)
        assert stored is not None and (stored.message_count, stored.input_tokens) == (5, 5)


async def test_one_append_the_server_refuses_fails_alone(store: PostgresStore) -> None:
    sessions = [await store.create_session(session_key=f"telegram:{i}", platform="telegram", chat_id=str(i))
                for i in range(10)]  # fmt: skip
    too_big = NewMessage("user", "estimate past the column", token_estimate=2**40)  # integer column: out of range
    queued = [store.append_messages(s.id, [too_big if i == 3 else NewMessage("user", f"fine {i}")])
              for i, s in enumerate(sessions)]  # fmt: skip
    queued.append(store.append_messages("no-such-session", [NewMessage("user", "lost")]))
    results = await asyncio.gather(*queued, return_exceptions=True)
    assert isinstance(results[3], WriteFailedError)
    assert isinstance(results[-1], SessionNotFoundError)
    for i, s in enumerate(sessions):
        contents = [m.content for m in await store.load_messages(s.id)]
        assert contents == ([] if i == 3 else [f"fine {i}"])


async def test_an_append_whose_caller_is_cancelled_still_lands(store: PostgresStore) -> None:
    """A queued append is written even when its caller stops waiting (a turn cancelled by ``/stop``): on
    PostgreSQL the write is shielded from the caller. (SQLite's writer skips a write whose caller gave up before
    the writer took it, and writes it once taken; either way the history never holds half an append.)"""
    session = await store.create_session(session_key="telegram:1", platform="telegram", chat_id="1")
    waiting = asyncio.ensure_future(store.append_messages(session.id, [NewMessage("user", "kept")]))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await store.append_messages(session.id, [NewMessage("user", "after")])
    assert [m.content for m in await store.load_messages(session.id)] == ["kept", "after"]


async def test_the_words_index_pending_entries_are_merged_in_the_background(
    store: PostgresStore, postgres_dsn: str
) -> None:
    """After a burst, the word index's pending list (which every search reads whole) is merged by the store itself,
    not left for the insert that overflows it or for autovacuum."""
    async def pending_pages() -> int:  # pgstattuple shows the pending list without touching it
        conn = await asyncpg.connect(postgres_dsn)
        try:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pgstattuple")
            return int(await conn.fetchval("SELECT pending_pages FROM pgstatginindex('messages_words')"))
        finally:
            await conn.close()

    session = await store.create_session(session_key="telegram:1", platform="telegram", chat_id="1")
    for batch in range(20):  # 2,000 messages: twice the upkeep's count, far below the list's 4 MB limit
        await store.append_messages(session.id, [NewMessage("user", f"burst {batch} word{n} other{n % 7}")
                                                 for n in range(100)])  # fmt: skip

    async def merged() -> bool:
        return await pending_pages() == 0

    await eventually(merged, "the pending list to be merged")
    assert len(await store.search("word42", limit=50)) == 20  # one in each batch

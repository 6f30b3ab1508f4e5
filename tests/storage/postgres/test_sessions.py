"""Sessions, lineage and titles on PostgreSQL where the server, not one writer, keeps writers apart.

The behaviour both engines share is tested in ``tests/storage/test_sessions.py``, ``test_lineage.py``
and ``test_messages.py`` (``both_engines``). Here: what only a server with several clients can show.
Two stores on one database are two pools of connections, as two gateway processes would have, with no
queue in common; a third, bare connection holds a transaction open to make a race happen for sure.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
import pytest
import pytest_asyncio

from storage import END_COMPRESSION, NewMessage, PostgresStore, SessionNotFoundError, TitleInUseError
from tests.fakes.postgres_server import PostgresServer
from tests.storage.conftest import Opener, new_session, user
from tests.waiting import eventually

@pytest.fixture
def engine_name() -> str:
    """The ``other_store`` fixture (``tests/storage/conftest.py``) opens PostgreSQL stores on the test's database."""
    return "postgresql"


@pytest_asyncio.fixture
async def bare(postgres_dsn: str) -> AsyncIterator[asyncpg.Connection]:
    """A connection of its own, for a transaction the stores must wait for."""
    conn = await asyncpg.connect(postgres_dsn)
    try:
        yield conn
    finally:
        await conn.close()


@pytest_asyncio.fixture
async def waiting_on_a_lock(postgres_dsn: str) -> AsyncIterator[Callable[[], Awaitable[bool]]]:
    """Whether a backend of the test's database waits for a lock now (asked on a connection outside any transaction:
    a transaction sees one snapshot of ``pg_stat_activity``)."""
    conn = await asyncpg.connect(postgres_dsn)

    async def waiting() -> bool:
        count = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return bool(count)

    try:
        yield waiting
    finally:
        await conn.close()


async def test_two_stores_appending_to_one_session_at_once_number_it_without_a_gap(other_store: Opener) -> None:
    first, second = await other_store(), await other_store()
    session = await new_session(first)

    async def talk(store: PostgresStore, name: str) -> None:
        await asyncio.gather(*(store.append_messages(session.id, [user(f"{name}{i}"), user(f"{name}{i}'")])
                               for i in range(40)))  # fmt: skip

    await asyncio.gather(talk(first, "a"), talk(second, "b"))
    loaded = await first.load_messages(session.id)
    assert [m.seq for m in loaded] == list(range(1, 161))
    for name in "ab":  # each store's appends keep their call order, and a batch stays together
        mine = [m.content for m in loaded if m.content.startswith(name)]
        assert mine == [text for i in range(40) for text in (f"{name}{i}", f"{name}{i}'")]
    record = await second.get_session(session.id)
    assert record is not None and record.message_count == 160


async def test_find_open_session_sees_what_another_store_committed(other_store: Opener) -> None:
    mine, theirs = await other_store(), await other_store()
    assert await mine.find_open_session("telegram:1") is None
    created = await new_session(theirs, "telegram:1")
    assert await mine.find_open_session("telegram:1") == created
    await theirs.append_messages(created.id, [user("hi")])
    await theirs.add_usage(created.id, input_tokens=5, cost_usd=0.5)
    found = await mine.find_open_session("telegram:1")
    assert found is not None and (found.message_count, found.input_tokens, found.cost_usd) == (1, 5, 0.5)
    child = await theirs.split_session(created.id, [user("summary")])
    found = await mine.find_open_session("telegram:1")
    assert found is not None and found.id == child.id
    await theirs.end_session(child.id, "reset")
    assert await mine.find_open_session("telegram:1") is None


async def test_a_system_prompt_is_stored_once_even_when_stores_race_to_store_it(
    other_store: Opener, bare: asyncpg.Connection
) -> None:
    first, second = await other_store(), await other_store()
    prompt = "You are Switchboard. " * 500
    made = await asyncio.gather(*(new_session(store, f"telegram:{n}", system_prompt=prompt)
                                  for n, store in zip(range(10), itertools.cycle((first, second)))))  # fmt: skip
    assert await bare.fetchval("SELECT count(*) FROM prompts") == 1
    assert {(await second.get_session(s.id)).system_prompt for s in made} == {prompt}  # type: ignore[union-attr]


async def test_two_splits_of_one_session_at_once_end_it_once_and_fork(other_store: Opener) -> None:
    first, second = await other_store(), await other_store()
    parent = await new_session(first, title="notes")
    children = await asyncio.gather(first.split_session(parent.id, [user("one")]),
                                    second.split_session(parent.id, [user("two")]))  # fmt: skip
    assert sorted(c.title or "" for c in children) == ["notes #2", "notes #3"]
    ended = await first.get_session(parent.id)
    assert ended is not None and ended.end_reason == END_COMPRESSION
    (earlier,) = [c for c in children if c.title == "notes #2"]
    assert ended.ended_at == earlier.started_at  # the split that came first ended it; the second kept that
    newest = max(children, key=lambda c: (c.started_at, c.id))
    assert [s.id for s in await second.lineage(parent.id)] == [parent.id, newest.id]


async def test_a_split_that_loses_the_race_for_its_title_takes_the_next_number(
    other_store: Opener, bare: asyncpg.Connection, waiting_on_a_lock: Callable[[], Awaitable[bool]]
) -> None:
    store = await other_store()
    plan = await new_session(store, "telegram:1", title="plan")
    async with bare.transaction():  # another gateway titles a session "plan #2" and has not committed yet
        await bare.execute(
            """INSERT INTO sessions (id, session_key, platform, chat_id, title, started_at)
               VALUES ('elsewhere', 'telegram:2', 'telegram', '2', 'plan #2', 0)"""
        )
        split = asyncio.ensure_future(store.split_session(plan.id, [user("summary")]))
        await eventually(waiting_on_a_lock, "the split waiting for the other title")
    child = await split
    assert child.title == "plan #3" and child.message_count == 1
    assert [m.content for m in await store.load_messages(child.id)] == ["summary"]


async def test_a_title_taken_by_a_concurrent_transaction_is_refused_naming_its_holder(
    other_store: Opener, bare: asyncpg.Connection, waiting_on_a_lock: Callable[[], Awaitable[bool]]
) -> None:
    store = await other_store()
    session = await new_session(store, "telegram:1")
    for attempt in (
        lambda: new_session(store, "telegram:3", title="plan"),
        lambda: store.set_title(session.id, "plan"),
    ):
        async with bare.transaction():
            await bare.execute(
                """INSERT INTO sessions (id, session_key, platform, chat_id, title, started_at)
                   VALUES ('elsewhere', 'telegram:2', 'telegram', '2', 'plan', 0)"""
            )
            refused = asyncio.ensure_future(attempt())
            await eventually(waiting_on_a_lock, "the title's claim waiting for the other one")
        with pytest.raises(TitleInUseError) as raised:
            await refused
        assert raised.value.holder_id == "elsewhere"
        await bare.execute("DELETE FROM sessions WHERE id = 'elsewhere'")
    assert await store.find_open_session("telegram:3") is None
    assert (await store.get_session(session.id)).title is None  # type: ignore[union-attr]


async def test_a_nul_in_a_sessions_text_is_stored_as_a_replacement_character(other_store: Opener) -> None:
    store = await other_store()
    session = await new_session(store, "telegram:\x001", chat_id="\x001", model="m\x00", system_prompt="be\x00 kind")
    assert (session.session_key, session.chat_id, session.model) == ("telegram:\ufffd1", "\ufffd1", "m\ufffd")
    assert session.system_prompt == "be\ufffd kind"
    assert await store.get_session(session.id) == session
    assert await store.find_open_session("telegram:\x001") == session
    assert await store.get_session("no\x00such") is None
    with pytest.raises(SessionNotFoundError):
        await store.add_usage("no\x00such", input_tokens=1)


async def test_titles_chain_in_a_database_whose_locale_sorts_punctuation_its_own_way(
    postgres: PostgresServer,
) -> None:
    """ICU's English collation sorts ':' before the digits, so "notes #0" <= title < "notes #:" would hold no title
    at all: the numbered titles of a chain are compared byte by byte, whatever the database's locale."""
    admin = await asyncpg.connect(postgres.dsn)
    try:
        await admin.execute("DROP DATABASE IF EXISTS titles_icu WITH (FORCE)")
        try:
            await admin.execute(
                "CREATE DATABASE titles_icu TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
            )
        except asyncpg.PostgresError as error:
            pytest.skip(f"this server cannot make an ICU database: {error}")
        async with await PostgresStore.open(postgres.dsn_for("titles_icu")) as store:
            chain = [await new_session(store, title="notes")]
            for _ in range(3):
                chain.append(await store.split_session(chain[-1].id, [NewMessage("user", "summary")]))
            assert [s.title for s in chain] == ["notes", "notes #2", "notes #3", "notes #4"]
            resolved = await store.resolve_title("notes #3")
            assert resolved is not None and resolved.id == chain[-1].id
    finally:
        await admin.execute("DROP DATABASE IF EXISTS titles_icu WITH (FORCE)")
        await admin.close()

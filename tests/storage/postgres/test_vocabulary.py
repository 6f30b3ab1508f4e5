"""The vocabulary on PostgreSQL (storage/postgres/vocabulary.py): the append statement adds the new words, so a
part of a word is found the moment its append returns; two stores appending the same new words at once neither
deadlock nor fail; a part no word contains finds nothing, without error."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio
from structlog.testing import capture_logs

from storage import NewMessage, PostgresStore
from storage.search.words import MAX_WORD


@pytest_asyncio.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.open(postgres_dsn) as opened:
        yield opened


async def words(dsn: str) -> set[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return {row[0] for row in await conn.fetch("SELECT word FROM search_vocabulary")}
    finally:
        await conn.close()


async def new_session(store: PostgresStore, name: str) -> str:
    return (await store.create_session(session_key=f"telegram:{name}", platform="telegram", chat_id=name)).id


async def test_a_word_first_written_by_an_append_is_found_by_a_part_of_it(
    store: PostgresStore, postgres_dsn: str
) -> None:
    sid = await new_session(store, "1")
    await store.append_messages(sid, [NewMessage("user", "nothing special here")])
    (written,) = await store.append_messages(sid, [NewMessage("user", "the Redéploiement went fine, 大别山 too")])
    assert [hit.message_id for hit in await store.search("eploie")] == [written.id]
    assert [hit.message_id for hit in await store.search("DEPLOI")] == [written.id]  # folded as the words are
    held = await words(postgres_dsn)
    assert {"redeploiement", "went", "fine", "nothing", "special", "here"} <= held
    assert not held & {"the", "大别山", "大别", "too"}  # short words and CJK (found by its pairs) are left out


async def test_a_part_no_word_holds_finds_nothing(store: PostgresStore) -> None:
    sid = await new_session(store, "1")
    await store.append_messages(sid, [NewMessage("user", "redeployment " + "x" * (MAX_WORD + 1))])
    assert await store.search("qzqzq") == []
    assert await store.search("eploy qzqzq") == []  # AND: the empty expansion matches no message
    assert [hit.seq for hit in await store.search("eploy OR qzqzq")] == [1]


async def test_two_stores_appending_the_same_new_words_at_once_neither_deadlock_nor_fail(
    store: PostgresStore, postgres_dsn: str
) -> None:
    fresh = [f"zebra{n:03d}quill" for n in range(60)]
    async with await PostgresStore.open(postgres_dsn) as other:
        stores = [store, other]
        sessions = [[await new_session(s, f"{k}-{n}") for n in range(8)] for k, s in enumerate(stores)]

        async def writer(s: PostgresStore, sid: str, turn: int) -> None:
            for round_ in range(5):  # the same new words, in another order each time
                order = fresh[turn + round_ :] + fresh[: turn + round_]
                await s.append_messages(sid, [NewMessage("user", " ".join(order if turn % 2 else order[::-1]))])

        with capture_logs() as logs:
            await asyncio.gather(*(
                writer(s, sid, turn) for k, s in enumerate(stores) for turn, sid in enumerate(sessions[k])
            ))  # fmt: skip
    assert [entry for entry in logs if entry["event"] == "storage.retrying"] == []  # no deadlock to retry
    assert set(fresh) <= await words(postgres_dsn)
    assert len(await store.search("ebra017qui", limit=100)) == 80

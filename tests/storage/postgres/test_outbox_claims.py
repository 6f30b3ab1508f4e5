"""Outbox claims on PostgreSQL (``storage/postgres/outbox_claims.py``): two stores on one database as two replicas, each
sending only the chunks it claims, a dead replica's chunks taken over once it is reaped, chats never split."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from storage import OutboxChunk, PostgresStore, ReplicaExpiredError, TurnEnd
from tests.storage.postgres.test_cluster import expire


@pytest_asyncio.fixture
async def two(postgres_dsn: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    a = await PostgresStore.open(postgres_dsn)
    b = await PostgresStore.open(postgres_dsn)
    try:
        await a.cluster.join("gw-a", host="test", pid=1, version="t", expire_after=30.0)
        await b.cluster.join("gw-b", host="test", pid=2, version="t", expire_after=30.0)
        yield a, b
    finally:
        await a.close()
        await b.close()


def reply(turn_id: str, chat_id: str, texts: list[str]) -> TurnEnd:
    return TurnEnd(turn_id, "telegram", chat_id, None, [OutboxChunk(text=t) for t in texts])


async def claimed_by(dsn: str) -> dict[str, str | None]:
    conn = await asyncpg.connect(dsn)
    try:
        return {row["text"]: row["claimed_by"] for row in await conn.fetch("SELECT text, claimed_by FROM outbox")}
    finally:
        await conn.close()


async def test_a_replicas_chunks_are_its_own_until_it_is_reaped_then_another_takes_them(two, postgres_dsn) -> None:
    a, b = two
    await a.finish_turn(reply("telegram:1", "1", ["a one", "a two"]))
    await b.finish_turn(reply("telegram:2", "2", ["b one"]))
    assert [r.text for r in await a.outbox_pending()] == ["a one", "a two"]
    assert [r.text for r in await b.outbox_pending()] == ["b one"], "A's chunks are not B's to send"

    await expire(a, postgres_dsn)
    assert [r.text for r in await b.outbox_pending()] == ["b one"], "dead but not reaped: still A's"
    assert await a.outbox_pending() == [], "an expired replica sends nothing"
    assert await b.cluster.reap() == [a.cluster.replica]
    assert [r.text for r in await b.outbox_pending()] == ["a one", "a two", "b one"], "by chat, in order"
    assert set((await claimed_by(postgres_dsn)).values()) == {b.cluster.replica}


async def test_a_frozen_replica_can_neither_claim_nor_mark_sent_once_reaped(two, postgres_dsn) -> None:
    a, b = two
    [row] = await a.finish_turn(reply("telegram:1", "1", ["hello"]))
    await expire(a, postgres_dsn)
    assert await a.outbox_pending() == [], "expired: it takes nothing, its own chunks included"
    await b.cluster.reap()
    with pytest.raises(ReplicaExpiredError):
        await a.outbox_mark_sent(row.id, "99")
    [taken] = await b.outbox_pending()
    assert await b.outbox_mark_sent(taken.id, "7")
    assert (await b.outbox_get(row.id)).platform_message_id == "7"  # type: ignore[union-attr]
    # What the frozen replica still queues is left free for a live one.
    await a.outbox_add("notice", "telegram", "3", None, ["late"])
    assert (await claimed_by(postgres_dsn))["late"] is None
    assert [r.text for r in await b.outbox_pending()] == ["late"]


async def test_free_chunks_are_shared_out_whole_chats_at_a_time_and_none_twice(postgres_dsn) -> None:
    seed = await PostgresStore.open(postgres_dsn)  # one gateway alone queued them: nobody claims them
    for chat in range(30):
        await seed.outbox_add(f"t{chat}", "telegram", str(chat), None, [f"{chat}:{n}" for n in range(4)])
    await seed.close()
    stores = [await PostgresStore.open(postgres_dsn) for _ in range(4)]
    try:
        for n, store in enumerate(stores):
            await store.cluster.join(f"gw-{n}", host="test", pid=n, version="t", expire_after=30.0)
        handed = await asyncio.gather(*(store.outbox_pending() for store in stores))
    finally:
        for store in stores:
            await store.close()
    ids = [row.id for rows in handed for row in rows]
    assert len(ids) == len(set(ids)) == 120, "every chunk handed to exactly one replica"
    chats = [{row.chat_id for row in rows} for rows in handed]
    assert sum(len(c) for c in chats) == 30, "no chat split between two replicas"
    for rows in handed:
        for chat in {row.chat_id for row in rows}:
            assert [r.text for r in rows if r.chat_id == chat] == [f"{chat}:{n}" for n in range(4)], "in order"


async def test_only_free_or_own_live_rows_are_closed_as_orphans(two, postgres_dsn) -> None:
    a, b = two
    live = await a.outbox_stream_open("telegram:9", "telegram", "9", None, OutboxChunk(text=""))
    await a.outbox_stream_shown(live.id, "so far", "55")
    assert [r.id for r in await a.outbox_live()] == [live.id]
    assert await b.outbox_live() == [], "A's stream is the turn A runs"
    assert await b.outbox_stream_close(live.id, "so far [interrupted]") is None
    assert (await a.outbox_get(live.id)).live  # type: ignore[union-attr]

    await expire(a, postgres_dsn)
    await b.cluster.reap()
    assert [r.id for r in await b.outbox_live()] == [live.id], "free once A is reaped"
    closed = await b.outbox_stream_close(live.id, "so far [interrupted]")
    assert closed is not None and closed.status == "pending"
    assert [r.id for r in await b.outbox_pending()] == [live.id]

"""The replicas' shared state on PostgreSQL (``storage/postgres/cluster.py``): incarnations, reaping, leases with
fences, session claims and the fenced writes, each with two stores on one database as two gateway processes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from storage import OutboxChunk, PostgresStore, ReplicaExpiredError, TurnEnd, cluster_of
from tests.waiting import eventually


@pytest_asyncio.fixture
async def two(postgres_dsn: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    a = await PostgresStore.open(postgres_dsn)
    b = await PostgresStore.open(postgres_dsn)
    try:
        yield a, b
    finally:
        await a.close()
        await b.close()


async def join(store: PostgresStore, name: str, expire_after: float = 30.0) -> str:
    record = await store.cluster.join(name, host="test", pid=1, version="t", expire_after=expire_after)
    return record.id


async def expire(store: PostgresStore, dsn: str) -> None:
    """Make ``store``'s incarnation expire now, as if it had been frozen past its expiry."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("UPDATE replicas SET expires_at = now() - interval '1 second' WHERE id = $1",
                           store.cluster.replica)  # fmt: skip
    finally:
        await conn.close()


async def test_an_incarnation_beats_until_it_expires_and_then_stays_dead(two, postgres_dsn) -> None:
    a, b = two
    assert cluster_of(a) is a.cluster
    first = await join(a, "gw-a")
    assert first.startswith("gw-a/")
    assert await a.cluster.beat(30.0, {"turns": 2}) is not None
    [seen] = await b.cluster.replicas()
    assert (seen.id, seen.alive, seen.info) == (first, True, {"turns": 2})

    await expire(a, postgres_dsn)
    assert await a.cluster.beat(30.0) is None, "an expired incarnation is not renewed"
    assert [r.id for r in await b.cluster.replicas() if not r.alive] == [first]
    await join(b, "gw-b")
    assert await b.cluster.reap() == [first]
    assert await a.cluster.beat(30.0) is None


async def test_a_lease_has_one_live_holder_and_a_new_fence_for_each_new_one(two, postgres_dsn) -> None:
    a, b = two
    await join(a, "gw-a")
    await join(b, "gw-b")
    held = await a.cluster.lease_acquire("telegram:poll:1")
    assert held is not None and held.holder == a.cluster.replica
    assert await b.cluster.lease_acquire("telegram:poll:1") is None
    assert (await a.cluster.lease_acquire("telegram:poll:1")).fence == held.fence, "ours already: unchanged"
    assert await a.cluster.lease_progress("telegram:poll:1", held.fence, "101")

    # A clean release: the next holder is no takeover, and sees the progress.
    assert await a.cluster.lease_release("telegram:poll:1", held.fence)
    moved = await b.cluster.lease_acquire("telegram:poll:1")
    assert moved is not None and moved.fence > held.fence and moved.takeovers == 0 and moved.progress == "101"
    assert not await a.cluster.lease_progress("telegram:poll:1", held.fence, "999"), "the old fence writes nothing"
    assert not await a.cluster.lease_held("telegram:poll:1", held.fence)

    # The holder dies: another takes it over once it expired, counted as a takeover.
    await expire(b, postgres_dsn)
    taken = await a.cluster.lease_acquire("telegram:poll:1")
    assert taken is not None and taken.fence > moved.fence and taken.takeovers == 1
    assert not await b.cluster.lease_progress("telegram:poll:1", moved.fence, "5")
    assert [lease.progress for lease in await a.cluster.leases()] == ["101"]


async def test_a_session_claim_is_one_replicas_until_released_or_its_holder_dies(two, postgres_dsn) -> None:
    a, b = two
    await join(a, "gw-a")
    await join(b, "gw-b")
    await a.inbox_accept("telegram", "1", "telegram:dm:7", {"text": "hi"})
    assert await b.cluster.unclaimed_sessions() == ["telegram:dm:7"]
    claim = await a.cluster.claim_session("telegram:dm:7")
    assert claim is not None and claim.holder == a.cluster.replica
    assert await b.cluster.claim_session("telegram:dm:7") is None
    assert await b.cluster.unclaimed_sessions() == []
    assert [r.event_id for r in await b.cluster.unfinished_of("telegram:dm:7")] == ["1"]

    assert not await a.cluster.release_session("telegram:dm:7", claim.fence), "an unfinished event keeps the claim"
    await a.inbox_mark_done("telegram", "1")
    assert await a.cluster.release_session("telegram:dm:7", claim.fence)
    again = await b.cluster.claim_session("telegram:dm:7")
    assert again is not None and again.fence > claim.fence

    await expire(b, postgres_dsn)
    taken = await a.cluster.claim_session("telegram:dm:7")
    assert taken is not None and taken.holder == a.cluster.replica, "a dead holder's claim is taken over"


async def test_an_expired_replica_cannot_finish_a_turn_or_mark_a_chunk_sent(two, postgres_dsn) -> None:
    a, b = two
    await join(a, "gw-a")
    await a.inbox_accept("telegram", "1", "telegram:dm:7", {"text": "hi"})
    [row] = await a.finish_turn(TurnEnd("t1", "telegram", "7", None, [OutboxChunk(text="first")], answered=[]))
    await expire(a, postgres_dsn)

    with pytest.raises(ReplicaExpiredError, match="expired"):
        await a.finish_turn(TurnEnd("t2", "telegram", "7", None, [OutboxChunk(text="late")], answered=[("telegram", "1")]))
    with pytest.raises(ReplicaExpiredError):
        await a.outbox_mark_sent(row.id, "m1")
    assert [r.event_id for r in await b.inbox_unfinished()] == ["1"], "nothing of the refused turn landed"
    assert (await b.outbox_get(row.id)).status == "pending"


async def test_a_reap_waits_for_a_fenced_write_already_under_way(two, postgres_dsn) -> None:
    """A write that passed its fence commits before the reap that would have refused it, never after."""
    a, b = two
    me = await join(a, "gw-a", expire_after=1.0)
    await join(b, "gw-b")
    conn = await asyncpg.connect(postgres_dsn)
    try:
        writing = conn.transaction()
        await writing.start()
        await conn.execute("SELECT 1 FROM replicas WHERE id = $1 FOR KEY SHARE", me)
        await asyncio.sleep(1.2)  # the incarnation expires while the write is under way
        reap = asyncio.ensure_future(b.cluster.reap())
        await asyncio.sleep(0.3)
        assert not reap.done(), "the reap waits for the write"
        await writing.commit()
        assert await reap == [me]
    finally:
        await conn.close()


async def test_signals_reach_every_listener(two) -> None:
    a, b = two
    await join(a, "gw-a")
    got: list[dict] = []
    listener = await b.cluster.listen(got.append)
    try:
        await a.cluster.notify({"kind": "inbox", "key": "telegram:dm:7"})
        await eventually(lambda: got == [{"kind": "inbox", "key": "telegram:dm:7"}])
        with pytest.raises(ValueError, match="7,000 bytes"):
            await a.cluster.notify({"kind": "x", "blob": "y" * 8000})
    finally:
        await listener.close()

"""A replica's incarnation on a real PostgreSQL: heartbeats, expiry after a freeze, joining again, signals, scans."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from config.cluster import ClusterConfig
from gateway.cluster.replica import Replica
from gateway.operations.metrics import Metrics
from storage import PostgresStore, ReplicaExpiredError
from tests.waiting import eventually

FAST = ClusterConfig(enabled=True, heartbeat_every=0.2, expire_after=1.0, scan_every=0.2)


class Frozen:
    """A monotonic clock a test can push forward, as a SIGSTOP of the process would."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def __call__(self) -> float:
        return time.monotonic() + self.skipped


@pytest_asyncio.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    store = await PostgresStore.open(postgres_dsn)
    try:
        yield store
    finally:
        await store.close()


async def test_a_replica_stays_alive_by_beating_and_leaves_cleanly(store) -> None:
    replica = Replica(store.cluster, FAST.model_copy(update={"replica_id": "gw-a"}), Metrics(), version="t")
    await replica.start()
    try:
        assert replica.alive() and replica.id.startswith("gw-a/")
        first = [r.seen_at for r in await store.cluster.replicas()]
        await eventually(lambda: _seen_later(store, first), "a heartbeat")
        assert replica.alive(), "beats keep it alive well past expire_after"
    finally:
        await replica.stop()
    assert await store.cluster.replicas() == [], "a clean stop deletes the incarnation"


async def _seen_later(store: PostgresStore, before: list[float]) -> bool:
    return [r.seen_at for r in await store.cluster.replicas()] > before


async def test_a_frozen_replica_is_expired_when_it_wakes_and_joins_again(store, postgres_dsn) -> None:
    clock = Frozen()
    replica = Replica(store.cluster, FAST, Metrics(), version="t", monotonic=clock)
    dropped: list[str] = []
    replica.on_expired(lambda: _note(dropped, "expired"))
    replica.on_joined(lambda: _note(dropped, "joined"))
    await replica.start()
    try:
        first = replica.id
        conn = await asyncpg.connect(postgres_dsn)
        await conn.execute("UPDATE replicas SET expires_at = now() - interval '1 second'")  # the server gave up on it
        await conn.close()
        clock.skipped = 60.0  # and the process slept through it
        assert not replica.alive()
        with pytest.raises(ReplicaExpiredError):
            replica.check()
        await eventually(lambda: replica.alive() and replica.id != first, "joined again")
        assert dropped == ["joined", "expired", "joined"] and replica.expiries == 1
    finally:
        await replica.stop()


async def _note(into: list[str], what: str) -> None:
    into.append(what)


async def test_signals_go_to_their_kind_and_their_addressee(store) -> None:
    a = Replica(store.cluster, FAST.model_copy(update={"replica_id": "a"}), Metrics(), version="t")
    b = Replica(store.cluster, FAST.model_copy(update={"replica_id": "b"}), Metrics(), version="t")
    got: dict[str, list[object]] = {"a": [], "b": []}
    a.on_signal("inbox", lambda p: got["a"].append(p["key"]))
    b.on_signal("inbox", lambda p: got["b"].append(p["key"]))
    await a.start()
    await b.start()
    try:
        await a.signal("inbox", to=b.id, key="k1")
        await a.signal("inbox", key="k2")
        await eventually(lambda: got == {"a": ["k2"], "b": ["k1", "k2"]})
    finally:
        await a.stop()
        await b.stop()


async def test_a_dead_replica_is_reaped_by_a_live_ones_scan(store, postgres_dsn) -> None:
    metrics = Metrics()
    live = Replica(store.cluster, FAST.model_copy(update={"replica_id": "live"}), metrics, version="t")
    scans: list[int] = []
    live.on_scan(lambda: _note(scans, "scan"))  # type: ignore[arg-type]
    other = await PostgresStore.open(postgres_dsn)
    try:
        dead = await other.cluster.join("dead", host="h", pid=2, version="t", expire_after=0.5)
        await live.start()
        await eventually(lambda: metrics.cluster_reaped.totals.get((), 0) == 1, "the dead one reaped")
        assert [r.id for r in await store.cluster.replicas()] == [live.id]
        assert dead.id not in {r.id for r in await store.cluster.replicas()} and scans
    finally:
        await live.stop()
        await other.close()

"""The PostgreSQL side of several gateways on one database: ``ClusterStorage`` (``storage/cluster.py`` has the model).

Every decision about time is the server's (``now()``), so the replicas' clocks never need to agree. The
statements lean on the foreign keys of migration 2: deleting a replica's row (:meth:`PostgresCluster.reap`,
:meth:`PostgresCluster.leave`) drops its session claims and frees its leases and outbox chunks at once.

Fences: a write of a replica that must not land once it expired first takes ``FOR KEY SHARE`` on its own
replica row, still unexpired (:func:`hold_alive`). That lock does not stop the heartbeat (an ``UPDATE`` of
other columns), but a reap (a ``DELETE ... FOR UPDATE SKIP LOCKED``) passes over that replica until the write
commits; so a reap, and whatever a new holder then reads, always comes after the fenced write or finds it
refused. A write left open by a frozen process is ended by the server (:data:`HELD_IDLE_MS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import asyncpg

from storage.cluster import ClaimRecord, LeaseRecord, ReplicaExpiredError, ReplicaRecord
from storage.log import log
from storage.postgres import inbox
from storage.postgres.connection import Connection
from storage.records import InboxRecord

if TYPE_CHECKING:
    from storage.postgres.lifecycle import PostgresLifecycle

__all__ = ["CHANNEL", "PostgresCluster", "hold_alive"]

CHANNEL: Final = "switchboard_cluster"
"""The LISTEN/NOTIFY channel of every signal between replicas."""

_EPOCH: Final = "extract(epoch FROM {})::double precision"


def _epoch(column: str) -> str:
    return _EPOCH.format(column)


_REPLICA_COLUMNS: Final = (
    f"id, name, host, pid, version, {_epoch('started_at')}, {_epoch('seen_at')}, {_epoch('expires_at')}, "
    "expires_at > now(), info::text"
)
_LEASE_COLUMNS: Final = (
    f"l.name, l.holder, l.fence, {_epoch('l.acquired_at')}, l.takeovers, l.progress, {_epoch('r.expires_at')}"
)
_CLAIM_COLUMNS: Final = f"session_key, holder, fence, {_epoch('claimed_at')}"


HELD_IDLE_MS: Final = 3000
"""How long a transaction holding its replica's row may sit idle (its process frozen, or cut off) before the server
ends it: until then the reap skips that replica, and its leases and conversations cannot move."""


async def hold_alive(conn: Connection, replica: str) -> None:
    """Inside a transaction: lock ``replica``'s row against a reap until the commit, or raise ``ReplicaExpiredError``
    when it expired (or is gone). The transaction may not sit idle longer than :data:`HELD_IDLE_MS`: a process frozen
    in the middle of it would hold the lock (and its work) for as long as it stays frozen."""
    await conn.execute(f"SET LOCAL idle_in_transaction_session_timeout = {HELD_IDLE_MS}")
    if await conn.fetchval("SELECT 1 FROM replicas WHERE id = $1 AND expires_at > now() FOR KEY SHARE", replica) is None:
        raise ReplicaExpiredError(replica)


_REAP: Final = (
    "DELETE FROM replicas WHERE id IN (SELECT id FROM replicas WHERE expires_at < now() {only} "
    "FOR UPDATE SKIP LOCKED) RETURNING id"
)
"""Delete expired replicas, skipping one whose fenced write is still open (a later reap gets it)."""


def _replica(row: asyncpg.Record) -> ReplicaRecord:
    return ReplicaRecord(row[0], row[1], row[2], row[3], row[4], row[5], row[6], row[7], row[8], json.loads(row[9]))


def _lease(row: asyncpg.Record) -> LeaseRecord:
    return LeaseRecord(row[0], row[1], row[2], row[3], row[4], row[5], row[6])


def _claim(row: asyncpg.Record) -> ClaimRecord:
    return ClaimRecord(row[0], row[1], row[2], row[3])


class PostgresCluster:
    """``ClusterStorage`` over a ``PostgresStore``'s pool (``store.cluster``)."""

    def __init__(self, store: PostgresLifecycle, *, listen: Callable[[], Awaitable[asyncpg.Connection]]) -> None:
        self._store = store
        self._connect_listener = listen
        self.replica: str | None = None
        """This process's incarnation once :meth:`join` ran (the store's fenced writes carry it)."""

    def _me(self) -> str:
        if self.replica is None:
            raise RuntimeError("join the cluster first")
        return self.replica

    # -- replicas ------------------------------------------------------------------------------

    async def join(self, name: str, *, host: str, pid: int, version: str, expire_after: float) -> ReplicaRecord:
        incarnation = f"{name}/{secrets.token_hex(4)}"

        async def insert(conn: Connection) -> ReplicaRecord:
            row = await conn.fetchrow(
                f"INSERT INTO replicas (id, name, host, pid, version, expires_at) "  # noqa: S608
                f"VALUES ($1, $2, $3, $4, $5, now() + make_interval(secs => $6)) RETURNING {_REPLICA_COLUMNS}",
                incarnation, name, host, pid, version, expire_after,
            )  # fmt: skip
            return _replica(row)

        record = await self._store._write(insert, what="cluster join")
        self.replica = incarnation
        return record

    async def beat(self, expire_after: float, info: dict[str, Any] | None = None) -> float | None:
        me = self._me()

        async def renew(conn: Connection) -> float | None:
            return await conn.fetchval(
                f"UPDATE replicas SET seen_at = now(), expires_at = now() + make_interval(secs => $2), "  # noqa: S608
                f"info = coalesce($3::jsonb, info) WHERE id = $1 AND expires_at > now() RETURNING {_epoch('expires_at')}",
                me, expire_after, None if info is None else json.dumps(info),
            )  # fmt: skip

        return await self._store._write(renew, what="cluster heartbeat", one_statement=True)

    async def leave(self) -> None:
        if self.replica is None:
            return
        me = self.replica

        async def delete(conn: Connection) -> list[str]:
            released = await conn.fetch("UPDATE leases SET released = true WHERE holder = $1 RETURNING name", me)
            await conn.execute("DELETE FROM replicas WHERE id = $1", me)
            return [row[0] for row in released]

        released = await self._store._write(delete, what="cluster leave")
        await self.notify({"kind": "released", "replica": me, "leases": released})

    async def reap(self) -> list[str]:
        async def delete(conn: Connection) -> list[str]:
            rows = await conn.fetch(_REAP.format(only=""))
            return [row[0] for row in rows]

        return await self._store._write(delete, what="cluster reap", one_statement=True)

    async def replicas(self, *, seen_within: float = 60.0) -> list[ReplicaRecord]:
        rows = await self._store._read(lambda conn: conn.fetch(
            f"SELECT {_REPLICA_COLUMNS} FROM replicas WHERE seen_at > now() - make_interval(secs => $1) "  # noqa: S608
            "ORDER BY name, started_at", seen_within))  # fmt: skip
        return [_replica(row) for row in rows]

    # -- leases --------------------------------------------------------------------------------

    async def lease_acquire(self, name: str) -> LeaseRecord | None:
        me = self._me()

        async def take(conn: Connection) -> LeaseRecord | None:
            await hold_alive(conn, me)
            row = await conn.fetchrow(
                "SELECT l.holder, r.expires_at > now() FROM leases l LEFT JOIN replicas r ON r.id = l.holder "
                "WHERE l.name = $1 FOR UPDATE OF l", name)  # fmt: skip
            if row is not None and row[0] is not None:
                if row[0] == me:
                    return await self._lease_row(conn, name)
                if row[1]:
                    return None  # a live replica holds it
                if not await conn.fetch(_REAP.format(only="AND id = $1"), row[0]):
                    return None  # dead, but its last write is still open: a later try takes it
            await conn.execute(
                "INSERT INTO leases AS l (name, holder, fence, acquired_at, released) "
                "VALUES ($1, $2, nextval('cluster_fence'), now(), false) "
                "ON CONFLICT (name) DO UPDATE SET holder = $2, fence = nextval('cluster_fence'), acquired_at = now(), "
                "released = false, takeovers = l.takeovers + CASE WHEN l.released THEN 0 ELSE 1 END", name, me)  # fmt: skip
            return await self._lease_row(conn, name)

        return await self._store._write(take, what="cluster lease")

    @staticmethod
    async def _lease_row(conn: Connection, name: str) -> LeaseRecord:
        row = await conn.fetchrow(
            f"SELECT {_LEASE_COLUMNS} FROM leases l LEFT JOIN replicas r ON r.id = l.holder WHERE l.name = $1", name
        )  # noqa: S608
        return _lease(row)

    async def lease_release(self, name: str, fence: int) -> bool:
        me = self._me()
        released = await self._store._write(lambda conn: conn.fetchval(
            "UPDATE leases SET holder = NULL, released = true, acquired_at = NULL "
            "WHERE name = $1 AND holder = $2 AND fence = $3 RETURNING true", name, me, fence),
            what="cluster lease release", one_statement=True)  # fmt: skip
        if released:
            await self.notify({"kind": "released", "replica": me, "leases": [name]})
        return bool(released)

    async def lease_held(self, name: str, fence: int) -> bool:
        me = self._me()
        held = await self._store._read(lambda conn: conn.fetchval(
            "SELECT true FROM leases l JOIN replicas r ON r.id = l.holder "
            "WHERE l.name = $1 AND l.holder = $2 AND l.fence = $3 AND r.expires_at > now()", name, me, fence))  # fmt: skip
        return bool(held)

    async def lease_progress(self, name: str, fence: int, progress: str) -> bool:
        me = self._me()

        async def record(conn: Connection) -> bool:
            await hold_alive(conn, me)
            done = await conn.fetchval(
                "UPDATE leases SET progress = $4 WHERE name = $1 AND holder = $2 AND fence = $3 RETURNING true",
                name, me, fence, progress,
            )  # fmt: skip
            return bool(done)

        try:
            return await self._store._write(record, what="cluster lease progress")
        except ReplicaExpiredError:
            return False

    async def leases(self) -> list[LeaseRecord]:
        rows = await self._store._read(lambda conn: conn.fetch(
            f"SELECT {_LEASE_COLUMNS} FROM leases l LEFT JOIN replicas r ON r.id = l.holder ORDER BY l.name"))  # noqa: S608 fmt: skip
        return [_lease(row) for row in rows]

    # -- session claims ------------------------------------------------------------------------

    async def claim_session(self, session_key: str) -> ClaimRecord | None:
        me = self._me()

        async def take(conn: Connection) -> ClaimRecord | None:
            await hold_alive(conn, me)
            for _ in range(2):  # once more after reaping a dead holder
                row = await conn.fetchrow(
                    f"INSERT INTO session_claims (session_key, holder) VALUES ($1, $2) "  # noqa: S608
                    f"ON CONFLICT (session_key) DO NOTHING RETURNING {_CLAIM_COLUMNS}", session_key, me)  # fmt: skip
                if row is not None:
                    return _claim(row)
                held = await conn.fetchrow(
                    f"SELECT {_CLAIM_COLUMNS}, r.expires_at > now() FROM session_claims c "  # noqa: S608
                    "JOIN replicas r ON r.id = c.holder WHERE c.session_key = $1 FOR UPDATE OF c", session_key)  # fmt: skip
                if held is None:
                    continue  # released (or reaped) just now
                if held[1] == me:
                    return _claim(held)
                if held[4]:
                    return None  # a live replica holds it
                if not await conn.fetch(_REAP.format(only="AND id = $1"), held[1]):
                    return None  # dead, but its last write is still open: a later try takes it
            return None

        return await self._store._write(take, what="cluster claim")

    async def release_session(self, session_key: str, fence: int) -> bool:
        me = self._me()
        released = await self._store._write(lambda conn: conn.fetchval(
            "DELETE FROM session_claims WHERE session_key = $1 AND holder = $2 AND fence = $3 AND NOT EXISTS "
            "(SELECT 1 FROM inbox WHERE session_key = $1 AND status = 'accepted') RETURNING true", session_key, me, fence),
            what="cluster release", one_statement=True)  # fmt: skip
        return bool(released)

    async def claim_holder(self, session_key: str) -> ClaimRecord | None:
        row = await self._store._read(lambda conn: conn.fetchrow(
            f"SELECT {_CLAIM_COLUMNS} FROM session_claims WHERE session_key = $1", session_key))  # noqa: S608 fmt: skip
        return None if row is None else _claim(row)

    async def claims(self, *, limit: int = 1000) -> list[ClaimRecord]:
        rows = await self._store._read(lambda conn: conn.fetch(
            f"SELECT {_CLAIM_COLUMNS} FROM session_claims ORDER BY claimed_at LIMIT $1", limit))  # noqa: S608 fmt: skip
        return [_claim(row) for row in rows]

    async def unclaimed_sessions(self, *, limit: int = 100) -> list[str]:
        rows = await self._store._read(lambda conn: conn.fetch(
            "SELECT i.session_key FROM inbox i WHERE i.status = 'accepted' AND NOT EXISTS "
            "(SELECT 1 FROM session_claims c WHERE c.session_key = i.session_key) "
            "GROUP BY i.session_key ORDER BY min(i.id) LIMIT $1", limit))  # fmt: skip
        return [row[0] for row in rows]

    async def unfinished_of(self, session_key: str) -> list[InboxRecord]:
        return await self._store._read(lambda conn: inbox.unfinished(conn, session_key=session_key))

    async def chunks_elsewhere(self, platform: str, chat_id: str) -> bool:
        me = self._me()
        return bool(await self._store._read(lambda conn: conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM outbox WHERE platform = $1 AND chat_id = $2 AND status = 'pending' "
            "AND claimed_by IS DISTINCT FROM $3)", platform, chat_id, me)))  # fmt: skip

    # -- signals -------------------------------------------------------------------------------

    async def notify(self, payload: dict[str, Any]) -> None:
        text = json.dumps(payload, separators=(",", ":"))
        if len(text.encode()) > 7000:
            raise ValueError(f"a cluster signal holds at most 7,000 bytes; this one has {len(text.encode())}")
        try:
            await self._store._read(lambda conn: conn.execute("SELECT pg_notify($1, $2)", CHANNEL, text),
                                    what="cluster signal")  # fmt: skip
        except Exception as error:  # noqa: BLE001 - a signal is a hint; the scans find the work without it
            log.warning("cluster.signal_failed", kind=payload.get("kind"), error=str(error))

    async def listen(self, on_signal: Callable[[dict[str, Any]], Awaitable[None] | None]) -> _Listener:
        listener = _Listener(self._connect_listener, on_signal)
        await listener.start()
        return listener

    async def server_time(self) -> float:
        return await self._store._read(lambda conn: conn.fetchval(f"SELECT {_epoch('clock_timestamp()')}"))


class _Listener:
    """A connection of its own that LISTENs on :data:`CHANNEL`, connected again whenever it is lost."""

    def __init__(
        self,
        connect: Callable[[], Awaitable[asyncpg.Connection]],
        on_signal: Callable[[dict[str, Any]], Awaitable[None] | None],
    ) -> None:
        self._connect = connect
        self._on_signal = on_signal
        self._conn: asyncpg.Connection | None = None
        self._task: asyncio.Task[None] | None = None
        self._handlers: set[asyncio.Task[None]] = set()
        self._lost = asyncio.Event()

    async def start(self) -> None:
        await self._open()
        self._task = asyncio.create_task(self._keep(), name="cluster-listener")

    async def _open(self) -> None:
        conn = await self._connect()
        conn.add_termination_listener(lambda _conn: self._lost.set())
        await conn.add_listener(CHANNEL, self._received)
        self._conn = conn
        self._lost.clear()

    def _received(self, _conn: Any, _pid: int, _channel: str, payload: str) -> None:
        try:
            signal = json.loads(payload)
        except ValueError:
            log.warning("cluster.signal_unreadable", payload=payload[:200])
            return
        try:
            result = self._on_signal(signal)
        except Exception as error:  # noqa: BLE001 - one bad handler must not stop the listener
            log.error("cluster.signal_failed", kind=signal.get("kind"), error=str(error), exc_info=error)
            return
        if result is not None:
            task = asyncio.ensure_future(result)
            self._handlers.add(task)
            task.add_done_callback(self._handled)

    def _handled(self, task: asyncio.Task[None]) -> None:
        self._handlers.discard(task)
        if not task.cancelled() and task.exception() is not None:
            error = task.exception()
            log.error("cluster.signal_failed", error=str(error), exc_info=error)

    async def _keep(self) -> None:
        while True:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._lost.wait(), timeout=2.0)
            if self._conn is not None and not self._conn.is_closed() and not self._lost.is_set():
                continue
            log.warning("cluster.listener_lost", hint="signals are missed until it is back; the scans find the work")
            pause = 0.5
            while True:
                try:
                    await self._open()
                    log.info("cluster.listener_back")
                    break
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 5.0)

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        for task in list(self._handlers):
            task.cancel()
        await asyncio.gather(*self._handlers, return_exceptions=True)
        if self._conn is not None and not self._conn.is_closed():
            try:
                await self._conn.close(timeout=5)
            except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                self._conn.terminate()

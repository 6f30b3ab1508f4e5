"""The PostgreSQL store's life and plumbing: the pool, opening and closing, health, and how a write or a read
runs (retried as a whole, queued per key, shielded from its caller), for ``PostgresStore`` (``store.py``) to build
its members on, as ``storage/lifecycle.py`` is for the SQLite store.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Iterator
from functools import partial
from types import TracebackType
from typing import Any, Final, Self, TypeVar

import asyncpg

from storage.errors import ReadFailedError, StorageError, StoreClosedError
from storage.log import log
from storage.postgres import migrations
from storage.postgres.append_batch import AppendBatcher
from storage.postgres.cluster import PostgresCluster, hold_alive
from storage.postgres.connection import Connection
from storage.postgres.faults import Trouble, trouble_of
from storage.postgres.gateway_lock import hold_gateway_lock
from storage.postgres.index_upkeep import IndexUpkeep
from storage.postgres.pairing import PostgresPairing
from storage.postgres.retry import run_with_retry
from storage.retry_policy import DEFAULT_RETRY, RetryPolicy

__all__ = ["POOL_SIZE", "PostgresLifecycle", "retrieved"]

T = TypeVar("T")

POOL_SIZE: Final = 10
"""Connections the pool keeps; enough for 100 writers (bench.storage) on a 2-core server."""


class _State(enum.Enum):
    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


async def _no_reset(connection: object) -> None:
    """The pool's reset between uses: nothing. Every transaction ends itself, advisory locks are transaction-scoped,
    and nothing else (LISTEN, session settings) is left behind, so the default reset query would be pure cost."""


def retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception as seen: a write queued and never awaited is not an error to report twice."""
    if not future.cancelled():
        future.exception()


@contextlib.contextmanager
def _dropped_when_server_away(conn: Connection) -> Iterator[None]:
    """Close ``conn`` instead of giving it back to the pool when what ran on it met a lost server: with no reset
    query between uses (``_no_reset``), nothing else would notice a connection the server left half way through an
    operation, and the next transaction on it would fail (asyncpg's "another operation is in progress")."""
    try:
        yield
    except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError) as error:
        if trouble_of(error) is Trouble.SERVER_AWAY:
            with contextlib.suppress(asyncpg.InterfaceError):  # the pool took it back already: it was closed
                conn.terminate()
        raise


class PostgresLifecycle:
    """Opening, closing and health of a PostgreSQL store, and the doors every member goes through: ``_write``,
    ``_read``, ``_queued``. ``PostgresStore`` adds the members; use ``PostgresStore.open``."""

    def __init__(
        self, pool: asyncpg.Pool, *, where: str, clock: Callable[[], float], retry: RetryPolicy
    ) -> None:  # fmt: skip
        self._pool = pool
        self.where = where
        """The database as an operator knows it (``postgresql://user@host:port/db``, never a password)."""
        self._clock = clock
        self._retry = retry
        self._state = _State.OPEN
        self._tails: dict[Hashable, asyncio.Future[Any]] = {}
        self._running: set[asyncio.Future[Any]] = set()
        self._gateway_lock: asyncpg.Connection | None = None
        self._upkeep = IndexUpkeep(partial(self._read, what="index upkeep"))
        self._appends = AppendBatcher(
            partial(self._write, what="append", one_statement=True), clock, appended=self._upkeep.appended
        )
        self.pairing = PostgresPairing(self._write, self._read)
        """The gateway's DM pairing state: offered codes, approvals, failed attempts."""
        self._connect_alone: Callable[[], Awaitable[asyncpg.Connection]] | None = None
        self.cluster = PostgresCluster(self, listen=self._connection_of_its_own)
        """What the replicas on this database share (``storage/cluster.py``); the fenced writes carry its replica."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        pool_size: int = POOL_SIZE,
        retry: RetryPolicy = DEFAULT_RETRY,
        clock: Callable[[], float] = time.time,
        connect_timeout: float = 10.0,
        wait_for_server: bool = False,
        exclusive: bool = False,
        **connect: Any,
    ) -> Self:
        """Connect to ``url`` (a libpq URL: ``postgresql://user:password@host:port/db?sslmode=...``; asyncpg reads the
        password and ``sslmode`` from it, or ``PGPASSWORD`` and the other libpq variables), migrate the database to
        this build's schema and return the store; ``close()`` it after. ``SchemaTooNewError`` when a newer build
        migrated it; ``ReadFailedError`` when the server cannot be reached (the error names it, never the password).
        ``connect`` goes to ``asyncpg.create_pool`` as it is (``ssl=...``, ``server_settings=...``).

        ``wait_for_server``: a server that does not answer yet (refused, starting up, shutting down) is waited for as
        a running store waits for one that went away: ``storage.retrying`` lines for up to ``retry.outage`` seconds,
        then ``ReadFailedError``. The gateway starts this way, so a gateway that comes up before its database (a
        reboot, a container started first) waits instead of exiting; the CLI does not, so a command fails at once.
        A refused password or an unknown database is never waited for.

        ``exclusive``: hold the database's gateway lock while the store is open (``gateway_lock.py``), as
        ``switchboard run`` does; ``DatabaseInUseError`` when another gateway holds it."""

        async def connect_pool() -> asyncpg.Pool:
            return await asyncpg.create_pool(
                url, min_size=min(2, pool_size), max_size=pool_size, reset=_no_reset, timeout=connect_timeout,
                **connect,
            )  # fmt: skip

        try:
            if wait_for_server:
                pool = await run_with_retry(connect_pool, policy=retry, log=log, what="connect", read=True)
            else:
                pool = await connect_pool()
        except StorageError:
            raise
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncio.TimeoutError) as error:
            raise ReadFailedError(error) from error  # type: ignore[arg-type]
        lock: asyncpg.Connection | None = None
        try:
            version = await migrations.upgrade(pool)
            async with pool.acquire() as conn:
                where = await migrations.describe(conn)
            if exclusive:
                lock = await hold_gateway_lock(url, where=where, timeout=connect_timeout, connect=connect)
        except BaseException:
            await pool.close()
            raise
        log.info("storage.opened", engine="postgresql", database=where, schema_version=version, pool=pool_size)
        store = cls(pool, where=where, clock=clock, retry=retry)
        store._gateway_lock = lock
        store._connect_alone = partial(asyncpg.connect, url, timeout=connect_timeout, **connect)
        return store

    # -- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Let the writes already started finish, then close the pool. Idempotent."""
        if self._state is not _State.OPEN:
            return
        self._state = _State.CLOSING
        try:
            if self._running:
                await asyncio.gather(*self._running, return_exceptions=True)
            await self._upkeep.close()
            await self._pool.close()
            if self._gateway_lock is not None:  # the next gateway may start
                try:
                    await self._gateway_lock.close(timeout=5)
                except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, TimeoutError):
                    self._gateway_lock.terminate()  # a server that went away took the lock with it already
        finally:
            self._state = _State.CLOSED
            self._tails.clear()
        log.info("storage.closed", engine="postgresql", database=self.where)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def is_open(self) -> bool:
        return self._state is _State.OPEN

    async def ping(self) -> bool:
        if self._state is not _State.OPEN:
            return False
        try:
            await self.probe()
        except StorageError:
            return False
        return True

    async def probe(self) -> None:
        """The schema version and the newest row of each table the gateway lives on, through the pool."""

        async def newest(conn: Connection) -> None:
            await conn.fetchval("SELECT version FROM schema_version WHERE singleton = 1")
            for table in ("sessions", "messages", "inbox", "outbox"):
                key = "started_at" if table == "sessions" else "id"
                await conn.fetchval(f"SELECT 1 FROM {table} ORDER BY {key} DESC LIMIT 1")  # noqa: S608  (our names)

        await self._read(newest)

    # -- plumbing --------------------------------------------------------------------------------

    async def _connection_of_its_own(self) -> asyncpg.Connection:
        """A connection outside the pool (the cluster's LISTEN), opened as the pool's are."""
        if self._connect_alone is None:
            raise RuntimeError("open the store with PostgresStore.open")
        return await self._connect_alone()

    async def _fence(self, conn: Connection) -> None:
        """Inside a write: once this process joined a cluster, refuse the write if its incarnation expired
        (``ReplicaExpiredError``), and keep it from being reaped until the write commits."""
        if self.cluster.replica is not None:
            await hold_alive(conn, self.cluster.replica)

    def _check_open(self) -> None:
        if self._state is not _State.OPEN:
            raise StoreClosedError()

    async def _write(
        self, op: Callable[[Connection], Awaitable[T]], *, what: str = "write", one_statement: bool = False
    ) -> T:
        """Run ``op`` in one transaction on a pooled connection, again from the start until it lands.

        ``one_statement``: ``op`` runs a single statement, atomic by itself, so no ``BEGIN``/``COMMIT`` is sent
        around it (two round trips fewer: the append path)."""
        self._check_open()

        async def once() -> T:
            async with self._pool.acquire() as conn:
                with _dropped_when_server_away(conn):
                    if one_statement:
                        return await op(conn)
                    async with conn.transaction():
                        return await op(conn)

        return await run_with_retry(once, policy=self._retry, log=log, what=what)

    async def _read(self, op: Callable[[Connection], Awaitable[T]], *, what: str = "read") -> T:
        """Run ``op`` on a pooled connection (one statement is its own snapshot; ``op`` opens a transaction when it
        reads more than one and needs them consistent); retried like a write while the server is away."""
        self._check_open()

        async def once() -> T:
            async with self._pool.acquire() as conn:
                with _dropped_when_server_away(conn):
                    return await op(conn)

        return await run_with_retry(once, policy=self._retry, log=log, what=what, read=True)

    def _queued(self, key: Hashable, write: Callable[[], Coroutine[Any, Any, T]]) -> asyncio.Future[T]:
        """Start ``write()`` now, after the writes queued before it under ``key``; its future, for the caller to await.

        A future, not a coroutine: the write is under way whether or not the caller awaits it at once, and the
        writes of one key keep the order of the calls. A failed write does not stop the next one of its key."""
        self._check_open()
        before = self._tails.get(key)

        async def in_turn() -> T:
            if before is not None:
                await asyncio.wait([before])
            return await write()

        return self._handed(key, asyncio.ensure_future(in_turn()))

    def _queued_future(self, key: Hashable, start: Callable[[], asyncio.Future[T]]) -> asyncio.Future[T]:
        """``_queued`` for a write whose ``start()`` queues it and returns its future (an append to the batcher):
        with nothing of ``key`` before it, it is queued at once, with no task of its own (the append path runs
        thousands a second, and a task each cost a tenth of the CPU in ``bench.storage``)."""
        self._check_open()
        if key in self._tails:

            async def started() -> T:
                return await start()

            return self._queued(key, started)
        return self._handed(key, start())

    def _handed(self, key: Hashable, write: asyncio.Future[T]) -> asyncio.Future[T]:
        """``write`` as the newest of ``key``, tracked until it ends; what the caller gets is shielded from it."""
        self._tails[key] = write
        self._running.add(write)
        write.add_done_callback(lambda done: self._settled(key, done))
        handed = asyncio.shield(write)  # a caller cancelled while it waits does not cancel the write
        handed.add_done_callback(retrieved)
        return handed

    def _settled(self, key: Hashable, done: asyncio.Future[Any]) -> None:
        self._running.discard(done)
        if self._tails.get(key) is done:
            del self._tails[key]
        retrieved(done)  # the caller may never await a write it only queued


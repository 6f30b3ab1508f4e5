"""``PostgresStore``: the storage surface (``storage/contract.py``) on a PostgreSQL server, through asyncpg.

    store = await PostgresStore.open("postgresql://switchboard@db.internal/switchboard")
    session = await store.create_session(session_key="telegram:42", platform="telegram", chat_id="42")
    await store.close()

What differs from the SQLite ``Store`` and why:

* **No writer thread, no group commit.** Each write is one transaction on a pooled connection
  (asyncpg, prepared statements cached per connection; the pool runs no reset query between
  uses, which cost p99 53 ms against 35 ms in ``bench.pg_driver``), run until it lands by
  ``run_with_retry`` (``storage/postgres/retry.py``): a conflict is tried again at once, a server
  that went away is waited for and logged, anything else raised as ``WriteFailedError``.
* **"Queued at the call" is kept per key.** The members the contract says are queued at the call
  (``append_messages``, ``add_usage``, ``inbox_accept``, ``finish_turn``, ``outbox_*``) start their
  transaction's task at the call and return its future. Writes with the same key (a session, an
  inbox event, an outbox row) run one after another in call order; writes with different keys run
  side by side on the pool, which is what a server is for. Across processes, the database orders
  them: a session's appends lock its row (``SELECT ... FOR UPDATE``) before numbering.
* **Nothing is cached in memory.** Every read asks the server, so what another process committed is
  always seen (the several-gateways issue builds on that); a history load is one indexed query.
* **Search is indexed as it is written** (a generated ``tsvector`` and a trigram index), so
  ``index_words`` has nothing to do.

The modules beside this one hold the SQL, one concept each, as functions of a connection.
"""

from __future__ import annotations

import asyncio
import enum
import time
from functools import partial
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Mapping, Sequence
from types import TracebackType
from typing import Any, Final, Self, TypeVar

import asyncpg

from storage.errors import ReadFailedError, SessionNotFoundError, StorageError, StoreClosedError
from storage.last_heard import LastHeard
from storage.ledger import TurnEnd
from storage.log import log
from storage.postgres import messages, migrations
from storage.postgres.search import search as search_messages
from storage.postgres.connection import Connection
from storage.postgres.retry import run_with_retry
from storage.records import (
    InboxRecord,
    MessageRecord,
    NewMessage,
    OutboxChunk,
    OutboxRecord,
    SearchHit,
    SessionRecord,
    UsageTotals,
)
from storage.retry_policy import DEFAULT_RETRY, RetryPolicy
from storage.search.fulltext import SearchOwner
from storage.sessions import Usage

__all__ = ["PostgresStore"]

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


class PostgresStore:
    """Sessions, messages, lineage, search and the gateway's inbox, outbox and pairing on PostgreSQL.
    Use ``PostgresStore.open``."""

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
        from storage.postgres.pairing import PostgresPairing  # noqa: PLC0415  (beside this module, uses _write/_read)

        self.pairing = PostgresPairing(self._write, self._read)
        """The gateway's DM pairing state: offered codes, approvals, failed attempts."""

    @classmethod
    async def open(
        cls,
        url: str,
        *,
        pool_size: int = POOL_SIZE,
        retry: RetryPolicy = DEFAULT_RETRY,
        clock: Callable[[], float] = time.time,
        connect_timeout: float = 10.0,
        **connect: Any,
    ) -> Self:
        """Connect to ``url`` (a libpq URL: ``postgresql://user:password@host:port/db?sslmode=...``; asyncpg reads the
        password and ``sslmode`` from it, or ``PGPASSWORD`` and the other libpq variables), migrate the database to
        this build's schema and return the store; ``close()`` it after. ``SchemaTooNewError`` when a newer build
        migrated it; ``ReadFailedError`` when the server cannot be reached (the error names it, never the password).
        ``connect`` goes to ``asyncpg.create_pool`` as it is (``ssl=...``, ``server_settings=...``)."""
        try:
            pool = await asyncpg.create_pool(
                url, min_size=min(2, pool_size), max_size=pool_size, reset=_no_reset, timeout=connect_timeout,
                **connect,
            )  # fmt: skip
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, asyncio.TimeoutError) as error:
            raise ReadFailedError(error) from error  # type: ignore[arg-type]
        try:
            version = await migrations.upgrade(pool)
            async with pool.acquire() as conn:
                where = await migrations.describe(conn)
        except BaseException:
            await pool.close()
            raise
        log.info("storage.opened", engine="postgresql", database=where, schema_version=version, pool=pool_size)
        return cls(pool, where=where, clock=clock, retry=retry)

    # -- lifecycle -------------------------------------------------------------------------------

    async def close(self) -> None:
        """Let the writes already started finish, then close the pool. Idempotent."""
        if self._state is not _State.OPEN:
            return
        self._state = _State.CLOSING
        try:
            if self._running:
                await asyncio.gather(*self._running, return_exceptions=True)
            await self._pool.close()
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

    def _check_open(self) -> None:
        if self._state is not _State.OPEN:
            raise StoreClosedError()

    async def _write(self, op: Callable[[Connection], Awaitable[T]], *, what: str = "write") -> T:
        """Run ``op`` in one transaction on a pooled connection, again from the start until it lands."""
        self._check_open()

        async def once() -> T:
            async with self._pool.acquire() as conn, conn.transaction():
                return await op(conn)

        return await run_with_retry(once, policy=self._retry, log=log, what=what)

    async def _read(self, op: Callable[[Connection], Awaitable[T]], *, what: str = "read") -> T:
        """Run ``op`` on a pooled connection (one statement is its own snapshot; ``op`` opens a transaction when it
        reads more than one and needs them consistent); retried like a write while the server is away."""
        self._check_open()

        async def once() -> T:
            async with self._pool.acquire() as conn:
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

        task = asyncio.ensure_future(in_turn())
        self._tails[key] = task
        self._running.add(task)
        task.add_done_callback(lambda done: self._settled(key, done))
        return task

    def _settled(self, key: Hashable, done: asyncio.Future[Any]) -> None:
        self._running.discard(done)
        if self._tails.get(key) is done:
            del self._tails[key]
        if not done.cancelled():
            done.exception()  # retrieved: the caller may never await a write it only queued

    # -- sessions --------------------------------------------------------------------------------

    async def create_session(
        self,
        *,
        session_key: str,
        platform: str,
        chat_id: str,
        chat_type: str | None = None,
        thread_id: str | None = None,
        user_id: str | None = None,
        title: str | None = None,
        model: str | None = None,
        system_prompt: str | None = None,
        parent_session_id: str | None = None,
        session_id: str | None = None,
    ) -> SessionRecord:
        raise NotImplementedError  # sessions

    async def get_session(self, session_id: str) -> SessionRecord | None:
        raise NotImplementedError  # sessions

    async def end_session(self, session_id: str, reason: str) -> bool:
        raise NotImplementedError  # sessions

    async def list_sessions(self, platform: str | None = None, limit: int = 50) -> list[SessionRecord]:
        raise NotImplementedError  # sessions

    async def find_open_session(self, session_key: str) -> SessionRecord | None:
        raise NotImplementedError  # sessions

    async def set_title(self, session_id: str, title: str | None) -> str | None:
        raise NotImplementedError  # sessions

    # -- usage -----------------------------------------------------------------------------------

    def add_usage(
        self, session_id: str, *, input_tokens: int = 0, output_tokens: int = 0, cache_read_tokens: int = 0,
        cache_write_tokens: int = 0, last_prompt_tokens: int = 0, cost_usd: float = 0.0,
    ) -> Awaitable[None]:  # fmt: skip
        return self.add_call_usage(session_id, Usage(
            input_tokens=input_tokens, output_tokens=output_tokens, cache_read_tokens=cache_read_tokens,
            cache_write_tokens=cache_write_tokens, last_prompt_tokens=last_prompt_tokens, cost_usd=cost_usd,
        ))  # fmt: skip

    def add_call_usage(self, session_id: str, usage: Usage) -> Awaitable[None]:
        raise NotImplementedError  # sessions

    async def usage_since(self, since: float) -> UsageTotals:
        raise NotImplementedError  # sessions

    # -- messages --------------------------------------------------------------------------------

    def append_messages(
        self, session_id: str, new: Sequence[NewMessage], *, usage: Usage | None = None
    ) -> Awaitable[list[MessageRecord]]:
        """Queued at the call, after the session's writes queued before it (``_queued``)."""
        new = tuple(new)

        async def write() -> list[MessageRecord]:
            return await self._write(partial(messages.append, session_id=session_id, new=new, usage=usage,
                                             now=self._clock()), what="append")  # fmt: skip

        return self._queued(("session", session_id), write)

    async def load_messages(self, session_id: str, *, last_seq: int | None = None) -> list[MessageRecord]:
        """Read from the server every time (``last_seq`` serves no cache here), in one snapshot with the check that
        the session exists."""

        async def history(conn: Connection) -> list[MessageRecord]:
            async with conn.transaction(readonly=True, isolation="repeatable_read"):
                records = await messages.load(conn, session_id)
                if not records and await conn.fetchval("SELECT 1 FROM sessions WHERE id = $1", session_id) is None:
                    raise SessionNotFoundError(session_id)
                return records

        return await self._read(history)

    # -- lineage and titles ----------------------------------------------------------------------

    async def split_session(
        self, parent_id: str, new: Sequence[NewMessage], *, system_prompt: str | None = None
    ) -> SessionRecord:
        raise NotImplementedError  # lineage

    async def lineage(self, session_id: str) -> list[SessionRecord]:
        raise NotImplementedError  # lineage

    async def resolve_title(self, title: str) -> SessionRecord | None:
        raise NotImplementedError  # lineage

    # -- search ----------------------------------------------------------------------------------

    async def search(
        self, query: str, *, limit: int = 20, platform: str | None = None, owner: SearchOwner | None = None
    ) -> list[SearchHit]:
        """Two passes at most (``storage/postgres/search.py``): the words as typed, then parts of words."""
        return await self._read(partial(search_messages, query=query, limit=limit, platform=platform, owner=owner),
                                what="search")  # fmt: skip

    async def index_words(self, *, slices: int | None = None) -> int:
        """Nothing to do: the word and trigram indexes are kept by every insert."""
        self._check_open()
        return 0

    # -- inbox -----------------------------------------------------------------------------------

    def inbox_accept(
        self, platform: str, event_id: str, session_key: str, payload: Mapping[str, Any]
    ) -> Awaitable[bool]:
        raise NotImplementedError  # inbox

    def inbox_mark_done(self, platform: str, event_id: str) -> Awaitable[bool]:
        raise NotImplementedError  # inbox

    async def inbox_unfinished(self) -> list[InboxRecord]:
        raise NotImplementedError  # inbox

    async def last_heard(self, platform: str, *, limit: int = 200) -> list[LastHeard]:
        raise NotImplementedError  # inbox

    async def inbox_prune(self, older_than: float) -> int:
        raise NotImplementedError  # inbox

    # -- outbox ----------------------------------------------------------------------------------

    def finish_turn(self, end: TurnEnd) -> Awaitable[list[OutboxRecord]]:
        raise NotImplementedError  # outbox

    def outbox_add(
        self, turn_id: str, platform: str, chat_id: str, thread_id: str | None, chunks: Sequence[str | OutboxChunk]
    ) -> Awaitable[list[OutboxRecord]]:
        raise NotImplementedError  # outbox

    def outbox_mark_sent(self, outbox_id: int, platform_message_id: str | None) -> Awaitable[bool]:
        raise NotImplementedError  # outbox

    async def outbox_edit(
        self, outbox_id: int, text: str, *, plain: str | None = None, markup: str | None = None
    ) -> OutboxRecord | None:
        raise NotImplementedError  # outbox

    async def outbox_mark_failed(self, outbox_id: int, error: str, *, give_up: bool = False) -> bool:
        raise NotImplementedError  # outbox

    async def outbox_get(self, outbox_id: int) -> OutboxRecord | None:
        raise NotImplementedError  # outbox

    async def outbox_pending(self) -> list[OutboxRecord]:
        raise NotImplementedError  # outbox

    async def outbox_prune(self, older_than: float) -> int:
        raise NotImplementedError  # outbox

    # -- streamed replies (live outbox rows) -----------------------------------------------------

    async def outbox_stream_open(
        self, turn_id: str, platform: str, chat_id: str, thread_id: str | None, chunk: OutboxChunk, *,
        mode: str = "edit",
    ) -> OutboxRecord:  # fmt: skip
        raise NotImplementedError  # outbox

    async def outbox_stream_shown(
        self, outbox_id: int, text: str, platform_message_id: str | None, *, plain: str | None = None,
        mode: str | None = None,
    ) -> bool:  # fmt: skip
        raise NotImplementedError  # outbox

    async def outbox_stream_attempted(self, outbox_id: int, error: str) -> bool:
        raise NotImplementedError  # outbox

    async def outbox_stream_close(self, outbox_id: int, text: str, *, plain: str | None = None) -> OutboxRecord | None:
        raise NotImplementedError  # outbox

    async def outbox_live(self) -> list[OutboxRecord]:
        raise NotImplementedError  # outbox

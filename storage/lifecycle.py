"""A store's life (open, close, health) and the plumbing every one of its operations goes through.

``StoreLifecycle`` is the base of ``Store`` (``storage/store.py``): it opens the engine
(``storage/engine/engine.py``), refuses work once the store is closing, and hands each operation to
the writer (``_write``, ``_bulk``, ``_append`` in ``Store``) or to a reader (``_read``). ``Store``
adds the operations themselves; a new one is a thin method there over these.
"""

from __future__ import annotations

import asyncio
import enum
import sqlite3
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import aiosqlite

from storage.cache import HistoryCache
from storage.engine.bulk import BulkKind, BulkWrite
from storage.engine.engine import Engine
from storage.engine.maintenance import WAL_KEEP_BYTES
from storage.engine.retry import DEFAULT_RETRY, RetryPolicy
from storage.engine.writer import MergePolicy, Settled
from storage.errors import StorageError, StoreClosedError
from storage.faults import FaultSeam
from storage.log import log
from storage.open_sessions import OpenSessions
from storage.pairing import PairingStore

__all__ = ["StoreLifecycle"]

T = TypeVar("T")
S = TypeVar("S", bound="StoreLifecycle")


class _State(enum.Enum):
    OPEN = "open"
    CLOSING = "closing"  # draining queued writes; new ones are refused
    CLOSED = "closed"


class StoreLifecycle:
    """Opening, closing and health of a store, and the doors to its engine. Use ``Store.open``."""

    def __init__(
        self, path: Path, engine: Engine, *, clock: Callable[[], float], history_cache_bytes: int,
        open_session_max_age: float, faults: FaultSeam | None = None,
    ) -> None:  # fmt: skip
        self.path = path
        self._engine = engine
        self._clock = clock
        self._faults = faults
        self._cache = HistoryCache(history_cache_bytes)
        self._open_sessions = OpenSessions(max_age=open_session_max_age)
        self._state = _State.OPEN
        self.pairing = PairingStore(self._write, self._read)
        """The gateway's DM pairing state: offered codes, approvals, failed attempts."""

    @classmethod
    async def open(
        cls: type[S],
        path: Path | str,
        *,
        synchronous: str = "normal",
        retry: RetryPolicy = DEFAULT_RETRY,
        readers: int = 2,
        history_cache_bytes: int = 64 * 1024 * 1024,
        open_session_max_age: float = 30.0,
        checkpoint_interval: float = 0.5,
        wal_keep_bytes: int = WAL_KEEP_BYTES,
        merge: MergePolicy | None = MergePolicy(),
        word_index_interval: float | None = 0.25,
        clock: Callable[[], float] = time.time,
        faults: FaultSeam | None = None,
    ) -> S:
        """Open (creating it 0600 if needed) and migrate the database at ``path``; ``close()`` it after.

        ``synchronous`` is ``"normal"`` (durable across process crashes, the
        default) or ``"full"`` (also across power loss). Raises
        ``SchemaTooNewError`` if a newer build has migrated the file. The
        keyword arguments after it tune the engine; the defaults are what the
        gateway uses. ``word_index_interval=None`` turns the background
        substring indexer off (``index_words()`` then does its work on demand).
        ``faults`` lets a test watch the engine or make it fail (``storage/faults.py``).
        """
        path = Path(path)
        engine, version = await Engine.open(
            path, synchronous=synchronous, retry=retry, readers=readers, checkpoint_interval=checkpoint_interval,
            wal_keep_bytes=wal_keep_bytes, merge=merge, word_index_interval=word_index_interval, clock=clock,
            faults=faults,
        )  # fmt: skip
        log.info("storage.opened", path=str(path), schema_version=version, synchronous=synchronous)
        return cls(path, engine, clock=clock, history_cache_bytes=history_cache_bytes,
                   open_session_max_age=open_session_max_age, faults=faults)  # fmt: skip

    async def close(self) -> None:
        """Finish queued writes, checkpoint the WAL into the database and close. Idempotent."""
        if self._state is not _State.OPEN:
            return
        self._state = _State.CLOSING
        try:
            await self._engine.close()
        finally:
            self._state = _State.CLOSED
            self._cache.clear()
            self._open_sessions.clear()
        log.info("storage.closed", path=str(self.path))

    async def __aenter__(self: S) -> S:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

    @property
    def is_open(self) -> bool:
        return self._state is _State.OPEN

    async def ping(self) -> bool:
        """True if the database answers a read of its real tables (for /health): see :meth:`probe`."""
        if self._state is not _State.OPEN:
            return False
        try:
            await self.probe()
        except StorageError:
            return False
        return True

    async def probe(self) -> None:
        """Read the schema and the newest row of each table the gateway lives on; ``ReadFailedError`` if any fails.

        The newest rows lie on the pages every turn reads and writes (each table's root and its
        rightmost leaves): a damaged one there fails here. It costs a few page reads, so /health can
        call it on every request; a damaged page deep in old history is found by ``switchboard doctor``
        (``quick_check``) and by the turn that reads it.
        """
        self._check_open()
        await self._engine.probe()

    # -- plumbing --------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._state is not _State.OPEN:
            raise StoreClosedError()

    async def _write(self, op: Callable[[sqlite3.Connection], T]) -> T:
        self._check_open()
        return await self._engine.write(op)

    def _bulk(self, kind: BulkKind, item: Any, *, settled: Settled | None = None) -> asyncio.Future[Any]:
        """One item of a write many callers make at once (``storage/engine/bulk.py``), queued now.

        A plain function returning the writer's future, not a coroutine: the write is queued in
        call order, and ``asyncio.gather`` over such writes makes no task per write.
        """
        self._check_open()
        return self._engine.bulk(BulkWrite(kind, item), settled=settled)

    async def _read(self, query: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        self._check_open()
        return await self._engine.read(query)

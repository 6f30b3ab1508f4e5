"""The engine under one store: its connections, threads and background tasks, opened and closed together.

    engine = await Engine.open(path, synchronous="normal", ...)
    record = await engine.write(op)                 # a function of the writer's sqlite3.Connection
    rows = await engine.read(query)                 # a coroutine function of a reader connection
    await engine.close()

Writes go through the group-commit writer (``writer.py``) and its connection
thread, reads through a small pool of aiosqlite reader connections
(``readers.py``), a maintenance connection runs passive checkpoints
(``maintenance.py``), and the word indexer (``storage/search/indexer.py``)
fills the substring-search vocabulary on a connection of its own. The store
(``storage/store.py``) says what to write and read; the engine only runs it.
"""

from __future__ import annotations

import asyncio
import sqlite3
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import aiosqlite

from storage.engine.bulk import BulkWrite
from storage.engine.connection import SYNCHRONOUS_MODES, Role, connect, create_private_file
from storage.engine.maintenance import WAL_KEEP_BYTES, Maintenance, WalProgress
from storage.engine.readers import Readers
from storage.engine.retry import DEFAULT_RETRY, RetryPolicy
from storage.engine.transaction import call_with_retry, retry_busy
from storage.engine.worker import ConnectionThread
from storage.engine.writer import MergePolicy, Settled, Writer
from storage.faults import FaultSeam
from storage.log import log
from storage.messages import AppendRequest
from storage.migrations import upgrade
from storage.search.indexer import WordIndexer

__all__ = ["Engine"]

T = TypeVar("T")

_PROBED_TABLES = ("sessions", "messages", "inbox", "outbox")


class Engine:
    """Owns the writer, the readers, the maintenance task and the word indexer of one database file."""

    def __init__(
        self, writer_thread: ConnectionThread, readers: Readers, maintenance: Maintenance, writer: Writer,
        indexer: WordIndexer,
    ) -> None:  # fmt: skip
        self._writer_thread = writer_thread
        self._readers = readers
        self._maintenance = maintenance
        self._writer = writer
        self._indexer = indexer

    @classmethod
    async def open(
        cls,
        path: Path,
        *,
        synchronous: str,
        retry: RetryPolicy = DEFAULT_RETRY,
        readers: int = 2,
        checkpoint_interval: float = 0.5,
        wal_keep_bytes: int = WAL_KEEP_BYTES,
        merge: MergePolicy | None = MergePolicy(),
        word_index_interval: float | None = 0.25,
        clock: Callable[[], float] = time.time,
        faults: FaultSeam | None = None,
    ) -> tuple[Engine, int]:
        """Open every connection, migrate the file and start the background work; returns the engine and the
        schema version. Whatever was opened is closed again if a later step fails."""
        if synchronous not in SYNCHRONOUS_MODES:
            raise ValueError(f"synchronous must be one of {sorted(SYNCHRONOUS_MODES)}, not {synchronous!r}")
        await asyncio.to_thread(create_private_file, path)
        opened: list[Callable[[], Awaitable[None]]] = []
        try:
            writer_thread = await retry_busy(
                partial(ConnectionThread.open, path, Role.WRITER, synchronous=synchronous), retry=retry, what="open"
            )
            opened.append(writer_thread.close)
            version = await call_with_retry(writer_thread, partial(upgrade, path=path), retry=retry, what="migrate")
            pool = await Readers.open(path, count=readers, synchronous=synchronous)
            opened.append(pool.close)
            maintenance_conn = await connect(path, Role.MAINTENANCE, synchronous=synchronous)
            opened.append(maintenance_conn.close)
            indexer_thread = await WordIndexer.open_thread(path, synchronous=synchronous)
            opened.append(indexer_thread.close)
        except BaseException:
            for close in reversed(opened):
                await close()
            raise
        progress = WalProgress()
        writer = Writer(writer_thread, retry=retry, clock=clock, merge=merge, progress=progress,
                        on_batch=faults.batch if faults is not None else None)  # fmt: skip
        maintenance = Maintenance(maintenance_conn, progress, interval=checkpoint_interval, wal=Path(f"{path}-wal"),
                                  keep_bytes=wal_keep_bytes)  # fmt: skip
        indexer = WordIndexer(indexer_thread, writer.run, progress, interval=word_index_interval)
        writer.start()
        maintenance.start()
        indexer.start()
        engine = cls(writer_thread, pool, maintenance, writer, indexer)
        if faults is not None:
            faults.attach(writer.run, progress)
        return engine, version

    async def close(self) -> None:
        """Finish queued writes, stop the background work, checkpoint the WAL into the database, close."""
        try:
            await self._indexer.close()
            await self._writer.close()
        finally:
            await self._maintenance.close()
            await self._readers.close()
            try:
                await self._writer_thread.call(lambda conn: conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall())
            except sqlite3.Error as error:  # a full disk, say: the WAL keeps everything, the next open reads it
                log.warning("storage.checkpoint_failed", error=str(error), hint="the WAL is kept; nothing is lost")
            finally:
                await self._writer_thread.close()

    @property
    def external_commits(self) -> int:
        """How many of the writer's transactions found that another connection had committed since its last."""
        return self._writer.external_commits

    def write(self, op: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Queue ``op`` for the writer's next transaction; the future gets its result once committed."""
        return self._writer.run(op)

    def append(self, request: AppendRequest, *, settled: Settled | None = None) -> asyncio.Future[Any]:
        return self._writer.append(request, settled=settled)

    def bulk(self, write: BulkWrite, *, settled: Settled | None = None) -> asyncio.Future[Any]:
        return self._writer.bulk(write, settled=settled)

    async def read(self, query: Callable[[aiosqlite.Connection], Awaitable[T]]) -> T:
        return await self._readers.run(query)

    async def index_words(self, *, slices: int | None = None) -> int:
        """Bring the substring-search vocabulary up to date now; returns how many messages were read."""
        return await self._indexer.catch_up(slices=slices)

    async def probe(self) -> None:
        """Read the schema and the newest row of each table the gateway lives on (``ReadFailedError`` if any fails)."""
        await self._readers.run(_probe_tables)


async def _probe_tables(conn: aiosqlite.Connection) -> None:
    await conn.execute_fetchall("SELECT max(version) FROM schema_version")
    for table in _PROBED_TABLES:
        await conn.execute_fetchall(f"SELECT * FROM {table} ORDER BY rowid DESC LIMIT 1")  # noqa: S608 - fixed names

"""A sqlite3 connection that lives in one thread, fed whole functions from the event loop.

aiosqlite (used for reads) ships one statement per trip to its thread. That
suits a query, but a write transaction is several statements, and each trip
back waits behind whatever else the loop is busy with, all while holding the
write lock, so every append queued meanwhile waits too. Shipping whole
functions keeps the lock for just the statements. So the writer's connection lives here, and the writer runs its whole
batching loop as one long call (``storage/engine/writer.py``):

    thread = await ConnectionThread.open(path, Role.WRITER, synchronous="normal")
    rows = await thread.call(lambda conn: conn.execute("SELECT 1").fetchall())

Calls run one at a time, in the order they were submitted. Exceptions raised
by the function are re-raised in the awaiting coroutine.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from storage.engine.connection import Role, open_sqlite

__all__ = ["ConnectionThread"]

T = TypeVar("T")
_Item = tuple["asyncio.Future[Any]", Callable[[sqlite3.Connection], Any]] | None


def _deliver(future: asyncio.Future[Any], result: Any, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


class ConnectionThread:
    """Owns one ``sqlite3.Connection``; only its thread ever touches it."""

    def __init__(self, name: str) -> None:
        self._queue: queue.SimpleQueue[_Item] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._serve, name=name, daemon=True)
        self._conn: sqlite3.Connection | None = None
        self._connect: Callable[[], sqlite3.Connection] | None = None
        self._closed = False

    @classmethod
    async def open(cls, path: Path, role: Role, *, synchronous: str) -> ConnectionThread:
        worker = cls(f"storage-{role.value}")
        worker._connect = lambda: open_sqlite(path, role, synchronous=synchronous)
        worker._thread.start()
        try:
            await worker.call(lambda conn: None)  # surfaces a failed connect here
        except BaseException:
            await worker.close()
            raise
        return worker

    async def call(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run ``fn(connection)`` in the connection's thread and return its result."""
        return await self.submit(fn)

    def submit(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Queue ``fn(connection)`` now; the future completes when it has run. Calls run in order."""
        if self._closed:
            raise RuntimeError("the connection thread is closed")
        future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
        self._queue.put((future, fn))
        return future

    async def close(self) -> None:
        """Close the connection and stop the thread (after the calls already queued)."""
        if self._closed:
            return
        self._closed = True
        self._queue.put(None)
        await asyncio.to_thread(self._thread.join)

    def _serve(self) -> None:
        connect_error: BaseException | None = None
        try:
            assert self._connect is not None
            self._conn = self._connect()
        except BaseException as error:  # reported to every caller below
            connect_error = error
        while True:
            item = self._queue.get()
            if item is None:
                break
            future, fn = item
            result: Any = None
            failure = connect_error
            if failure is None:
                try:
                    result = fn(self._conn)  # type: ignore[arg-type]
                except BaseException as error:
                    failure = error
            try:
                future.get_loop().call_soon_threadsafe(_deliver, future, result, failure)
            except RuntimeError:  # the loop is gone; nobody is waiting any more
                pass
        if self._conn is not None:
            self._conn.close()

"""Transactions on a plain sqlite3 connection, and retrying them while the database is busy."""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Awaitable, Callable
from typing import TypeVar

from storage.errors import WriteFailedError
from storage.log import log
from storage.engine.retry import RetryPolicy, is_busy
from storage.engine.worker import ConnectionThread

__all__ = ["call_with_retry", "in_transaction", "retry_busy", "rollback"]

T = TypeVar("T")


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back if a transaction is still open (SQLite ends some on its own after I/O errors)."""
    if conn.in_transaction:
        conn.execute("ROLLBACK")


def in_transaction(conn: sqlite3.Connection, body: Callable[[sqlite3.Connection], T]) -> T:
    """``BEGIN IMMEDIATE``, ``body(conn)``, ``COMMIT``; rolled back if anything raises."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        result = body(conn)
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise
    return result


async def retry_busy(attempt: Callable[[], Awaitable[T]], *, retry: RetryPolicy, what: str) -> T:
    """Await ``attempt()``; back off and try again while it fails with busy/locked."""
    for number in range(1, retry.attempts + 1):
        try:
            return await attempt()
        except sqlite3.Error as error:
            if not is_busy(error) or number == retry.attempts:
                raise WriteFailedError(error, attempts=number) from error
            delay = retry.delay(number)
            log.warning("storage.write_retry", what=what, attempt=number, delay_ms=round(delay * 1000, 1),
                        error=str(error))  # fmt: skip
            await asyncio.sleep(delay)
    raise AssertionError("unreachable: the last attempt either returns or raises")


async def call_with_retry(
    thread: ConnectionThread, fn: Callable[[sqlite3.Connection], T], *, retry: RetryPolicy, what: str
) -> T:
    """Run ``fn`` in the connection's thread, retried while the database is busy."""
    return await retry_busy(lambda: thread.call(fn), retry=retry, what=what)

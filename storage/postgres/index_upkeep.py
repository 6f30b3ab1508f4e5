"""Keeping the GIN indexes' pending entries short, in the background (as SQLite's writer merges its search index).

A GIN index with ``fastupdate`` (PostgreSQL's default) takes a new row's keys into a pending list and
merges them into the index proper later: an insert stays cheap. Two costs come with the list. Every
search reads the whole list (a message's 50-100 words make it grow fast: after a burst of 10,000
messages a word search took 7.7 ms where it takes 2.4 ms on a merged index), and the insert that
finds it past ``gin_pending_list_limit`` (4 MB) merges all of it while its caller waits (the appends of
that statement waited 150-500 ms). Autovacuum merges it too, but on its own schedule.

``IndexUpkeep`` merges it itself, off the appends' path: after every ``every`` messages appended by
this store, one background call of ``gin_clean_pending_list`` per index on a connection of its own
(the inserts go on meanwhile; the merge locks the list only a page at a time). Failures are logged
and the next round tries again: the indexes are correct either way, only slower.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Final

from storage.errors import StoreClosedError
from storage.log import log
from storage.postgres.connection import Connection

__all__ = ["INDEXES", "IndexUpkeep"]

INDEXES: Final = ("messages_words", "search_vocabulary_trigrams")
"""The GIN indexes with pending lists: the message words and the vocabulary's trigrams."""
EVERY: Final = 1_000
"""Messages appended between two merges (a few hundred kB of pending word entries for the bench's messages)."""

Run = Callable[[Callable[[Connection], Awaitable[Any]]], Awaitable[Any]]


class IndexUpkeep:
    """Counts appended messages and merges the pending lists in the background every ``every`` of them."""

    def __init__(self, run: Run, *, every: int = EVERY) -> None:
        self._run = run
        self._every = every
        self._since = 0
        self._task: asyncio.Task[None] | None = None

    def appended(self, count: int) -> None:
        """``count`` messages were committed; start a merge when enough have been since the last one."""
        self._since += count
        if self._since >= self._every and (self._task is None or self._task.done()):
            self._since = 0
            self._task = asyncio.ensure_future(self._merge())

    async def close(self) -> None:
        """Stop a merge under way (what it merged stays merged; the rest waits for the next start or autovacuum)."""
        if self._task is not None and not self._task.done():
            self._task.cancel()
            await asyncio.wait([self._task])

    async def _merge(self) -> None:
        async def clean(conn: Connection) -> None:
            for index in INDEXES:
                await conn.fetchval("SELECT gin_clean_pending_list($1::regclass)", index)

        try:
            await self._run(clean)
        except StoreClosedError:
            pass
        except Exception as error:  # noqa: BLE001  (never fatal: the indexes stay right, only slower)
            log.warning("storage.index_upkeep_failed", error=str(error) or type(error).__name__)

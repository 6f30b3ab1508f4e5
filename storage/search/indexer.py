"""Filling the substring-search vocabulary in the background, off the append path.

Appends never wait for this. Every ``interval`` seconds, when something was
committed since the last look, the indexer reads the messages above the
watermark in slices of ``slice_rows`` on its own connection, where SQLite
cuts them into words and picks the new ones (``storage/search/words.py``), and hands
one small write operation to the writer: insert the new words, move the
watermark. Once the vocabulary has settled that operation is little more
than a one-row update; its cost does not grow with the size of the messages.

The work of cutting text into words is real CPU time, and on a small machine
it runs on the same cores as the writer: indexing alongside a burst of appends
slows the writer's own statements while the indexer reads on the other core
(``bench.storage`` reports the cost as ``word_indexer_cost_pct``). So the
indexer leaves bursts alone. At each tick it looks at how long
the writer spent writing since the last one (``WalProgress.writing_seconds``).
If that is more than ``busy_share`` of the interval (half, by default), the
writer is busy: the indexer works only while more than ``busy_backlog``
messages wait, so the tail that queries scan (``storage.search.words.TAIL_ROWS``,
50,000 messages) stays within reach. Otherwise it catches up completely.
A gateway's turn is a handful of write transactions of well under a
millisecond each, so even a hundred busy chats keep the writer far below
half busy and the indexer keeps up tick by tick; only a burst of appends
back to back builds a tail, which the first quiet tick indexes. What holding
back buys shows in ``bench.storage``'s append p99 and max latency.

Several processes may index the same file: words are inserted with
``OR IGNORE`` and the watermark only moves up, so duplicate work is harmless.
``catch_up()`` drives the same steps directly (tests, the benchmark, tools).
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import time
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Final

from storage.engine.connection import Role
from storage.errors import StorageError
from storage.log import warn_at_most_once_a_minute
from storage.engine.maintenance import WalProgress
from storage.search.words import TAIL_ROWS, backlog, read_slice, record_words
from storage.engine.worker import ConnectionThread

__all__ = ["BUSY_BACKLOG", "BUSY_SHARE", "SLICE_ROWS", "WordIndexer"]

SLICE_ROWS: Final = 2000
BUSY_SHARE: Final = 0.5
"""The writer counts as busy when it spent more than this share of the last interval writing."""
BUSY_BACKLOG: Final = TAIL_ROWS - 10_000
"""While the writer is busy, the indexer works only when more messages than this wait.

The unindexed tail stays under ``TAIL_ROWS`` as long as fewer than 10,000 messages arrive between
two looks: 40,000 appends a second at the default interval, well past what the writer sustains."""


class WordIndexer:
    def __init__(
        self,
        thread: ConnectionThread,
        write: Callable[[Callable[[sqlite3.Connection], None]], Awaitable[None]],
        progress: WalProgress,
        *,
        interval: float | None,
        slice_rows: int = SLICE_ROWS,
        busy_backlog: int = BUSY_BACKLOG,
        busy_share: float = BUSY_SHARE,
    ) -> None:
        self._thread = thread
        self._write = write  # queues a write operation for the writer (``Writer.run``)
        self._progress = progress
        self._interval = interval
        self._slice_rows = slice_rows
        self._busy_backlog = busy_backlog
        self._busy_share = busy_share
        self._lock = asyncio.Lock()  # one slice at a time, whoever asks
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @staticmethod
    async def open_thread(path: Path, *, synchronous: str) -> ConnectionThread:
        """The indexer's own connection, in a thread of its own."""
        return await ConnectionThread.open(path, Role.MAINTENANCE, synchronous=synchronous)

    def start(self) -> None:
        """Run in the background; without an interval the indexer only works when ``catch_up()`` is called."""
        if self._interval is not None:
            self._task = asyncio.create_task(self._loop(self._interval), name="storage.word_indexer")

    async def close(self) -> None:
        """Stop, then close the connection (before the writer closes: a slice in flight still needs it)."""
        self._stop.set()
        if self._task is not None:
            await self._task
        await self._thread.close()

    async def index_slice(self) -> int:
        """Read one slice of unindexed messages into the vocabulary; returns how many messages it covered."""
        async with self._lock:
            found = await self._thread.call(partial(read_slice, rows=self._slice_rows))
            if found.rows:
                await self._write(partial(record_words, words=found.words, through=found.through))
            return found.rows

    async def catch_up(self, *, slices: int | None = None) -> int:
        """Index until no message is left above the watermark (or after ``slices`` slices); returns messages read."""
        total = 0
        done = 0
        while slices is None or done < slices:
            count = await self.index_slice()
            total += count
            done += 1
            if count < self._slice_rows:
                break
        return total

    async def _loop(self, interval: float) -> None:
        indexed_at = -1  # the writer's commit count when the indexer last caught up
        looked_at, written = time.monotonic(), self._progress.writing_seconds
        while not self._stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), interval)
            now, writing = time.monotonic(), self._progress.writing_seconds
            busy = writing - written > self._busy_share * (now - looked_at)
            looked_at, written = now, writing
            commits = self._progress.commits
            if commits == indexed_at or self._stop.is_set():
                continue
            try:
                if busy:  # leave the CPU to the writer, unless the tail queries scan grows too long
                    while not self._stop.is_set() and await self._thread.call(backlog) > self._busy_backlog:
                        if not await self.index_slice():
                            break
                    continue
                while not self._stop.is_set():
                    if await self.index_slice() < self._slice_rows:
                        break
            except (sqlite3.Error, StorageError) as error:  # best effort: try again next round
                warn_at_most_once_a_minute("storage.word_index_failed", error=str(error))
                continue
            indexed_at = commits

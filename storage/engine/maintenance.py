"""Keeping the WAL small without ever making a writer wait for a whole checkpoint.

Automatic checkpoints are off on the writer connection (a commit that trips
one waits for the whole checkpoint, and every append queued behind it too). Instead:

* This task, on its own connection and thread, runs
  ``PRAGMA wal_checkpoint(PASSIVE)`` every ``interval`` seconds when something
  was committed since the last run. A passive checkpoint copies what it can
  without blocking the writer. If the WAL grew meanwhile, a few more runs
  follow at once, each copying only the frames written during the previous.
* The WAL file only starts over from the beginning when a write transaction
  begins right after a checkpoint that copied *everything*. A burst of
  back-to-back transactions therefore grows it; the first round that finds
  the writer paused copies the rest, and the next transaction starts over.
* A restart reuses the WAL file from its start; it does not make it
  smaller. After a burst has grown it past ``WAL_KEEP_BYTES``, the first
  round that finds the writer quiet (its checkpoint copied the whole WAL,
  and nothing was committed meanwhile) truncates the file with
  ``PRAGMA wal_checkpoint(TRUNCATE)``; a write that comes meanwhile waits
  the few ms that takes. SQLite's own ``journal_size_limit`` would cut it at
  the first commit after a restart instead, inside the writer, where the
  appends queued behind that commit would wait for it.

Full-text index merging needs the write lock; the writer does it in small
slices too.
"""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import aiosqlite

from storage.log import log, warn_at_most_once_a_minute

__all__ = ["WAL_KEEP_BYTES", "Maintenance", "WalProgress"]

_CATCH_UP_TRIES: Final = 4
_FEW_FRAMES: Final = 64
WAL_KEEP_BYTES: Final = 64 * 1024 * 1024
"""A WAL file larger than this is truncated once the writer is quiet again."""


@dataclass(slots=True)
class WalProgress:
    """Counters the writer's thread shares with the maintenance task and the word indexer (atomic to read)."""

    commits: int = 0
    """Write transactions the writer has committed."""
    background_checkpoints: int = 0
    """Background checkpoint rounds completed."""
    writing_seconds: float = 0.0
    """Time the writer has spent on batches (transactions and merge slices): how busy it is."""


class Maintenance:
    def __init__(
        self, conn: aiosqlite.Connection, progress: WalProgress, *, interval: float, wal: Path,
        keep_bytes: int = WAL_KEEP_BYTES,
    ) -> None:  # fmt: skip
        self._conn = conn
        self._progress = progress
        self._interval = interval
        self._wal = wal
        self._keep_bytes = keep_bytes
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self._checkpointed_at = -1

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name="storage.engine.maintenance")

    async def checkpoint(self, mode: str = "PASSIVE") -> tuple[int, int, int]:
        """``(busy, wal_frames, checkpointed_frames)`` as SQLite reports them."""
        rows = await self._conn.execute_fetchall(f"PRAGMA wal_checkpoint({mode})")
        busy, frames, done = rows[0]
        return int(busy), int(frames), int(done)

    async def close(self) -> None:
        self._stop.set()
        if self._task is not None:
            await self._task
        await self._conn.close()

    async def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._stop.wait(), self._interval)
            commits = self._progress.commits
            if commits == self._checkpointed_at or self._stop.is_set():
                continue
            self._checkpointed_at = commits
            try:
                if await self._catch_up() and self._progress.commits == commits:  # the writer is quiet
                    await self._shrink_wal()
            except sqlite3.Error as error:
                warn_at_most_once_a_minute("storage.checkpoint_failed", error=str(error))
            self._progress.background_checkpoints += 1

    async def _catch_up(self) -> bool:
        """Checkpoint; while the WAL grew during the last run, again (a few times).

        True if the last run copied the whole WAL: the writer wrote nothing meanwhile.
        """
        previous = -1
        for attempt in range(_CATCH_UP_TRIES):
            busy, frames, done = await self.checkpoint()
            log.debug("storage.checkpoint", busy=busy, wal_frames=frames, copied=done, attempt=attempt)
            if busy or done < frames or frames <= previous + _FEW_FRAMES:
                return not busy and done == frames  # else blocked by a reader, or the writer goes on
            previous = frames
        return False

    async def _shrink_wal(self) -> None:
        """Give back the disk a burst made the WAL file take, once the writer is quiet."""
        try:
            size = self._wal.stat().st_size
        except OSError:
            return
        if size > self._keep_bytes and not (await self.checkpoint("TRUNCATE"))[0]:
            log.info("storage.wal_truncated", megabytes=round(size / 2**20, 1))

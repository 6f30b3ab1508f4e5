"""Group commit for PostgreSQL appends: the appends queued while a statement runs go to the server together.

A turn's messages, a model call's usage, a burst of chats each storing its user's message: on SQLite
one writer commits whatever is queued in one transaction, and an append costs a few microseconds of
that. Here each statement costs a round trip and a commit, so one append per statement caps a busy
gateway at what one connection does in a round trip. ``AppendBatcher.add`` queues an append; up to
``in_flight`` statements run at once, and each takes a fair share of the appends waiting when it
starts (an ``in_flight``-th of them, at most ``most``) into one ``messages.append_many`` statement.
Under light load that is one append per statement, sent at once; under a burst, hundreds in a few
statements. The share matters for the slowest appends: a statement that stalls (the server extending
a file, merging an index's pending entries) holds up only the appends it carries, and with every
waiting append in one statement that was all of them (100 writers: p99 287 ms with one statement
taking everything, 59 ms with shares, the same bench).

The appends of one statement are to different sessions: the store queues a session's writes one
after another (``PostgresStore._queued``), so a session's next append is only added once its
previous one has landed. A statement the server refuses for a reason other than a conflict or an
outage (which ``run_with_retry`` handles) is split: each append is tried alone, so one bad append
fails alone, never its neighbours.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any, Final

from storage.errors import StorageError
from storage.postgres.connection import Connection
from storage.postgres.faults import trouble_of
from storage.postgres.messages import Append, append_many
from storage.records import MessageRecord

__all__ = ["AppendBatcher"]

IN_FLIGHT: Final = 4
"""Statements of appends at once (of the pool's connections; the rest serve reads and other writes)."""
MOST: Final = 256
"""Appends in one statement at most."""

Run = Callable[[Callable[[Connection], Awaitable[Any]]], Awaitable[Any]]
Waiting = tuple[Append, "asyncio.Future[list[MessageRecord]]"]


class AppendBatcher:
    """Appends queued by ``add`` and written together; ``run(op)`` runs ``op(conn)`` as one retried statement."""

    def __init__(
        self, run: Run, clock: Callable[[], float], *, in_flight: int = IN_FLIGHT, most: int = MOST,
        appended: Callable[[int], None] | None = None,
    ) -> None:  # fmt: skip
        self._run = run
        self._appended = appended
        """Told how many messages each statement committed (``storage/postgres/index_upkeep.py``)."""
        self._clock = clock
        self._in_flight = in_flight
        self._most = most
        self._waiting: list[Waiting] = []
        self._flushing: set[asyncio.Task[None]] = set()

    def add(self, append: Append) -> asyncio.Future[list[MessageRecord]]:
        """Queue ``append``; its future ends with its records once they are committed (``SessionNotFoundError``,
        ``WriteFailedError``... when they are not)."""
        future: asyncio.Future[list[MessageRecord]] = asyncio.get_running_loop().create_future()
        self._waiting.append((append, future))
        if len(self._flushing) < self._in_flight:
            task = asyncio.ensure_future(self._flush())
            self._flushing.add(task)
            task.add_done_callback(self._flushing.discard)
        return future

    async def _flush(self) -> None:
        while self._waiting:
            share = min(self._most, -(-len(self._waiting) // self._in_flight))  # a fair part: no statement carries all
            batch, self._waiting = self._waiting[:share], self._waiting[share:]
            await self._write(batch)

    async def _write(self, batch: list[Waiting]) -> None:
        try:
            results = await self._run(partial(append_many, appends=[a for a, _ in batch], now=self._clock()))
        except StorageError as error:
            if len(batch) > 1 and trouble_of(error) is None:
                for one in batch:  # one bad append (a value the schema refuses) fails alone
                    await self._write([one])
                return
            _settle(batch, [error] * len(batch))
        except BaseException as error:  # cancelled with the store's loop: nothing is left waiting
            _settle(batch, [error] * len(batch))
            raise
        else:
            _settle(batch, results)
            if self._appended is not None:
                self._appended(sum(len(r) for r in results if isinstance(r, list)))


def _settle(batch: list[Waiting], results: list[Any]) -> None:
    for (_, future), result in zip(batch, results):
        if future.done():
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)

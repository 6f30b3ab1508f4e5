"""A fault seam: the public way for tests and drills to watch a store's engine and make it misbehave.

    faults = FaultSeam()
    store = await Store.open(path, faults=faults)
    await faults.on_writer(lambda conn: conn.execute("PRAGMA max_page_count = 1").fetchall())  # a full disk

A test that reached into the store's private attributes instead would break with every change of
the engine's insides; through this seam it says what it does in the store's own terms:

* ``on_writer(fn)`` runs ``fn`` on the writer's connection, in its thread, as a write of its own
  (shrink the file's page limit, trace statements, hold the writer while writes queue);
* ``batch(size)`` and ``appended(session_id, records)`` are hooks, no-ops here: subclass and
  override them to watch every batch the writer commits, or to make the store's bookkeeping of a
  committed append fail (raise in ``appended``);
* ``checkpoint_rounds`` counts the maintenance task's background checkpoint rounds; ``progress``
  is what the writer shares with its background work, for a test that runs such work of its own
  (a word indexer with small bounds).

A store opened without one does none of this, and its hooks cost nothing. What a failure then looks
like to callers is the same as in production: :class:`storage.errors.Fault` names it.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from storage.records import MessageRecord

__all__ = ["FaultSeam"]

T = TypeVar("T")


class FaultSeam:
    """Hooks into one store's engine; give it to ``Store.open(..., faults=...)`` (one store per instance)."""

    def __init__(self) -> None:
        self._run: Callable[[Callable[[sqlite3.Connection], Any]], asyncio.Future[Any]] | None = None
        self._progress: Any = None

    def attach(self, run: Callable[[Callable[[sqlite3.Connection], Any]], asyncio.Future[Any]], progress: Any) -> None:
        """Called by the store as it opens: how to reach its writer, and the counters it shares with maintenance."""
        if self._run is not None:
            raise RuntimeError("these faults are attached to a store already; make one per store")
        self._run, self._progress = run, progress

    def batch(self, size: int) -> None:
        """Called in the writer's thread with the number of writes of each batch, before it is committed."""

    def appended(self, session_id: str, records: Sequence[MessageRecord]) -> None:
        """Called on the event loop when an append is committed, before the store notes it; raising here is
        a failure of the store's own bookkeeping (the callers of the batch must still get their results)."""

    def on_writer(self, fn: Callable[[sqlite3.Connection], T]) -> asyncio.Future[T]:
        """Queue ``fn(conn)`` for the writer's next transaction, as a write; the future gets its result once committed."""
        if self._run is None:
            raise RuntimeError("open a store with these faults first")
        return self._run(fn)

    @property
    def progress(self) -> Any:
        """The counters the writer shares with its background work (``storage.engine.maintenance.WalProgress``):
        commits, time spent writing, checkpoint rounds; for a test that runs background work of its own."""
        return self._progress

    @property
    def checkpoint_rounds(self) -> int:
        """Background checkpoint rounds the maintenance task has completed so far."""
        return int(self._progress.background_checkpoints)

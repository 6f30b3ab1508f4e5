"""The single writer: every write goes through one queue, one connection and one thread.

Callers ``await writer.run(op)``, ``await writer.append(request)`` or
``await writer.bulk(BulkWrite(kind, item))``. Jobs go into a queue that the
writer connection's thread drains (``storage/engine/worker.py`` runs the batching
loop there): everything queued so far becomes one ``BEGIN IMMEDIATE ...
COMMIT`` (group commit), or two (``SPLIT_MIN_APPENDS`` says when and why).
A batch of nothing but plain appends to sessions the writer has appended to
before is a single ``INSERT`` that SQLite commits on its own
(``storage/engine/batch.py``). All appends of a batch become one bulk insert, and
all bulk writes of one kind one call of that kind (``storage/engine/bulk.py``);
other operations (plain functions of a ``sqlite3.Connection``) run one after
another. An append may carry a bulk write of its own (``AppendRequest.then``,
e.g. the reply that delivers its messages), applied after the appends and
only for those that went in. Futures are resolved only after COMMIT returns,
so an awaited write is durable.

The batching loop runs in the thread, not in the event loop, so the next
batch starts the moment the previous one commits, with whatever was queued
meanwhile, instead of waiting for the loop to wake every caller of the
previous one first; the loop only queues jobs and hands back results.

Failure handling, in order:

* SQLITE_BUSY / SQLITE_LOCKED (another process holds the write lock): roll
  back, back off (exponential, with jitter, logged as ``storage.write_retry``),
  let newly queued writes join, try again; after ``RetryPolicy.attempts``
  tries every operation in the batch fails with ``WriteFailedError``.
* Any other error while a batch of several is applied: roll back and replay
  the operations one transaction each, so only the faulty one fails. (No
  savepoint per operation: that is three more statements each. Operations
  are written to be replayed anyway: a busy database makes the writer run a
  batch again.)

Full-text index merging needs the write lock too. After a commit has been
handed back, the thread merges index segments in bounded slices, each its own
transaction: one per ``MergePolicy.rows_per_slice`` rows while writes keep
coming, and whatever is still owed whenever the queue is empty (such as while
the event loop wakes the callers of the last batch). Merging never runs
inside an append transaction and never grows into a stall.
"""

from __future__ import annotations

import asyncio
import queue
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Generic, TypeVar

from storage.engine.batch import Outcome, append_batch_alone, apply_batch
from storage.engine.bulk import BulkWrite
from storage.errors import StoreClosedError, WriteFailedError
from storage.log import log, warn_at_most_once_a_minute
from storage.engine.maintenance import WalProgress
from storage.messages import AppendRequest, Sequences
from storage.records import MessageRecord
from storage.engine.retry import RetryPolicy, is_busy
from storage.schema import FTS_USERMERGE
from storage.engine.transaction import in_transaction
from storage.engine.worker import ConnectionThread

__all__ = ["MAX_BATCH", "SPLIT_MIN_APPENDS", "MergePolicy", "Settled", "WriteOp", "Writer"]

T = TypeVar("T")
WriteOp = Callable[[sqlite3.Connection], T]
"""A write operation: runs its statements on the writer connection, inside a transaction."""

MAX_BATCH: Final = 2000
"""The most operations one transaction takes; the rest wait for the next one."""
SPLIT_MIN_APPENDS: Final = 32
"""A batch the writer had to wait for, with at least this many appends, goes in two transactions.

With many callers each awaiting its own append (a hundred chats at once), the writer commits all of
them, then waits while the event loop hands back every result and gathers the next messages, and
the loop waits while the writer writes: they take turns. Committing half the appends, then the
other half, lets the first half's callers resume while the second is written; from then on the
two halves keep alternating, and the writer no longer waits. A batch that was already queued when
the writer came for it (the gateway under load, where the event loop, not the writer, is the
limit) goes in whole: a second transaction would only be one more hand-back for a busy loop, and
every statement of it one more wait for the GIL. Halves smaller than 16 appends gain less than a
commit costs. What it buys shows in ``bench.storage``'s appends per second (its scenario exactly).
"""
_MAX_MERGE_DEBT_PAGES: Final = 20_000


@dataclass(frozen=True, slots=True, kw_only=True)
class MergePolicy:
    """How much full-text index merging the writer does, and when.

    Merging is owed for every message appended (``pages_per_row``). While
    writes keep coming, the writer pays one bounded slice per
    ``rows_per_slice`` messages; whenever its queue is empty it pays off the
    rest, a slice at a time, checking for new writes between slices.
    """

    rows_per_slice: int = 200
    """Under load, one slice per this many appended messages."""
    pages_per_slice: int = 32
    """Index pages one slice may write (FTS5 ``'merge'`` argument); bounds how long it holds the lock.

    Each slice is a transaction with a fixed cost of its own (the index's structure record is read
    and rewritten, the commit), so fewer, larger slices cost the writer less in all; a slice of
    32 pages still holds the lock for only a few milliseconds."""
    pages_per_row: float = 0.3
    """Merge work owed per appended message (about what the index needs to stay at a few segments)."""


Settled = Callable[[Any, "BaseException | None"], None]
"""Called on the event loop with a write's result or error, just before its future gets it."""


@dataclass(slots=True)
class _Job(Generic[T]):
    op: WriteOp[T] | AppendRequest | BulkWrite
    future: asyncio.Future[T]
    settled: Settled | None = None


class Writer:
    """Owns the writer connection thread from ``start()`` until ``close()``."""

    def __init__(
        self,
        thread: ConnectionThread,
        *,
        retry: RetryPolicy,
        clock: Callable[[], float],
        merge: MergePolicy | None = MergePolicy(),
        progress: WalProgress | None = None,
        on_batch: Callable[[int], None] | None = None,
    ) -> None:
        self._thread = thread
        self._on_batch = on_batch  # the fault seam's ``batch`` hook (``storage/faults.py``)
        self._retry = retry
        self._clock = clock
        self._merge = merge
        self._jobs: queue.SimpleQueue[_Job[Any] | None] = queue.SimpleQueue()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._served: asyncio.Future[None] | None = None
        self._closing = False
        # touched only in the connection's thread:
        self._known = Sequences()
        self._rows_since_merge = 0
        self._merge_debt = 0.0  # index pages of merging owed
        self._segments = 0  # index segments appends have written (one per transaction that appended)
        self._settled_at = 0  # ``_segments`` when a merge slice last found nothing to merge
        self._stop_seen = False
        self.progress = progress if progress is not None else WalProgress()

    @property
    def external_commits(self) -> int:
        """How many of this writer's transactions found that another connection had committed since its last."""
        return self._known.external_commits

    def start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._served = self._thread.submit(self._serve)
        self._served.add_done_callback(self._stopped)

    def run(self, op: WriteOp[T]) -> asyncio.Future[T]:
        """Queue ``op`` for the next transaction; the future gets its result once committed."""
        return self._submit(op)

    def append(self, request: AppendRequest, *, settled: Settled | None = None) -> asyncio.Future[list[MessageRecord]]:
        """Queue messages for the next transaction; the future gets their records once committed.

        ``settled(records, error)`` runs first, on the event loop, in the same callback: whoever
        awaits the future finds what it did already done. (A done callback on the future would cost
        a round of the event loop of its own.) It also runs when the caller gave up waiting but the
        messages went in; not when they were never written.
        """
        return self._submit(request, settled)

    def bulk(self, write: BulkWrite, *, settled: Settled | None = None) -> asyncio.Future[Any]:
        """Queue one item of a bulk write; the future gets its result once committed (``settled``: as for ``append``)."""
        return self._submit(write, settled)

    async def close(self) -> None:
        """Refuse new writes, finish the queued ones, stop the batching loop."""
        if not self._closing:
            self._closing = True
            self._jobs.put(None)  # queued after every job submitted so far
        if self._served is not None:
            await asyncio.wait([self._served])

    def _submit(self, op: WriteOp[T] | AppendRequest | BulkWrite, settled: Settled | None = None) -> asyncio.Future[Any]:
        if self._closing:
            raise StoreClosedError("write to")
        assert self._loop is not None, "start() the writer first"
        future: asyncio.Future[Any] = self._loop.create_future()
        self._jobs.put(_Job(op, future, settled))
        return future

    def _stopped(self, served: asyncio.Future[None]) -> None:
        """The batching loop ended. If it crashed, nobody may be left waiting."""
        if served.cancelled() or served.exception() is None:
            return
        self._closing = True
        log.error("storage.writer_crashed", error=repr(served.exception()))
        leftovers = []
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is not None:
                leftovers.append(job)
        _fail(leftovers, StoreClosedError("write to"))

    # -- in the connection's thread ----------------------------------------------------------------

    def _serve(self, conn: sqlite3.Connection) -> None:
        """Take what is queued, commit it, hand results back; until ``close()``'s sentinel."""
        while not self._stop_seen:
            try:
                first, waited = self._jobs.get_nowait(), False
            except queue.Empty:
                first, waited = self._jobs.get(), True
            jobs = self._drain([] if first is None else [first], stop=first is None)
            if jobs:
                started = time.perf_counter()
                self._commit(conn, jobs, split=waited)
                self._merge_if_due(conn)
                self.progress.writing_seconds += time.perf_counter() - started

    def _drain(self, jobs: list[_Job[Any]], *, stop: bool = False) -> list[_Job[Any]]:
        self._stop_seen = self._stop_seen or stop
        while len(jobs) < MAX_BATCH:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                break
            if job is None:
                self._stop_seen = True
            else:
                jobs.append(job)
        return [job for job in jobs if not job.future.done()]  # skip callers that gave up already

    def _commit(self, conn: sqlite3.Connection, jobs: list[_Job[Any]], *, split: bool = False) -> None:
        """Commit ``jobs`` in queue order: in one transaction, or with ``split`` maybe two (``SPLIT_MIN_APPENDS``)."""
        if self._on_batch is not None:
            self._on_batch(len(jobs))
        failures = 0
        while jobs:
            part, later = _halves(jobs) if split else (jobs, [])
            try:
                ops = [job.op for job in part]
                outcomes = None if failures else append_batch_alone(conn, ops, self._clock(), self._known)
                if outcomes is None:
                    outcomes = in_transaction(conn, lambda c: apply_batch(c, ops, self._clock(), self._known))
            except sqlite3.Error as error:
                self._known.forget()
                if not is_busy(error):
                    self._isolate(conn, part, WriteFailedError(error, attempts=failures + 1))
                else:
                    failures += 1
                    if failures >= self._retry.attempts:
                        self._settle(_fail, jobs, WriteFailedError(error, attempts=failures))
                        return
                    self._back_off(failures, error, len(jobs))
                    jobs = self._drain(jobs)  # writes queued meanwhile join the next attempt
                    continue
            except Exception as error:
                self._known.forget()
                self._isolate(conn, part, error)
            else:
                self._committed(part, outcomes)
            jobs, failures, split = later, 0, False

    def _committed(self, jobs: list[_Job[Any]], outcomes: list[Outcome]) -> None:
        self.progress.commits += 1
        appended = sum(
            len(o.value if job.op.then is None else o.value[0])  # with ``then``: (records, its outcome)
            for job, o in zip(jobs, outcomes)
            if isinstance(job.op, AppendRequest) and o.value
        )
        self._rows_since_merge += appended
        self._segments += appended > 0
        if self._merge is not None:
            self._merge_debt = min(_MAX_MERGE_DEBT_PAGES, self._merge_debt + appended * self._merge.pages_per_row)
        self._settle(_resolve, jobs, outcomes)

    def _isolate(self, conn: sqlite3.Connection, jobs: list[_Job[Any]], error: BaseException) -> None:
        """A batch failed for a reason other than busy: find the culprit by replaying one by one."""
        if len(jobs) == 1:
            self._settle(_fail, jobs, error)
            return
        for job in jobs:
            self._commit(conn, [job])

    def _back_off(self, failures: int, error: sqlite3.Error, batch: int) -> None:
        delay = self._retry.delay(failures)
        log.warning(
            "storage.write_retry",
            attempt=failures,
            of=self._retry.attempts,
            delay_ms=round(delay * 1000, 1),
            batch=batch,
            error=str(error),
        )
        time.sleep(delay)  # this thread does nothing but write; new jobs keep queueing meanwhile

    def _merge_if_due(self, conn: sqlite3.Connection) -> None:
        """Slices of index merging, each its own transaction: one per ``rows_per_slice`` rows, more when idle.

        None while the index is settled: from a slice that found nothing to merge (no level held
        ``FTS_USERMERGE`` segments) until appends have written that many new ones. Such a slice
        would still cost a transaction, and it runs just as the event loop wakes the callers of the
        batch before it, so each of its statements would wait for the GIL for nothing. Segments
        that other processes write are not counted; FTS5's 'crisismerge' is the backstop for those.
        What it buys shows in ``bench.storage``'s appends per second and append p99 and max.
        """
        if self._merge is None or self._segments - self._settled_at < FTS_USERMERGE:
            return
        if self._rows_since_merge >= self._merge.rows_per_slice:
            self._rows_since_merge %= self._merge.rows_per_slice
            self._merge_slice(conn)
        while self._merge_debt > 0 and self._jobs.empty() and not self._stop_seen:
            if not self._merge_slice(conn):
                return  # nothing left to merge, or another process holds the lock: look again later

    def _merge_slice(self, conn: sqlite3.Connection) -> bool:
        """One slice; False if it could not run or found nothing to merge (the index is settled)."""
        assert self._merge is not None
        before = conn.total_changes
        try:
            _merge_slice(conn, pages=self._merge.pages_per_slice)  # one statement: its own transaction
        except sqlite3.Error as error:  # maintenance is best effort
            warn_at_most_once_a_minute("storage.merge_skipped", error=str(error))
            return False
        if conn.total_changes - before <= 1:  # the 'merge' command's own row: no index page was written
            self._merge_debt = 0.0
            self._settled_at = self._segments
            return False
        self._merge_debt -= self._merge.pages_per_slice
        return True

    def _settle(self, how: Callable[[list[_Job[Any]], Any], None], jobs: list[_Job[Any]], result: Any) -> None:
        assert self._loop is not None
        try:
            self._loop.call_soon_threadsafe(how, jobs, result)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


def _halves(jobs: list[_Job[Any]]) -> tuple[list[_Job[Any]], list[_Job[Any]]]:
    """The jobs up to the middle append, and the rest; all in the first if there are few appends."""
    appends = [index for index, job in enumerate(jobs) if isinstance(job.op, AppendRequest)]
    if len(appends) < SPLIT_MIN_APPENDS:
        return jobs, []
    cut = appends[len(appends) // 2]
    return jobs[:cut], jobs[cut:]


def _resolve(jobs: list[_Job[Any]], outcomes: list[Outcome]) -> None:
    for job, outcome in zip(jobs, outcomes, strict=True):
        if job.settled is not None:
            _call_settled(job, outcome.value, outcome.error)
        if job.future.done():
            continue
        if outcome.error is not None:
            job.future.set_exception(_raisable(outcome.error))
        else:
            job.future.set_result(outcome.value)


def _fail(jobs: list[_Job[Any]], error: BaseException) -> None:
    for job in jobs:
        if job.settled is not None:
            _call_settled(job, None, error)
        if not job.future.done():
            job.future.set_exception(_raisable(error))


def _call_settled(job: _Job[Any], value: Any, error: BaseException | None) -> None:
    try:
        job.settled(value, error)  # type: ignore[misc]
    except Exception as failure:  # noqa: BLE001 - one caller's bookkeeping must not leave the others waiting
        log.error("storage.settled_callback_failed", error=repr(failure), exc_info=failure)


def _raisable(error: BaseException) -> BaseException:
    """asyncio refuses StopIteration in a future; nobody may be left waiting because of that."""
    if isinstance(error, StopIteration):
        wrapped = RuntimeError(f"write operation raised StopIteration: {error!r}")
        wrapped.__cause__ = error
        return wrapped
    return error


def _merge_slice(conn: sqlite3.Connection, *, pages: int) -> None:
    conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('merge', ?)", (pages,))

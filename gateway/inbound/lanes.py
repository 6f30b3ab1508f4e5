"""Lanes: one queue per session, so a session's messages are handled strictly in order.

Sessions run concurrently (how many agents work at once is limited inside the turn, by
``gateway/turn/slots.py``, so that waiting for a slot does not cover delivering a reply). Within a
lane:

* messages typed within the debounce window become one turn;
* a message that is part of a group sent together (a Telegram album) holds the lane quiet for
  its ``linger`` time (``media.album_wait_ms``), so the rest of the group joins the same turn;
* a message arriving while the session's turn runs waits and is coalesced into
  the next turn (``busy: queue``), or cancels the running turn so the next one
  starts at once with everything pending (``busy: interrupt``);
* ``stop()`` cancels the running turn (``/stop``), or drops the messages still
  waiting out the debounce window;
* ``exclusive()`` holds an idle lane for work that rewrites the session
  (``/compress``): messages arriving meanwhile queue and run after it;
* ``abandon()`` cancels every lane at once (a replica that lost its claims in cluster mode).

An idle lane is dropped as soon as its queue is empty, so the lane map never
grows with the number of sessions ever seen.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Generic, Literal, TypeVar

import structlog

from gateway.tasks import TaskTracker

log = structlog.get_logger("gateway.lanes")

T = TypeVar("T")
BusyMode = Literal["queue", "interrupt"]
RunTurn = Callable[[str, list[T]], Awaitable[None]]
OnCancelled = Callable[[str, list[T]], Awaitable[None]]


@dataclass
class _Lane(Generic[T]):
    key: str
    pending: list[T] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    worker: asyncio.Task[None] | None = None
    turn: asyncio.Task[None] | None = None
    queued_at: float = 0.0
    """When the oldest message waiting in ``pending`` arrived (monotonic seconds)."""
    held: bool = False
    free: asyncio.Event = field(default_factory=asyncio.Event)


class Lanes(Generic[T]):
    def __init__(
        self,
        run_turn: RunTurn[T],
        tracker: TaskTracker,
        *,
        debounce: float = 0.0,
        max_debounce: float = 3.0,
        busy: BusyMode = "queue",
        on_cancelled: OnCancelled[T] | None = None,
        on_wait: Callable[[float], None] | None = None,
        linger: Callable[[T], float] | None = None,
    ) -> None:
        """``on_wait``: how long the oldest message of each turn waited in its lane (seconds): the
        debounce window, the session's running turn, a ``/compress`` holding the lane.
        ``linger``: the quiet time (seconds) a waiting item asks for before its turn starts, when longer
        than the debounce (an album's item waits for the album's rest); the wait is cut off after
        ``max_debounce`` plus that time."""
        self._run_turn = run_turn
        self._on_wait = on_wait
        self._on_cancelled = on_cancelled
        self._tracker = tracker
        self._debounce = debounce
        self._max_debounce = max_debounce
        self._linger = linger
        self._busy = busy
        self._lanes: dict[str, _Lane[T]] = {}

    def __len__(self) -> int:
        return len(self._lanes)

    def queued(self) -> int:
        return sum(len(lane.pending) for lane in self._lanes.values())

    def running(self) -> int:
        return sum(1 for lane in self._lanes.values() if lane.turn is not None and not lane.turn.done())

    def is_busy(self, key: str) -> bool:
        lane = self._lanes.get(key)
        return lane is not None and lane.turn is not None and not lane.turn.done()

    def idle(self, key: str) -> bool:
        """Nothing of ``key`` is here: no turn, no message waiting, no ``/compress`` holding it."""
        return key not in self._lanes

    async def abandon(self) -> int:
        """Cancel every lane at once, as a shutdown does: running turns stop and their messages, like those still
        waiting, stay unfinished for whoever routes them next; every lane is forgotten. How many there were."""
        lanes, self._lanes = list(self._lanes.values()), {}
        workers = [lane.worker for lane in lanes if lane.worker is not None]
        for worker in workers:
            worker.cancel()
        await asyncio.gather(*workers, return_exceptions=True)
        return len(lanes)

    def submit(self, key: str, item: T) -> None:
        """Queue ``item`` on its session's lane; the lane's worker runs it in order."""
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane(key=key)
        if not lane.pending:
            lane.queued_at = time.monotonic()
        lane.pending.append(item)
        lane.arrived.set()
        if lane.worker is None:
            lane.worker = self._tracker.spawn(self._work(lane), name=f"lane:{key}")
        elif self._busy == "interrupt" and lane.turn is not None and not lane.turn.done():
            log.info("lane.interrupt", session_key=key, pending=len(lane.pending))
            lane.turn.cancel()

    def stop(self, key: str) -> bool:
        """Cancel the running turn of ``key``, or drop the messages waiting to start one. True if either."""
        lane = self._lanes.get(key)
        if lane is None:
            return False
        if lane.turn is not None and not lane.turn.done():
            lane.turn.cancel()
            return True
        if not lane.pending:
            return False
        # Still in the debounce window (or held): the turn these would start is the one to stop.
        batch, lane.pending = lane.pending, []
        if self._on_cancelled is not None:
            self._tracker.spawn(self._on_cancelled(key, batch), name=f"stopped:{key}")
        return True

    @contextlib.asynccontextmanager
    async def exclusive(self, key: str) -> AsyncIterator[bool]:
        """Hold the lane of ``key`` while the block runs: no turn starts until it ends.

        Yields False, holding nothing, when a turn is running or the lane is held already.
        """
        lane = self._lanes.get(key)
        if lane is not None and (lane.held or (lane.turn is not None and not lane.turn.done())):
            yield False
            return
        if lane is None:
            lane = self._lanes[key] = _Lane(key=key)
        lane.held = True
        lane.free.clear()
        try:
            yield True
        finally:
            lane.held = False
            lane.free.set()
            if lane.worker is None and not lane.pending and self._lanes.get(key) is lane:
                del self._lanes[key]

    async def _work(self, lane: _Lane[T]) -> None:
        try:
            while lane.pending:
                await self._settle(lane)
                while lane.held:  # held again the moment it was freed (a second /compress): wait again
                    await lane.free.wait()
                if not lane.pending:
                    continue  # stopped before the turn began
                batch, lane.pending = lane.pending, []
                lane.arrived.clear()
                if self._on_wait is not None:
                    self._on_wait(time.monotonic() - lane.queued_at)
                lane.turn = asyncio.create_task(self._run_turn(lane.key, batch), name=f"turn:{lane.key}")
                try:
                    await lane.turn  # cancelling the worker cancels the turn it waits for
                except asyncio.CancelledError:
                    worker = asyncio.current_task()
                    if worker is not None and worker.cancelling():
                        # The lane worker itself is being cancelled (shutdown): the turn stops too,
                        # and its messages stay unfinished so the next start resumes them.
                        lane.turn.cancel()
                        await asyncio.gather(lane.turn, return_exceptions=True)
                        raise
                    # Stopped on purpose (/stop, or interrupted by a newer message).
                    if self._on_cancelled is not None:
                        await self._on_cancelled(lane.key, batch)
                except Exception as error:  # noqa: BLE001 - one failed turn must not stop the lane
                    log.error("lane.turn_failed", session_key=lane.key, error=str(error), exc_info=error)
                finally:
                    lane.turn = None
        finally:
            lane.worker = None
            if not lane.pending and not lane.held and self._lanes.get(lane.key) is lane:
                del self._lanes[lane.key]

    async def _settle(self, lane: _Lane[T]) -> None:
        """Wait until no new message arrived for the quiet time: ``debounce`` seconds, or longer while an
        item asks for it (``linger``); at most ``max_debounce`` plus the longest linger."""
        started = time.monotonic()
        while True:
            quiet = self._quiet(lane)
            if quiet <= 0:
                return
            lane.arrived.clear()
            lingering = quiet if quiet > self._debounce else 0.0
            remaining = started + self._max_debounce + lingering - time.monotonic()
            if remaining <= 0:
                return
            try:
                await asyncio.wait_for(lane.arrived.wait(), timeout=min(quiet, remaining))
            except TimeoutError:
                return

    def _quiet(self, lane: _Lane[T]) -> float:
        """How long the lane must stay quiet before its turn starts."""
        lingers = [self._linger(item) for item in lane.pending] if self._linger is not None else []
        return max([self._debounce, *lingers])

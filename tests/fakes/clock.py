"""A monotonic clock that moves only when the code under test sleeps: ``clock=`` and ``sleep=`` for
:class:`gateway.delivery.outbox.Delivery` and :class:`gateway.delivery.budget.ChatBudget`.

A pause does not wait: once every task has run as far as it can (a few turns of the event loop), the
clock jumps to the earliest pause's end and that sleeper wakes, then the next, so tasks sleeping at
the same time wake in the order of their ends, as with real time. Every pause is recorded
(``pauses``), so a test sees exactly how long the code would have waited.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools

_SETTLE = 20
"""Event-loop turns given to the running tasks before the clock jumps."""


class FakeTime:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.pauses: list[float] = []
        self._sleepers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._order = itertools.count()
        self._driver: asyncio.Task[None] | None = None

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.pauses.append(seconds)
        woken: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._sleepers, (self.now + max(0.0, seconds), next(self._order), woken))
        if self._driver is None or self._driver.done():
            self._driver = asyncio.create_task(self._drive())
        await woken

    async def _drive(self) -> None:
        while self._sleepers:
            for _ in range(_SETTLE):
                await asyncio.sleep(0)
            end, _, woken = heapq.heappop(self._sleepers)
            self.now = max(self.now, end)
            if not woken.done():  # a cancelled sleeper's future is done already
                woken.set_result(None)

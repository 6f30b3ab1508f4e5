"""Tracked background tasks: nothing is fired and forgotten.

Every task the gateway starts is held here until it ends, so shutdown can wait
for running work (bounded by the drain timeout) and cancel what is left.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from dataclasses import dataclass
from typing import Any

import structlog

log = structlog.get_logger("gateway.tasks")


@dataclass(frozen=True, slots=True)
class DrainResult:
    finished: int
    cancelled: int


class TaskTracker:
    def __init__(self) -> None:
        self._tasks: set[asyncio.Task[Any]] = set()

    def spawn(self, coro: Coroutine[Any, Any, Any], *, name: str) -> asyncio.Task[Any]:
        task = asyncio.create_task(coro, name=name)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        return task

    def _finished(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            log.error("task.failed", task=task.get_name(), exc_info=task.exception())

    def __len__(self) -> int:
        return len(self._tasks)

    async def drain(self, timeout: float) -> DrainResult:
        """Wait up to ``timeout`` seconds for running tasks, then cancel the rest and wait for them."""
        pending = set(self._tasks)
        if not pending:
            return DrainResult(0, 0)
        done, still_running = await asyncio.wait(pending, timeout=timeout)
        for task in still_running:
            task.cancel()
        if still_running:
            await asyncio.wait(still_running)
        return DrainResult(finished=len(done), cancelled=len(still_running))

"""Agent slots: at most ``sessions.max_concurrent_turns`` agents work at the same time.

A turn holds a slot while its agent works (a compaction before the turn, the model calls and
the tools between them), which is what the limit is for: the model provider's rate limits and
bill, and the machine's share of tool work. It does not hold one while it waits for the
database or while its reply is delivered: a chat that the platform has rate-limited for a
minute must not keep other conversations from being answered, and a turn waiting for a commit
leaves the model idle.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager


class AgentSlots(AbstractAsyncContextManager[None]):
    """``async with slots:`` around an agent's work; ``on_wait`` gets how long each entry waited (seconds)."""

    __slots__ = ("_on_wait", "_semaphore")

    def __init__(self, limit: int, *, on_wait: Callable[[float], None] | None = None) -> None:
        if limit < 1:
            raise ValueError(f"at least one agent slot is needed, got {limit}")
        self._semaphore = asyncio.Semaphore(limit)
        self._on_wait = on_wait

    async def __aenter__(self) -> None:
        if self._on_wait is None:
            await self._semaphore.acquire()
            return
        started = time.monotonic()
        await self._semaphore.acquire()
        self._on_wait(time.monotonic() - started)

    async def __aexit__(self, *exc: object) -> None:
        self._semaphore.release()

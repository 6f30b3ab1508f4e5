"""STAND-IN for i27-budget's per-chat rate budget (branch i27-budget owns this file: take theirs on merge).

The same interface as the common note of issue 27 fixes, with the least behaviour the streamed
reply needs to run: each chat's calls spaced by its rate's interval (``Adapter.chat_rate``), a
platform's 429 held for its ``retry_after``, and the stream interval per platform. It counts
only what the stream takes (``Delivery`` does not call it in this branch).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping

from adapters.contract import Adapter


class ChatBudget:
    def __init__(
        self,
        adapters: Mapping[str, Adapter],
        *,
        intervals: Mapping[str, float] = {},  # noqa: B006 - read only
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        self._adapters = adapters
        self._intervals = dict(intervals)
        self._clock = clock
        self._sleep = sleep
        self._next: dict[tuple[str, str], float] = {}

    async def take(self, platform: str, chat_id: str) -> None:
        """Wait until one more call fits the chat's rate and any hold, then count it."""
        while (delay := self.available_in(platform, chat_id)) > 0:
            await self._sleep(delay)
        self._next[(platform, chat_id)] = self._clock() + self._adapters[platform].chat_rate(chat_id).interval

    def available_in(self, platform: str, chat_id: str) -> float:
        """Seconds until :meth:`take` would not wait (0.0: now)."""
        return max(0.0, self._next.get((platform, chat_id), 0.0) - self._clock())

    def hold(self, platform: str, chat_id: str, seconds: float) -> None:
        """The platform answered 429 with ``retry_after``: nothing more to the chat before then."""
        key = (platform, chat_id)
        self._next[key] = max(self._next.get(key, 0.0), self._clock() + seconds)

    def stream_interval(self, platform: str) -> float:
        """The configured or the adapter's least number of seconds between two updates of a streamed message."""
        configured = self._intervals.get(platform)
        return configured if configured is not None else self._adapters[platform].capabilities.rates.stream_interval

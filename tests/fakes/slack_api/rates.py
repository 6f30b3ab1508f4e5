"""The fake Slack's per-channel rate limits, answered like Slack: HTTP 429 ``ratelimited`` with ``Retry-After``.

Off by default (``FakeSlack.rates.enabled``), so tests that post quickly stay as
they were; a test or the benchmark turns them on. The numbers are the ones the
Slack adapter's ``Capabilities.rates`` promise to keep:

* posts, updates and the start and stop of a stream (chat.postMessage, chat.update,
  chat.startStream, chat.stopStream) share one budget per channel: 1 a second;
* chat.appendStream (Tier 4) has its own: 2 a second per channel.

A refused call is not counted against the budget; it is counted in
:attr:`ChannelRates.refused` (what the benchmark reports as 429s received).

Calls are timed when they arrive. A client spacing its calls by the published rate on its side
sees them arrive a little closer together when the network or its event loop was slow for one
of them; ``grace`` (seconds, 0.2 like the Telegram and Discord emulators) forgives that much: a
call is refused only when it arrives more than ``grace`` before the window lets it in.
"""

from __future__ import annotations

import math
import time
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Limit:
    count: int
    per: float


BUDGETS: Final = {
    "chat.postMessage": "write", "chat.update": "write", "chat.startStream": "write", "chat.stopStream": "write",
    "chat.appendStream": "append",
}  # fmt: skip
"""Which budget a method spends; methods not named here are not limited."""


@dataclass(frozen=True)
class Refusal:
    method: str
    channel: str
    retry_after: int
    at: float


class ChannelRates:
    def __init__(self, clock: Callable[[], float] = time.monotonic, *, grace: float = 0.2) -> None:
        self.enabled = False
        self.clock = clock
        self.grace = grace
        self.limits: dict[str, Limit] = {"write": Limit(1, 1.0), "append": Limit(2, 1.0)}
        self.refused: list[Refusal] = []
        self._calls: dict[tuple[str, str], deque[float]] = defaultdict(deque)
        """(budget, channel) -> clock times of the calls inside the window."""

    @property
    def rate_limited(self) -> int:
        """How many calls were answered 429."""
        return len(self.refused)

    def admit(self, method: str, channel: str) -> int | None:
        """Count the call and return None when it fits; otherwise the Retry-After seconds (whole, at least 1)."""
        budget = BUDGETS.get(method)
        if not self.enabled or budget is None or not channel:
            return None
        limit = self.limits[budget]
        now = self.clock()
        calls = self._calls[(budget, channel)]
        while calls and calls[0] <= now - limit.per:
            calls.popleft()
        free_at = calls[len(calls) - limit.count] + limit.per if len(calls) >= limit.count else now
        if free_at - now <= self.grace:
            calls.append(now)
            return None
        retry_after = max(1, math.ceil(free_at - now))
        self.refused.append(Refusal(method, channel, retry_after, now))
        return retry_after

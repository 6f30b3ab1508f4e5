"""The fake Slack's per-channel rate limits, answered like Slack: HTTP 429 ``ratelimited`` with ``Retry-After``.

Off by default (``FakeSlack.rates.enabled``), so tests that post quickly stay as
they were; a test or the benchmark turns them on. The numbers are the ones the
Slack adapter's ``Capabilities.rates`` promise to keep:

* posts, updates and the start and stop of a stream (chat.postMessage, chat.update,
  chat.startStream, chat.stopStream) share one budget per channel: 1 a second;
* chat.appendStream (Tier 4) has its own: 2 a second per channel.

A refused call is not counted against the budget; it is counted in
:attr:`ChannelRates.refused` (what the benchmark reports as 429s received).
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
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.enabled = False
        self.clock = clock
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
        if len(calls) < limit.count:
            calls.append(now)
            return None
        retry_after = max(1, math.ceil(calls[0] + limit.per - now))
        self.refused.append(Refusal(method, channel, retry_after, now))
        return retry_after

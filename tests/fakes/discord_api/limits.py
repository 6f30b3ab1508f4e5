"""Discord's per-channel rate limit on creating and editing messages, with the headers Discord sends.

Discord lets a bot create or edit 5 messages per 5 seconds in one channel (a
thread and a DM are channels of their own). It counts in windows: the first
call after a window ended opens a new one of 5 seconds, and every answer says
how much of it is left (``X-RateLimit-Limit``, ``-Remaining``, ``-Reset`` in Unix
seconds, ``-Reset-After`` in seconds, ``-Bucket``), from which discord.py paces
itself: with nothing remaining it waits for the reset before the next call. A
call beyond the limit gets 429 with ``retry_after`` and ``global: false`` in the
body, a ``Retry-After`` header and the ``Via`` header of Discord's front end
(without it discord.py takes a 429 for a Cloudflare ban and gives up).

Calls are timed on arrival; ``grace`` seconds of arrival jitter are forgiven
(a call arriving that little before its window ended opens the next one), so
a client that spaces calls by the published rate on its side is not refused
because one of them was delayed on the way.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

LIMIT = 5
PER = 5.0
BUCKET = "emulator-channel-messages"
"""One bucket for creates and edits: the gateway budgets them together, and so does this emulator."""


@dataclass(slots=True)
class _Window:
    opened: float
    used: int = 0


@dataclass(frozen=True, slots=True)
class Verdict:
    allowed: bool
    headers: dict[str, str]
    retry_after: float = 0.0

    def refusal(self) -> dict[str, object]:
        """The JSON body of the 429 answer."""
        return {"message": "You are being rate limited.", "retry_after": self.retry_after, "global": False}


class ChannelLimits:
    def __init__(self, *, grace: float = 0.2) -> None:
        self.grace = grace
        self._windows: dict[str, _Window] = {}

    def take(self, channel_id: str, now: float | None = None) -> Verdict:
        """Count one create or edit in ``channel_id`` (at monotonic ``now``) if the window has room."""
        now = time.monotonic() if now is None else now
        window = self._windows.get(channel_id)
        if window is None or now >= window.opened + PER - (self.grace if window.used >= LIMIT else 0.0):
            window = self._windows[channel_id] = _Window(now)
        reset_after = _up_to_ms(window.opened + PER - now)
        if window.used >= LIMIT:
            headers = self._headers(0, reset_after) | {
                "Retry-After": str(max(1, math.ceil(reset_after))), "Via": "1.1 google", "X-RateLimit-Scope": "user",
            }  # fmt: skip
            return Verdict(False, headers, reset_after)
        window.used += 1
        return Verdict(True, self._headers(LIMIT - window.used, reset_after))

    @staticmethod
    def _headers(remaining: int, reset_after: float) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(LIMIT), "X-RateLimit-Remaining": str(remaining),
            "X-RateLimit-Reset": f"{time.time() + reset_after:.3f}", "X-RateLimit-Reset-After": f"{reset_after:.3f}",
            "X-RateLimit-Bucket": BUCKET,
        }  # fmt: skip


def _up_to_ms(seconds: float) -> float:
    """Seconds rounded up to the millisecond: a client that waits exactly this long is never early."""
    return max(0.0, math.ceil(seconds * 1000) / 1000)

"""Back-off after the summary model fails, so a broken model is not called every turn."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

__all__ = ["Cooldown"]

MAX_COOLDOWN_S: Final = 900.0


class Cooldown:
    """A back-off that doubles with each consecutive failure, up to 15 minutes.

    >>> cooldown = Cooldown(clock, base_s=60)
    >>> cooldown.start()   # 60.0, then 120.0, 240.0 ... 900.0
    >>> cooldown.active()  # True until the period has passed
    >>> cooldown.clear()   # after a success: no back-off, streak forgotten
    """

    def __init__(self, clock: Callable[[], float], *, base_s: float = 60.0, max_s: float = MAX_COOLDOWN_S) -> None:
        self._clock = clock
        self._base_s = base_s
        self._max_s = max(max_s, base_s)
        self._until: float | None = None
        self._failures = 0

    @property
    def failures(self) -> int:
        """Consecutive failures since the last success."""
        return self._failures

    def remaining(self) -> float:
        """Seconds until the back-off ends (0 when not cooling down)."""
        if self._until is None:
            return 0.0
        return max(0.0, self._until - self._clock())

    def active(self) -> bool:
        """Whether the summary model should be left alone for now."""
        return self.remaining() > 0.0

    def start(self) -> float:
        """Record a failure and start the next, longer back-off; returns its length in seconds."""
        seconds = min(self._base_s * 2.0**self._failures, self._max_s)
        self._failures += 1
        self._until = self._clock() + seconds
        return seconds

    def clear(self) -> None:
        """Record a success: the back-off ends and the streak resets."""
        self._until = None
        self._failures = 0

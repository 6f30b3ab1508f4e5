"""When SQLite says "busy" or "locked": how long to wait, and how often to try again.

SQLite's own busy handler (``busy_timeout``) is kept short because it sleeps
inside the connection's thread, cannot be cancelled and logs nothing. Past it,
the writer backs off in the event loop: exponential delays with jitter, each
retry logged, a bounded number of attempts, then a clear ``WriteFailedError``.
While it waits, new writes keep queueing and join the next attempt.
"""

from __future__ import annotations

import random
import sqlite3
from dataclasses import dataclass
from typing import Final

from tenacity import RetryCallState, wait_exponential

__all__ = ["DEFAULT_RETRY", "RetryPolicy", "is_busy"]

_SQLITE_BUSY: Final = 5
_SQLITE_LOCKED: Final = 6


def is_busy(error: BaseException) -> bool:
    """True for SQLITE_BUSY / SQLITE_LOCKED (and their extended codes): worth retrying."""
    if not isinstance(error, sqlite3.OperationalError):
        return False
    code = getattr(error, "sqlite_errorcode", None)
    if code is not None:
        return code & 0xFF in (_SQLITE_BUSY, _SQLITE_LOCKED)
    text = str(error).lower()
    return "locked" in text or "busy" in text


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """``RetryPolicy(attempts=15, first_delay=0.01, max_delay=1.0)``: about 9 s in all."""

    attempts: int = 15
    """Tries in total, the first one included."""
    first_delay: float = 0.01
    """Seconds before the second try; doubled for each further one."""
    max_delay: float = 1.0
    """The ceiling of a single delay."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a retry policy needs at least one attempt")
        if self.first_delay < 0 or self.max_delay < self.first_delay:
            raise ValueError("retry delays must satisfy 0 <= first_delay <= max_delay")

    def delay(self, failed_attempts: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after ``failed_attempts`` failures: half fixed, half random."""
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # the formula reads the attempt only
        state.attempt_number = failed_attempts
        ceiling = wait_exponential(multiplier=self.first_delay, max=self.max_delay)(state)
        draw = (rng or random).random()
        return ceiling / 2 + draw * ceiling / 2


DEFAULT_RETRY: Final = RetryPolicy()

"""How long a storage engine waits before trying again, and how often: one policy for every engine.

SQLite uses it while another process holds the database (``storage/engine/retry.py``), PostgreSQL
while transactions conflict or the server cannot be reached (``storage/postgres/retry.py``): the
same exponential delays with jitter, the same ceiling, the same number of attempts.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Final

from tenacity import RetryCallState, wait_exponential

__all__ = ["DEFAULT_RETRY", "RetryPolicy"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RetryPolicy:
    """``RetryPolicy(attempts=15, first_delay=0.01, max_delay=1.0, outage=120.0)``: about 9 s of retries for a
    busy database, up to two minutes of waiting for a database server that went away."""

    attempts: int = 15
    """Tries in total, the first one included."""
    first_delay: float = 0.01
    """Seconds before the second try; doubled for each further one."""
    max_delay: float = 1.0
    """The ceiling of a single delay."""
    outage: float = 120.0
    """Seconds to keep trying while a database server cannot be reached (an engine without a server, like
    SQLite, never meets that); the attempts above do not count these tries."""

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise ValueError("a retry policy needs at least one attempt")
        if self.first_delay < 0 or self.max_delay < self.first_delay:
            raise ValueError("retry delays must satisfy 0 <= first_delay <= max_delay")
        if self.outage < 0:
            raise ValueError("a retry policy's outage must be 0 or more seconds")

    def delay(self, failed_attempts: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after ``failed_attempts`` failures: half fixed, half random."""
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # the formula reads the attempt only
        state.attempt_number = failed_attempts
        ceiling = wait_exponential(multiplier=self.first_delay, max=self.max_delay)(state)
        draw = (rng or random).random()
        return ceiling / 2 + draw * ceiling / 2


DEFAULT_RETRY: Final = RetryPolicy()

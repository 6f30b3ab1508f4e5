"""When SQLite says "busy" or "locked": how long to wait, and how often to try again.

SQLite's own busy handler (``busy_timeout``) is kept short because it sleeps
inside the connection's thread, cannot be cancelled and logs nothing. Past it,
the writer backs off in the event loop: exponential delays with jitter, each
retry logged, a bounded number of attempts, then a clear ``WriteFailedError``.
While it waits, new writes keep queueing and join the next attempt.

The policy (``RetryPolicy``: attempts, delays, their ceiling) is shared with the PostgreSQL engine and
lives in ``storage/retry_policy.py``; what is SQLite's own here is knowing which errors mean "busy".
"""

from __future__ import annotations

import sqlite3
from typing import Final

from storage.retry_policy import DEFAULT_RETRY, RetryPolicy

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

"""What a failed PostgreSQL transaction met, and whether running it again can cure it.

``trouble_of(error)`` sorts an error raised while a transaction ran through asyncpg:

* ``Trouble.CONFLICT``: the server rolled the transaction back to keep transactions apart
  (SQLSTATE 40001 serialization_failure, 40P01 deadlock_detected). Run again at once, it lands;
* ``Trouble.SERVER_AWAY``: the server cannot be reached or let go of the connection (class 08
  connection exceptions, 57P01-57P03 shutdown / crash / starting up, a refused or reset socket,
  asyncpg's "connection is closed", and asyncpg's ``InternalClientError`` about a connection still in the
  middle of an operation the lost server never finished). Worth waiting for while it comes back;
* None: anything else (a constraint the data broke, bad SQL, our own code's errors). Trying again
  would fail the same way, so it is not retried.
"""

from __future__ import annotations

import enum

import asyncpg

__all__ = ["Trouble", "reason_of", "trouble_of"]


class Trouble(enum.Enum):
    """Why a transaction failed, when trying it again can help."""

    CONFLICT = "conflict"
    SERVER_AWAY = "server_away"


_CONFLICTS = {
    "40001": "the transaction conflicted with a concurrent one (serialization failure)",
    "40P01": "the transaction deadlocked with a concurrent one",
}
_SHUTDOWNS = {
    "57P01": "the server is shutting down or ended the connection (admin shutdown)",
    "57P02": "the server crashed and is restarting",
    "57P03": "the server is starting up and takes no connections yet",
}
_CLOSED_WORDS = ("connection is closed", "connection was closed", "closed in the middle of operation")


def trouble_of(error: BaseException) -> Trouble | None:
    """The :class:`Trouble` behind ``error`` (or the error it was raised from); None when retrying cannot help."""
    return _sorted(error)[0]


def reason_of(error: BaseException) -> str:
    """What ``error`` means, in an operator's words (for the retry log and the final error)."""
    return _sorted(error)[1]


def _sorted(error: BaseException) -> tuple[Trouble | None, str]:
    seen: BaseException | None = error
    while seen is not None:
        state = getattr(seen, "sqlstate", None) if isinstance(seen, asyncpg.PostgresError) else None
        if state in _CONFLICTS:
            return Trouble.CONFLICT, _CONFLICTS[state]
        if state in _SHUTDOWNS:
            return Trouble.SERVER_AWAY, _SHUTDOWNS[state]
        if isinstance(state, str) and state.startswith("08"):
            return Trouble.SERVER_AWAY, f"the connection to the server was lost ({seen})"
        if isinstance(seen, asyncpg.InterfaceError) and any(word in str(seen) for word in _CLOSED_WORDS):
            return Trouble.SERVER_AWAY, f"the connection to the server was lost ({seen})"
        if isinstance(seen, asyncpg.InternalClientError):  # a pooled connection left mid-operation when the server went
            return Trouble.SERVER_AWAY, f"a connection was left unusable by the lost server ({seen})"
        if isinstance(seen, OSError):  # refused, reset, unreachable; TimeoutError connecting
            return Trouble.SERVER_AWAY, f"the server cannot be reached ({type(seen).__name__}: {seen})"
        seen = seen.__cause__
    return None, str(error) or type(error).__name__

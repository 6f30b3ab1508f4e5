"""Running one PostgreSQL transaction until it lands: ``await run_with_retry(operation, policy=..., log=log)``.

``operation`` is an async callable that runs one whole transaction (it takes a connection from the
pool, opens the transaction, commits it); on failure it is run again from the start, never resumed
half way. The numbers come from the policy both engines share (``storage/retry_policy.py``):

* a conflict (serialization failure, deadlock: ``storage/postgres/faults.py``) is tried again after
  the policy's short delay with jitter, up to ``policy.attempts`` tries in all;
* while the server is away (connection lost, refused, shut down) each try waits the policy's delay,
  growing to ``policy.max_delay``, for up to ``policy.outage`` seconds; every wait is logged as
  ``storage.retrying`` with the reason and the delay, and ``storage.reconnected`` says when the
  server answered again and how long it was away;
* anything else is not retried: it is raised at once as ``WriteFailedError`` (``ReadFailedError`` for
  ``read=True``) carrying the driver's error, whose message names the constraint or the SQL at fault.
  The store's own errors (``StorageError``) raised by the operation pass through unchanged.

A connection lost while ``COMMIT`` was on its way leaves unknown whether the transaction landed, and
retrying it runs it again: operations must be idempotent (keys the database enforces, ``ON CONFLICT``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from storage.errors import ReadFailedError, StorageError, WriteFailedError
from storage.postgres.faults import Trouble, reason_of, trouble_of
from storage.retry_policy import RetryPolicy

__all__ = ["run_with_retry"]

T = TypeVar("T")


async def run_with_retry(
    operation: Callable[[], Awaitable[T]], *, policy: RetryPolicy, log: Any, what: str = "transaction",
    read: bool = False,
) -> T:  # fmt: skip
    """``await operation()`` until it lands; see the module's docstring for what is retried and for how long."""
    attempt = conflicts = outages = 0
    away_since: float | None = None
    while True:
        attempt += 1
        try:
            result = await operation()
        except StorageError:
            raise
        except (asyncpg.PostgresError, asyncpg.InterfaceError, asyncpg.InternalClientError, OSError) as error:
            trouble, reason = trouble_of(error), reason_of(error)
            if trouble is Trouble.CONFLICT:
                conflicts += 1
                if conflicts >= policy.attempts:
                    raise _failed(error, attempt, read) from error
                delay = policy.delay(conflicts)
                log.info("storage.retrying", what=what, trouble=trouble.value, reason=reason, attempt=attempt,
                         delay_ms=round(delay * 1000, 1))  # fmt: skip
            elif trouble is Trouble.SERVER_AWAY:
                outages += 1
                now = time.monotonic()
                away_since = now if away_since is None else away_since
                waited = now - away_since
                if waited >= policy.outage:
                    raise _failed(error, attempt, read) from error
                delay = min(policy.delay(outages), policy.outage - waited)
                log.warning("storage.retrying", what=what, trouble=trouble.value, reason=reason, attempt=attempt,
                            delay_ms=round(delay * 1000, 1), away_s=round(waited, 1),
                            gives_up_in_s=round(policy.outage - waited, 1))  # fmt: skip
            else:
                raise _failed(error, attempt, read) from error
            await asyncio.sleep(delay)
            continue
        if away_since is not None:
            log.warning("storage.reconnected", what=what, attempts=attempt,
                        away_s=round(time.monotonic() - away_since, 1))  # fmt: skip
        return result


def _failed(error: BaseException, attempts: int, read: bool) -> StorageError:
    if read:
        return ReadFailedError(error)  # type: ignore[arg-type]  # carries any driver's error
    return WriteFailedError(error, attempts=attempts)  # type: ignore[arg-type]

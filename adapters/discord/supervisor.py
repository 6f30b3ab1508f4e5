"""Keeping one Discord connection alive without ever taking the rest of the gateway down.

Three layers, each taking over when the one below gives up:

1. discord.py resumes a dropped session by itself, and identifies afresh when
   Discord says the session cannot be resumed;
2. when the client's run ends with an error anyway (its login failed, a close
   code it does not retry), the supervisor builds a new client after an
   exponential backoff with jitter (1 s doubling to 5 min, reset once a
   connection has held for a while);
3. a failure no retry can fix (a bad token, a disallowed privileged intent) stops
   the supervisor: the adapter reports FAILED with what to change, and nothing loops.

:meth:`Supervisor.restart` replaces the client on request (the gateway's liveness probe found
the connection deaf): the current one is closed and a new one logs in and identifies at once,
without the backoff, since nothing failed.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable
from dataclasses import dataclass

import discord
import structlog
from tenacity import RetryCallState, wait_exponential

from adapters.discord.preflight import unrecoverable

log = structlog.get_logger(__name__)


@dataclass(frozen=True, slots=True)
class Backoff:
    first: float = 1.0
    limit: float = 300.0
    stable_after: float = 120.0
    """A connection that held this long resets the delay to ``first``."""

    def delay(self, attempt: int) -> float:
        """Full jitter: a random wait up to the doubled delay, so restarts of many bots do not line up."""
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # the formula reads the attempt only
        state.attempt_number = max(attempt, 1)
        ceiling = wait_exponential(multiplier=self.first, max=self.limit)(state)
        return random.uniform(ceiling / 2, ceiling)


class Supervisor:
    def __init__(
        self,
        *,
        token: str,
        build_client: Callable[[], discord.Client],
        on_trouble: Callable[[str], None],
        on_fatal: Callable[[str], None],
        backoff: Backoff = Backoff(),
    ) -> None:
        self._token = token
        self._build_client = build_client
        self._on_trouble = on_trouble
        self._on_fatal = on_fatal
        self._backoff = backoff
        self.client: discord.Client | None = None
        self.fatal: str | None = None
        self._task: asyncio.Task[None] | None = None
        self._stopping = False
        self._wake = asyncio.Event()
        """Set by stop() and restart(): ends a backoff wait at once."""
        self._restart_reason: str | None = None
        self._closing_tasks: set[asyncio.Task[None]] = set()
        self._connected_at: float | None = None
        self._first_outcome: asyncio.Future[None] | None = None
        self.restarts = 0

    async def start(self, wait: float) -> None:
        """Run the connection in the background; return once it connected, failed for good, or ``wait`` passed.

        A transient failure of the first attempt does not fail the start: the supervisor keeps trying and the
        adapter reports DEGRADED meanwhile, so a Discord outage at boot heals without restarting Switchboard.
        """
        loop = asyncio.get_running_loop()
        self._stopping, self.fatal = False, None  # a supervisor stopped before may start again
        self._wake.clear()
        self._first_outcome = loop.create_future()
        self._task = asyncio.create_task(self._run(), name="discord.supervisor")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(self._first_outcome), wait)

    def connected(self) -> None:
        self._connected_at = asyncio.get_running_loop().time()
        self._settle_start()

    def restart(self, reason: str) -> None:
        """Close the current client and build a new one without delay (the close runs in the background)."""
        if self._stopping or self.fatal is not None or self._task is None:
            return
        self._restart_reason = reason
        self._wake.set()
        client = self.client
        if client is not None and not client.is_closed():
            closing = asyncio.create_task(client.close(), name="discord.restart")
            self._closing_tasks.add(closing)
            closing.add_done_callback(self._closing_tasks.discard)

    async def stop(self) -> None:
        self._stopping = True
        self._wake.set()
        client = self.client
        if client is not None:
            with contextlib.suppress(Exception):
                await client.close()
        if self._task is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._task), 10.0)
            if not self._task.done():
                self._task.cancel()
                await asyncio.gather(self._task, return_exceptions=True)

    async def _run(self) -> None:
        attempt = 0
        while not self._stopping:
            self._restart_reason = None  # a restart asked for while no client ran: this new one is it
            error = await self._one_client()
            if self._stopping:
                return
            requested, self._restart_reason = self._restart_reason, None
            if requested is not None:
                self.restarts += 1
                log.warning("discord.restarting", reason=requested, on_request=True)
                self._wake.clear()
                continue
            fatal = unrecoverable(error)
            if fatal is not None:
                self.fatal = fatal
                log.error("discord.failed", error=type(error).__name__, detail=fatal, retrying=False)
                self._on_fatal(fatal)
                self._settle_start()
                return
            attempt = 1 if self._held_long_enough() else attempt + 1
            delay = self._backoff.delay(attempt)
            reason = "the connection ended" if error is None else f"{type(error).__name__}: {error}"
            self.restarts += 1
            log.warning("discord.restarting", reason=reason, attempt=attempt, delay_s=round(delay, 2))
            self._on_trouble(f"{reason}; reconnecting in {delay:.0f} s (attempt {attempt})")
            self._settle_start()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), delay)  # a stop or restart during the wait ends it at once
            self._wake.clear()

    async def _one_client(self) -> BaseException | None:
        """Run one client from login to its end; the error it ended with, if any."""
        self._connected_at = None
        client = self._build_client()
        self.client = client
        try:
            await client.start(self._token, reconnect=True)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - every end of a client is classified and handled in _run
            return error
        finally:
            with contextlib.suppress(Exception):
                await client.close()
        return None

    def _held_long_enough(self) -> bool:
        if self._connected_at is None:
            return False
        return asyncio.get_running_loop().time() - self._connected_at >= self._backoff.stable_after

    def _settle_start(self) -> None:
        if self._first_outcome is not None and not self._first_outcome.done():
            self._first_outcome.set_result(None)

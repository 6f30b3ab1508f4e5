"""The liveness monitor: noticing a platform connection that claims to be up but hears nothing.

Every ``liveness.check_every`` seconds the monitor looks at each adapter. One that claims to be
up (running, or degraded after a probe of ours failed) and has received nothing for
``liveness.idle_probe_after`` seconds, and was not probed for as long, is asked to probe its
connection (``Adapter.probe_liveness``, given the most recently active chats with an open
session), within ``liveness.probe_timeout`` seconds: a probe that takes longer failed.

A failed probe is logged (``adapter.probe_failed``) and the adapter is asked to reconnect
through its own supervision (``Adapter.reconnect``; one that cannot is logged and probed again
later); once it runs again, the gateway catches up on what the deaf connection missed
(``gateway/inbound/catch_up.py``). A gap the adapter reports itself starts a catch-up at once.

The monitor also keeps, for /health and /metrics, each adapter's last probe and the time a
message last came from each chat the config lists (the allowed chats), counted from the
gateway's start while none did.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import structlog

from adapters.contract import Adapter, AdapterError, AdapterState, CatchUpPoint, InboundMessage, Liveness
from config.liveness import LivenessConfig
from gateway.operations.metrics import Metrics

log = structlog.get_logger("gateway.liveness")

__all__ = ["PROBE_POINTS", "LivenessMonitor", "ProbeRecord"]

PROBE_POINTS: Final = 10
"""The most chats a probe is given to look at (the most recently active): a probe is a few cheap calls."""

Points = Callable[[str, int], Awaitable[Sequence[CatchUpPoint]]]
"""The chats of a platform with an open session, at most so many (``CatchUp.points``)."""
CatchUpRequest = Callable[[str, str], None]
"""Starts a catch-up of a platform, with the reason (``CatchUp.request``)."""


@dataclass(frozen=True, slots=True)
class ProbeRecord:
    """One probe's outcome, as /health shows it."""

    at: float
    """When the probe ended."""
    ok: bool
    detail: str
    latency: float | None = None

    def to_dict(self) -> dict[str, Any]:
        latency = None if self.latency is None else round(self.latency, 3)
        return {"at": round(self.at, 1), "ok": self.ok, "detail": self.detail, "latency": latency}


class LivenessMonitor:
    def __init__(
        self,
        adapters: Sequence[Adapter],
        settings: LivenessConfig,
        metrics: Metrics,
        *,
        points: Points,
        catch_up: CatchUpRequest,
        watched_chats: Mapping[str, Collection[str]],
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``watched_chats``: platform -> the chats the config lists for it (shown in /health and /metrics).
        ``clock``: the wall clock, the one adapters date their last inbound message with."""
        self._adapters = list(adapters)
        self._settings = settings
        self._metrics = metrics
        self._points = points
        self._catch_up = catch_up
        self._watched = {platform: tuple(sorted(chats)) for platform, chats in watched_chats.items() if chats}
        self._clock = clock
        self._started_at = clock()
        self._probes: dict[str, ProbeRecord] = {}
        self._heard: dict[tuple[str, str], float] = {}
        self._reconnected: set[str] = set()
        """Platforms asked to reconnect after a failed probe, to catch up on once they run again."""
        self._task: asyncio.Task[None] | None = None
        metrics.adapter_state.set_function(self._states)
        metrics.seconds_since_inbound.set_function(self._quiet_adapters)
        metrics.chat_seconds_since_inbound.set_function(self._quiet_chats)
        metrics.probe_at.set_function(lambda: {(p,): r.at for p, r in self._probes.items()})
        metrics.probe_ok.set_function(lambda: {(p,): float(r.ok) for p, r in self._probes.items()})

    # --- what the gateway tells it ------------------------------------------------------------------
    def heard(self, message: InboundMessage) -> None:
        """A message came from ``message``'s chat (live, or read back after a reconnect: dated by when it was sent)."""
        key = (message.platform, message.chat_id)
        at = min(message.timestamp, self._clock())
        if at > self._heard.get(key, 0.0):
            self._heard[key] = at

    def gap(self, platform: str, reason: str) -> None:
        """An adapter's ``on_gap``: its connection was rebuilt in a way that may have lost events."""
        log.info("adapter.gap", platform=platform, reason=reason)
        self._reconnected.discard(platform)  # this catch-up covers the one a reconnect of ours was waiting for
        self._catch_up(platform, reason)

    def start(self) -> None:
        self._started_at = self._clock()
        if self._settings.enabled and self._task is None:
            self._task = asyncio.create_task(self._watch(), name="liveness")

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    # --- the loop ------------------------------------------------------------------------------
    async def _watch(self) -> None:
        while True:
            await asyncio.sleep(self._settings.check_every)
            try:
                await self.check()
            except Exception as error:  # noqa: BLE001 - the monitor outlives a bug in one look
                log.error("liveness.check_failed", error=str(error), exc_info=error)

    async def check(self) -> None:
        """One look at every adapter (probes of several adapters run side by side)."""
        await asyncio.gather(*(self._look(adapter) for adapter in self._adapters))

    async def _look(self, adapter: Adapter) -> None:
        platform = adapter.platform
        status = adapter.status()
        if status.state is AdapterState.RUNNING and platform in self._reconnected:
            self._reconnected.discard(platform)
            self._catch_up(platform, "reconnected after a failed liveness probe")
        last = self._probes.get(platform)
        claims_up = status.state is AdapterState.RUNNING or (
            status.state is AdapterState.DEGRADED and last is not None and not last.ok
        )
        quiet_since = max(status.last_inbound_at or self._started_at, last.at if last else self._started_at)
        if claims_up and self._clock() - quiet_since >= self._settings.idle_probe_after:
            await self.probe(adapter)

    async def probe(self, adapter: Adapter) -> ProbeRecord:
        """Probe ``adapter`` now and act on a failure (see the module's docstring)."""
        platform = adapter.platform
        timeout = self._settings.probe_timeout
        try:
            points = await self._points(platform, PROBE_POINTS)
        except Exception as error:  # noqa: BLE001 - the database failing is no fault of the connection
            log.warning("adapter.probe_points_unread", platform=platform, error=str(error)[:300])
            points = []
        try:
            async with asyncio.timeout(timeout):
                found = await adapter.probe_liveness(points)
        except TimeoutError:
            found = Liveness(False, f"the probe got no answer within {timeout:g} s")
        except Exception as error:  # noqa: BLE001 - a probe that raises failed (the contract says it should not)
            log.warning("adapter.probe_raised", platform=platform, error=str(error)[:300], exc_info=error)
            found = Liveness(False, f"the probe raised {type(error).__name__}: {error}"[:300])
        # Dated when it ended: the quiet period starts again then, so a probe slower than idle_probe_after is not
        # followed at once by another that tears down the reconnect this one just asked for.
        record = ProbeRecord(self._clock(), found.ok, found.detail, found.latency)
        self._probes[platform] = record
        self._metrics.probes.inc(platform, "ok" if found.ok else "failed")
        if found.ok:
            log.info("adapter.probe_ok", platform=platform, detail=found.detail, latency=record.to_dict()["latency"])
            return record
        log.warning("adapter.probe_failed", platform=platform, detail=found.detail, missed=found.missed,
                    latency=record.to_dict()["latency"], hint="reconnecting; what was missed is caught up after")  # fmt: skip
        await self._reconnect(adapter, f"liveness probe failed: {found.detail}")
        return record

    async def _reconnect(self, adapter: Adapter, reason: str) -> None:
        platform = adapter.platform
        self._metrics.reconnects.inc(platform)
        self._reconnected.add(platform)
        try:
            async with asyncio.timeout(self._settings.probe_timeout):
                await adapter.reconnect(reason)
        except AdapterError as error:
            log.warning("adapter.reconnect_failed", platform=platform, error=str(error),
                        hint="the connection is probed again while it stays quiet; restart the gateway if it stays deaf")  # fmt: skip
        except Exception as error:  # noqa: BLE001 - the monitor goes on watching the others
            log.error("adapter.reconnect_failed", platform=platform, error=str(error)[:300], exc_info=error)
        else:
            log.info("adapter.reconnecting", platform=platform, reason=reason)

    # --- what it shows -------------------------------------------------------------------------
    def last_probe(self, platform: str) -> ProbeRecord | None:
        return self._probes.get(platform)

    def health(self, platform: str, now: float) -> dict[str, Any]:
        """What /health adds to an adapter's entry: its last probe, and the listed chats' quiet time."""
        last = self._probes.get(platform)
        return {
            "probe": None if last is None else last.to_dict(),
            "chats": {chat: round(now - self._chat_heard_at(platform, chat), 1) for chat in self._watched.get(platform, ())},
        }

    def _chat_heard_at(self, platform: str, chat: str) -> float:
        return self._heard.get((platform, chat), self._started_at)

    def _states(self) -> dict[tuple[str, ...], float]:
        states = {adapter.platform: adapter.status().state for adapter in self._adapters}
        return {(platform, state.value): float(state is now) for platform, now in states.items() for state in AdapterState}

    def _quiet_adapters(self) -> dict[tuple[str, ...], float]:
        now = self._clock()
        return {(a.platform,): now - (a.status().last_inbound_at or self._started_at) for a in self._adapters}

    def _quiet_chats(self) -> dict[tuple[str, ...], float]:
        now = self._clock()
        return {
            (platform, chat): now - self._chat_heard_at(platform, chat)
            for platform, chats in self._watched.items()
            for chat in chats
        }

"""This process as one replica of several on one database: its incarnation, its heartbeat, its signals and scans.

The other parts of the cluster (connection leases, session claims, outbox claims) hang off a :class:`Replica`:

* ``alive()`` / ``check()``: whether this process can still vouch for its incarnation, on its own monotonic
  clock: the send time of the last heartbeat the server accepted, plus ``expire_after``, minus a margin.
  The server's expiry is later than that (it counts from when the statement ran), so a replica never acts
  on ownership the server already gave away; one frozen past its expiry (SIGSTOP, a stalled VM) finds
  ``alive()`` False the moment it runs again, whichever of its tasks runs first.
* heartbeats every ``heartbeat_every`` seconds; a refused one (the incarnation expired) or a local expiry runs
  the ``on_expired`` handlers (drop what is held) and joins again under a new incarnation (``on_joined``).
* signals (LISTEN/NOTIFY) dispatched by ``kind`` to the handlers registered with ``on_signal``; a signal
  addressed ``to`` another incarnation is dropped here.
* every ``scan_every`` seconds while alive: reap the replicas that expired, then run the ``on_scan`` handlers
  (the work nobody does: a dead replica's conversations, free leases, free outbox chunks).
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from config.cluster import ClusterConfig
from gateway.operations.metrics import Metrics
from storage import ClusterStorage, ReplicaExpiredError

log = structlog.get_logger("gateway.cluster")

Handler = Callable[[], Awaitable[None]]
SignalHandler = Callable[[dict[str, Any]], Awaitable[None] | None]


def default_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class Replica:
    def __init__(
        self,
        storage: ClusterStorage,
        settings: ClusterConfig,
        metrics: Metrics,
        *,
        version: str,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._storage = storage
        self._settings = settings
        self._metrics = metrics
        self._version = version
        self._monotonic = monotonic
        self.name = settings.replica_id or default_name()
        self.id = ""
        """The current incarnation (``{name}/{random}``); empty before :meth:`start`."""
        self._valid_until = 0.0
        self._margin = min(settings.heartbeat_every / 2, settings.expire_after / 4)
        self._signals: dict[str, list[SignalHandler]] = {}
        self._scans: list[Handler] = []
        self._expired: list[Handler] = []
        self._joined: list[Handler] = []
        self._reports: dict[str, Callable[[], Any]] = {}
        self._listener: Any = None
        self._tasks: list[asyncio.Task[None]] = []
        self._rejoining = asyncio.Lock()
        self._stopping = False
        self.expiries = 0
        """How many incarnations of this process expired (it missed its heartbeats)."""

    # -- registration --------------------------------------------------------------------------

    def on_signal(self, kind: str, handler: SignalHandler) -> None:
        self._signals.setdefault(kind, []).append(handler)

    def on_scan(self, handler: Handler) -> None:
        self._scans.append(handler)

    def on_expired(self, handler: Handler) -> None:
        self._expired.append(handler)

    def on_joined(self, handler: Handler) -> None:
        self._joined.append(handler)

    def report(self, key: str, provider: Callable[[], Any]) -> None:
        """``provider()`` (JSON-able) goes into this replica's ``info`` at every heartbeat."""
        self._reports[key] = provider

    # -- state ---------------------------------------------------------------------------------

    def alive(self) -> bool:
        return bool(self.id) and self._monotonic() < self._valid_until

    def check(self) -> None:
        if not self.alive():
            raise ReplicaExpiredError(self.id or self.name)

    @property
    def storage(self) -> ClusterStorage:
        return self._storage

    # -- life ----------------------------------------------------------------------------------

    async def start(self) -> None:
        await self._join()
        self._listener = await self._storage.listen(self._received)
        self._tasks = [
            asyncio.create_task(self._beat_forever(), name="cluster-heartbeat"),
            asyncio.create_task(self._scan_forever(), name="cluster-scan"),
        ]
        await self._run(self._joined, "cluster.joined_handler_failed")

    async def halt(self) -> None:
        """Stop beating, scanning and listening without leaving: to the others this replica dies, and its work moves
        once its expiry passes (what a crash looks like; tests use it)."""
        self._stopping = True
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._listener is not None:
            await self._listener.close()
            self._listener = None

    async def stop(self) -> None:
        """Stop beating and scanning, and leave: whatever this replica holds falls free for the others at once."""
        await self.halt()
        if self.alive():
            try:
                await asyncio.wait_for(self._storage.leave(), timeout=10)
                log.info("cluster.left", replica=self.id)
            except Exception as error:  # noqa: BLE001 - the others take over after the expiry instead
                log.warning("cluster.leave_failed", replica=self.id, error=str(error),
                            hint=f"the other replicas take over in {self._settings.expire_after:g} s instead")  # fmt: skip

    async def _join(self) -> None:
        started = self._monotonic()
        record = await self._storage.join(
            self.name, host=socket.gethostname(), pid=os.getpid(), version=self._version,
            expire_after=self._settings.expire_after,
        )  # fmt: skip
        self.id = record.id
        self._valid_until = started + self._settings.expire_after - self._margin
        log.info("cluster.joined", replica=self.id, expire_after=self._settings.expire_after,
                 heartbeat_every=self._settings.heartbeat_every)  # fmt: skip

    async def _beat_forever(self) -> None:
        while True:
            await asyncio.sleep(max(0.0, min(self._settings.heartbeat_every, self._valid_until - self._monotonic())))
            if not self.alive():
                await self._expire("its heartbeats stopped reaching the database in time")
                continue
            sent = self._monotonic()
            try:
                info = self._info()
                expiry = await asyncio.wait_for(
                    self._storage.beat(self._settings.expire_after, info), timeout=max(0.1, self._valid_until - sent)
                )  # fmt: skip
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the next beat tries again; the expiry decides
                log.warning("cluster.heartbeat_failed", replica=self.id, error=str(error) or type(error).__name__,
                            expires_in=round(self._valid_until - self._monotonic(), 1))  # fmt: skip
                continue
            if expiry is None:
                await self._expire("the database says it expired (it was paused or cut off)")
            elif self.id:
                self._valid_until = sent + self._settings.expire_after - self._margin

    def _info(self) -> dict[str, Any]:
        """What the parts report for the heartbeat; one that fails is left out (the beat itself must go)."""
        info: dict[str, Any] = {}
        for key, provider in self._reports.items():
            try:
                info[key] = provider()
            except Exception as error:  # noqa: BLE001 - a report is a nicety; a missed beat loses the replica's work
                log.warning("cluster.report_failed", key=key, error=str(error))
        return info

    async def _expire(self, reason: str) -> None:
        """The incarnation is dead: drop what it held, then join again (until the database answers)."""
        async with self._rejoining:
            if self.alive() or self._stopping:
                return
            old, self.id = self.id, ""
            self.expiries += 1
            log.warning("cluster.expired", replica=old, reason=reason,
                        hint="its leases, conversations and unsent replies go to the other replicas")  # fmt: skip
            await self._run(self._expired, "cluster.expired_handler_failed")
            pause = 0.5
            while not self._stopping:
                try:
                    await self._join()
                    break
                except asyncio.CancelledError:
                    raise
                except Exception as error:  # noqa: BLE001 - keep trying until the database answers
                    log.warning("cluster.join_failed", error=str(error), retry_in=pause)
                    await asyncio.sleep(pause)
                    pause = min(pause * 2, 5.0)
            await self._run(self._joined, "cluster.joined_handler_failed")

    async def _scan_forever(self) -> None:
        while True:
            await asyncio.sleep(self._settings.scan_every)
            if not self.alive():
                continue
            try:
                reaped = await self._storage.reap()
                if reaped:
                    self._metrics.cluster_reaped.inc(amount=len(reaped))
                    log.warning("cluster.reaped", replicas=reaped, by=self.id,
                                hint="they missed their heartbeats; their work is taken over")  # fmt: skip
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the next scan tries again
                log.warning("cluster.reap_failed", error=str(error))
            await self._run(self._scans, "cluster.scan_failed")

    async def _run(self, handlers: list[Handler], event: str) -> None:
        for handler in list(handlers):
            try:
                await handler()
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - one part failing must not stop the others
                log.error(event, error=str(error), exc_info=error)

    # -- signals -------------------------------------------------------------------------------

    async def signal(self, kind: str, to: str | None = None, **fields: Any) -> None:
        await self._storage.notify({"kind": kind, "to": to, "from": self.id, **fields})

    def _received(self, payload: dict[str, Any]) -> Awaitable[None] | None:
        to = payload.get("to")
        if to is not None and to != self.id:
            return None
        handlers = self._signals.get(str(payload.get("kind")), [])
        if not handlers:
            return None
        return self._dispatch(handlers, payload)

    @staticmethod
    async def _dispatch(handlers: list[SignalHandler], payload: dict[str, Any]) -> None:
        for handler in handlers:
            result = handler(payload)
            if result is not None:
                await result

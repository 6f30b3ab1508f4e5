"""Connection leases: in cluster mode, one replica at a time receives on each connection only one may hold.

Every replica starts every adapter for sending (replies go out from the replica that works on the
conversation). An adapter whose receiving takes a connection the platform lets one client hold
(``Adapter.receiving_lease``: Telegram long polling, the Discord gateway, Slack Socket Mode) starts
without it, and :class:`ConnectionLeases` keeps one :class:`OwnedConnection` per such adapter:

* it tries to take the lease (``ClusterStorage.lease_acquire``) at start, at every scan of the replica
  (``Replica.on_scan``) and at once when another replica let one go (a ``released`` signal); holding
  it, the adapter receives (``start_receiving``) with an :class:`~adapters.contract.Ownership` whose
  ``held()`` is true only while the replica is alive by its own clock and the lease is not known lost;
* the lease lives as long as the replica's incarnation (its heartbeat renews it; nothing renews a lease
  on its own); each scan asks the server whether it is still held (``lease_held``), and the replica's
  expiry (``Replica.on_expired``) stops receiving at once;
* a graceful stop stops receiving (Telegram confirms and records its offset) and releases the lease, so
  another replica takes the connection over at once instead of after the expiry.

Logged: ``cluster.lease_acquired`` (with the fence, and ``takeover`` when the previous holder died
instead of letting go, with the seconds from its expiry to the takeover), ``cluster.lease_lost`` and
``cluster.lease_released``. Takeovers are counted in ``switchboard_cluster_lease_takeovers_total``.
HTTP ingress (webhooks, Slack's HTTP mode) needs no lease: it runs on every replica, unchanged.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import Any, Protocol

import structlog

from adapters.contract import Adapter, Ownership
from gateway.operations.metrics import Metrics
from storage.cluster import ClusterStorage, LeaseRecord
from storage.errors import StorageError

log = structlog.get_logger(__name__)


class ReplicaView(Protocol):
    """What the leases need of ``gateway.cluster.replica.Replica``."""

    @property
    def id(self) -> str: ...

    def alive(self) -> bool: ...

    def on_scan(self, handler: Any) -> None: ...

    def on_expired(self, handler: Any) -> None: ...

    def on_signal(self, kind: str, handler: Any) -> None: ...


class OwnedConnection:
    """One adapter's receiving connection and the lease that lets this replica hold it."""

    def __init__(self, adapter: Adapter, lease: str, storage: ClusterStorage, replica: ReplicaView,
                 metrics: Metrics) -> None:  # fmt: skip
        self.adapter = adapter
        self.lease = lease
        self._storage = storage
        self._replica = replica
        self._metrics = metrics
        self.fence: int | None = None
        """The fence this replica holds the lease with; None while another holds it (or nobody)."""
        self._held_since: float | None = None
        self._seen: LeaseRecord | None = None
        """The lease as last read while this replica did not hold it."""
        self._other_holder: LeaseRecord | None = None
        """The lease as last read while another replica held it (to tell a takeover from a release)."""
        self._lock = asyncio.Lock()

    def held(self) -> bool:
        return self.fence is not None

    def _ownership_held(self, fence: int) -> bool:
        return self.fence == fence and self._replica.alive()

    def observe(self, record: LeaseRecord | None) -> None:
        if self.fence is not None or record is None:
            return
        self._seen = record
        if record.holder is not None and record.holder != self._replica.id:
            self._other_holder = record

    async def try_acquire(self) -> None:
        """Take the lease if it is free (or its holder died); verify it when held. Never raises."""
        async with self._lock:
            try:
                if self.fence is not None:
                    if not await self._storage.lease_held(self.lease, self.fence):
                        await self._lose("the server says another replica holds it now")
                    return
                if not self._replica.alive():
                    return
                record = await self._storage.lease_acquire(self.lease)
                if record is None:
                    return
                await self._acquired(record)
            except StorageError as error:
                log.warning("cluster.lease_check_failed", lease=self.lease, error=str(error),
                            hint="tried again at the next scan")  # fmt: skip

    async def _acquired(self, record: LeaseRecord) -> None:
        # The takeover count grows when a holder that did not let go is replaced (whether counted at its reap or
        # at this acquisition): compared with the lease as read while that holder still had it.
        before = self._other_holder or self._seen
        takeover = before is not None and record.takeovers > before.takeovers
        fence = record.fence
        self.fence, self._held_since = fence, time.monotonic()
        self._seen = self._other_holder = None
        previous = before.holder if before is not None else None
        details: dict[str, Any] = {"lease": self.lease, "fence": fence, "takeover": takeover, "previous_holder": previous}
        if takeover:
            self._metrics.cluster_lease_takeovers.inc(self.adapter.platform)
            expired_at = before.holder_expires_at if before is not None else None
            if expired_at is not None and record.acquired_at is not None:  # both on the server's clock
                details["unowned_after_expiry_s"] = round(max(record.acquired_at - expired_at, 0.0), 2)
        log.info("cluster.lease_acquired", **details)
        ownership = Ownership(
            lease=self.lease, fence=fence, held=lambda: self._ownership_held(fence), progress=record.progress,
            record=lambda progress: self._record(fence, progress),
        )  # fmt: skip
        try:
            await self.adapter.start_receiving(ownership)
        except Exception as error:  # noqa: BLE001 - let another replica try: release what cannot be used here
            log.error("cluster.receiving_failed", lease=self.lease, fence=fence, error=str(error), exc_info=error)
            await self._release()

    async def _record(self, fence: int, progress: str) -> bool:
        if not self._ownership_held(fence):
            return False
        try:
            recorded = await self._storage.lease_progress(self.lease, fence, progress)
        except StorageError as error:  # the offset is recorded again after the next batch
            log.warning("cluster.lease_progress_failed", lease=self.lease, fence=fence, error=str(error))
            return True
        if not recorded:
            self._lose_soon("recording its progress was refused: another replica holds it now")
        return recorded

    def _lose_soon(self, reason: str) -> None:
        asyncio.get_running_loop().create_task(self._locked_lose(reason), name=f"lease-lost-{self.lease}")

    async def _locked_lose(self, reason: str) -> None:
        async with self._lock:
            await self._lose(reason)

    async def _lose(self, reason: str) -> None:
        """Stop receiving at once: the lease is no longer ours (the replica expired, or it moved on)."""
        if self.fence is None:
            return
        fence, self.fence = self.fence, None
        held_for = None if self._held_since is None else round(time.monotonic() - self._held_since, 1)
        log.warning("cluster.lease_lost", lease=self.lease, fence=fence, reason=reason, held_s=held_for,
                    hint="this replica stops receiving on the connection; another one holds it")  # fmt: skip
        await self._stop_receiving()

    async def expired(self) -> None:
        async with self._lock:
            await self._lose("this replica's registration expired (it missed its heartbeats)")

    async def release(self) -> None:
        """Stop receiving, then let go of the lease so another replica takes it at once (a graceful stop)."""
        async with self._lock:
            await self._release()

    async def _release(self) -> None:
        if self.fence is None:
            return
        fence = self.fence
        await self._stop_receiving()  # while the lease still holds: Telegram confirms and records its offset
        self.fence = None
        try:
            released = await self._storage.lease_release(self.lease, fence)
        except StorageError as error:
            log.warning("cluster.lease_release_failed", lease=self.lease, fence=fence, error=str(error),
                        hint="another replica takes the connection over once this one's registration expires")  # fmt: skip
            return
        log.info("cluster.lease_released", lease=self.lease, fence=fence, released=released)

    async def _stop_receiving(self) -> None:
        try:
            await self.adapter.stop_receiving()
        except Exception as error:  # noqa: BLE001 - logged; the fence keeps a stale receiver from handing over
            log.error("cluster.stop_receiving_failed", lease=self.lease, error=str(error), exc_info=error)


class ConnectionLeases:
    """The owned connections of one replica (see the module docstring)."""

    def __init__(self, storage: ClusterStorage, adapters: Sequence[Adapter], metrics: Metrics) -> None:
        self._storage = storage
        self._metrics = metrics
        self._leased = [(adapter, lease) for adapter in adapters if (lease := adapter.receiving_lease()) is not None]
        self.connections: list[OwnedConnection] = []
        self._stopping = False

    def owned(self, adapter: Adapter) -> bool:
        """Whether ``adapter`` starts without receiving (its receiving connection is leased)."""
        return any(leased is adapter for leased, _ in self._leased)

    def held(self) -> list[str]:
        """The leases this replica holds now (for /health)."""
        return [connection.lease for connection in self.connections if connection.held()]

    async def start(self, replica: ReplicaView) -> None:
        """Take whatever connection is free, once ``replica`` joined and the adapters started for sending."""
        self.connections = [OwnedConnection(adapter, lease, self._storage, replica, self._metrics)
                            for adapter, lease in self._leased]  # fmt: skip
        replica.on_scan(self.scan)
        replica.on_expired(self.expired)
        replica.on_signal("released", self._released)
        await self.scan()

    async def scan(self) -> None:
        """Look at every lease: take the free ones, check the held ones."""
        if self._stopping or not self.connections:
            return
        await self._observe()
        for connection in self.connections:
            await connection.try_acquire()

    async def _observe(self) -> None:
        try:
            records = {record.name: record for record in await self._storage.leases()}
        except StorageError as error:
            log.warning("cluster.leases_unread", error=str(error))
            return
        for connection in self.connections:
            connection.observe(records.get(connection.lease))

    async def _released(self, payload: dict[str, Any]) -> None:
        leases = payload.get("leases")
        for connection in self.connections:
            named = not isinstance(leases, list) or connection.lease in leases
            if named and not connection.held() and not self._stopping:
                await connection.try_acquire()

    async def expired(self) -> None:
        for connection in self.connections:
            await connection.expired()

    async def stop(self) -> None:
        """Stop receiving and release every lease held (before the replica leaves)."""
        self._stopping = True
        for connection in self.connections:
            await connection.release()

"""The cluster as an operator sees it: who runs, what each holds, what each works on.

One read of the shared state (``storage/cluster.py``: replicas, leases, session claims, and the server's
clock to measure ages against) makes a :class:`ClusterView`. ``/health`` shows it from one replica's side
(:meth:`ClusterView.health`: this replica, what it holds, the others); ``switchboard cluster status``
prints all of it (``gateway/operations/cli/cluster.py``). Ages are measured on the database server's
clock, as expiries are, never by comparing two machines' clocks.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import structlog
from pydantic import BaseModel

from storage.cluster import ClaimRecord, ClusterStorage, LeaseRecord, ReplicaRecord

if TYPE_CHECKING:
    from gateway.cluster.replica import Replica
    from gateway.operations.metrics import Metrics

log = structlog.get_logger("gateway.cluster")

__all__ = ["SEEN_WITHIN", "ClusterHealth", "ClusterView", "read_view"]

SEEN_WITHIN: Final = 60.0
"""Seconds: the replicas shown are those that beat within the last minute (the dead ones not reaped yet included)."""
READ_TIMEOUT: Final = 2.0
"""Seconds /health waits for the cluster's state (as for the database probe) before it reports it unread."""
CLAIMS_READ: Final = 100_000
"""Session claims read at most for one view; more are counted as this many (``claims_complete`` says so)."""


@dataclass(frozen=True, slots=True)
class ClusterView:
    replicas: list[ReplicaRecord]
    leases: list[LeaseRecord]
    claims: list[ClaimRecord]
    now: float
    """The database server's clock when the view was read."""
    claims_complete: bool = True
    """False when there were more claims than :data:`CLAIMS_READ` (the counts are then lower bounds)."""

    @property
    def alive(self) -> int:
        """Replicas whose expiry is still ahead."""
        return sum(replica.alive for replica in self.replicas)

    def claimed_by(self) -> Counter[str]:
        """How many sessions each incarnation claims."""
        return Counter(claim.holder for claim in self.claims)

    def leases_of(self, incarnation: str) -> list[LeaseRecord]:
        return [lease for lease in self.leases if lease.holder == incarnation]

    def replica(self, incarnation: str | None) -> ReplicaRecord | None:
        return next((r for r in self.replicas if r.id == incarnation), None)

    def since(self, moment: float | None) -> float | None:
        """Seconds from ``moment`` (the server's clock) to this view."""
        return None if moment is None else round(max(0.0, self.now - moment), 1)

    def health(self, me: Replica) -> dict[str, Any]:
        """The ``cluster`` entry of /health, from ``me``'s side (:func:`expired` says when it counts as expired)."""
        mine = self.replica(me.id)
        entry = me_entry(me, expired=expired(me) or (bool(me.id) and (mine is None or not mine.alive)))
        entry |= {
            "leases": [{"name": lease.name, "fence": lease.fence, "since_s": self.since(lease.acquired_at)}
                       for lease in self.leases_of(me.id)] if me.id else [],  # fmt: skip
            "sessions_claimed": self.claimed_by()[me.id] if me.id else 0,
            "replicas_alive": self.alive,
            "replicas": [self._replica_entry(replica) for replica in self.replicas],
        }
        if not self.claims_complete:
            entry["sessions_claimed_at_least"] = True
        return entry

    def _replica_entry(self, replica: ReplicaRecord) -> dict[str, Any]:
        return {
            "name": replica.name,
            "id": replica.id,
            "host": replica.host,
            "pid": replica.pid,
            "version": replica.version,
            "alive": replica.alive,
            "seen_s_ago": self.since(replica.seen_at),
            "leases": [lease.name for lease in self.leases_of(replica.id)],
        }


def expired(me: Replica) -> bool:
    """Whether ``me`` missed its heartbeats: its incarnation ran out by its own clock, or it lost one and has not
    joined again yet (a replica that has not joined for the first time is starting, not expired)."""
    return not me.alive() and (bool(me.id) or me.expiries > 0)


def me_entry(me: Replica, *, expired: bool) -> dict[str, Any]:
    """What /health says of ``me`` itself; an expired replica's ``detail`` says what that means."""
    entry: dict[str, Any] = {"enabled": True, "replica": me.name, "incarnation": me.id or None, "expired": expired,
                             "expiries": me.expiries}  # fmt: skip
    if expired:
        entry["detail"] = (
            f"replica {me.name} expired: it missed its heartbeats (a pause, an overloaded machine or a lost database "
            "connection), so the other replicas may have taken its connections and conversations over; it dropped "
            "its work and joins again under a new incarnation"
        )
    elif not me.id:
        entry["detail"] = f"replica {me.name} is joining the cluster"
    return entry


async def read_view(
    storage: ClusterStorage, *, seen_within: float = SEEN_WITHIN, claims: int = CLAIMS_READ
) -> ClusterView:
    """Read the cluster's state (four reads, run together); the storage's errors pass through."""
    replicas, leases, claimed, now = await asyncio.gather(
        storage.replicas(seen_within=seen_within), storage.leases(), storage.claims(limit=claims + 1),
        storage.server_time(),
    )  # fmt: skip
    return ClusterView(list(replicas), list(leases), list(claimed[:claims]), now, claims_complete=len(claimed) <= claims)


class ClusterHealth:
    """The ``cluster`` entry of /health for this replica, from a fresh view read on every /health request, and the
    ``switchboard_cluster_replicas`` gauge, set then and at every scan of the replica (:meth:`refresh`)."""

    def __init__(
        self, me: Replica, metrics: Metrics, *, timeout: float = READ_TIMEOUT,
        on_count: Callable[[int], None] = lambda alive: None,
    ) -> None:  # fmt: skip
        """``on_count``: told how many replicas are alive after every fresh view (the send budget shares by it)."""
        self._me = me
        self._metrics = metrics
        self._timeout = timeout
        self._on_count = on_count
        me.on_scan(self.refresh)

    async def _view(self) -> ClusterView:
        view = await asyncio.wait_for(read_view(self._me.storage), timeout=self._timeout)
        self._counted(view.alive)
        return view

    def _counted(self, alive: int) -> None:
        self._metrics.cluster_replicas.value = alive
        self._on_count(alive)

    async def refresh(self) -> None:
        """Set the gauge of replicas alive (and tell ``on_count``) from the replicas alone: every scan runs this, and
        the leases and claims a whole view reads are for /health (a failed read leaves the count as it was)."""
        try:
            replicas = await asyncio.wait_for(self._me.storage.replicas(seen_within=SEEN_WITHIN), timeout=self._timeout)
        except Exception as error:  # noqa: BLE001 - the next scan tries again
            log.warning("cluster.view_unread", error=str(error) or type(error).__name__)
            return
        self._counted(sum(replica.alive for replica in replicas))

    async def entry(self) -> dict[str, Any]:
        """The /health entry; a view that cannot be read is reported (the database entry says why the server fails)."""
        try:
            view = await self._view()
        except Exception as error:  # noqa: BLE001 - /health reports the failure instead of raising
            reason = str(error) or type(error).__name__
            return me_entry(self._me, expired=expired(self._me)) | {
                "error": f"the cluster's state could not be read: {reason}"[:300]
            }
        return view.health(self._me)


def config_fingerprint(settings: BaseModel) -> str:
    """A short digest of the configuration as loaded (secrets masked, the replica's own name left out): replicas that
    show different ones run different configurations, which ``switchboard cluster status`` points out."""
    shown = settings.model_dump(mode="json", exclude={"cluster": {"replica_id"}})
    return hashlib.sha256(json.dumps(shown, sort_keys=True).encode()).hexdigest()[:12]

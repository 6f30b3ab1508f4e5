"""What several gateway processes (replicas) on one database share: who is alive, who owns what.

Only the PostgreSQL engine offers it (``PostgresStore.cluster``); a SQLite file has one gateway.
``cluster_of(store)`` is the door: the engine's :class:`ClusterStorage`, or None.

The model (``storage/postgres/cluster.py`` has the SQL):

* **A replica** is one running gateway process, registered under an *incarnation id*
  (``{name}/{random}``) with an expiry on the server's clock (``expires_at``). It renews the
  expiry with :meth:`ClusterStorage.beat` every few seconds. A replica whose expiry passed is dead
  for good: :meth:`beat` refuses to renew it (it must :meth:`join` again under a new incarnation),
  and any replica may *reap* it (:meth:`reap`), which deletes its row and with it, in the same
  statement, everything it held: its session claims go, its leases and outbox chunks fall free.
* **A lease** names one long-lived platform connection (``telegram:poll:<bot id>``,
  ``discord:gateway:<app id>``, ``slack:socket:<app id>``). It is held by one live replica at a time;
  each acquisition draws a new *fence* (a number that only grows, across the whole database).
  Writes that depend on the lease (:meth:`lease_progress`, the Telegram offset) carry the fence
  and are refused once the lease moved on.
* **A session claim** gives one replica the right to route and run a session's inbox events
  (one turn of a session at a time in the whole cluster, in arrival order). It lasts while its
  holder lives, until the holder releases it.
* **Outbox chunks** are claimed by the replica that sends them (``claimed_by``, PostgreSQL
  migration 2); a dead replica's chunks fall free when it is reaped.
* **Fenced writes:** the engine's ``finish_turn`` and ``outbox_mark_sent`` check, in their own
  transaction, that this process's incarnation is alive (a row lock a :meth:`reap` passes over until the commit),
  once :meth:`join` told the store who it is; they raise :class:`ReplicaExpiredError` otherwise.
* **Signals** (LISTEN/NOTIFY): :meth:`notify` sends a small JSON object to every replica
  listening (:meth:`listen`); nothing is guaranteed to arrive (a replica that was away misses
  it), so every signal is a hint that a periodic scan backs up.

Times in records are seconds since the epoch on the database server's clock; expiry decisions are
made by the server (``now()``), never by comparing the clocks of two machines.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from storage.errors import StorageError

__all__ = [
    "ClaimRecord",
    "ClusterStorage",
    "LeaseRecord",
    "Listener",
    "ReplicaExpiredError",
    "ReplicaRecord",
    "cluster_of",
]


class ReplicaExpiredError(StorageError):
    """A write of a replica whose incarnation expired (it was paused or cut off past its expiry, and may
    have been reaped): refused, because another replica may have taken its work over."""

    def __init__(self, replica: str) -> None:
        super().__init__(
            f"replica {replica} expired (it missed its heartbeats) and may not write any more: it joins again "
            "under a new incarnation, and its unfinished work is done by whichever replica claims it"
        )
        self.replica = replica


@dataclass(frozen=True, slots=True)
class ReplicaRecord:
    id: str
    """The incarnation id (``{name}/{random}``)."""
    name: str
    """The configured ``cluster.replica_id`` (by default ``{host}-{pid}``)."""
    host: str
    pid: int
    version: str
    started_at: float
    seen_at: float
    expires_at: float
    alive: bool
    """Its expiry is still ahead on the server's clock."""
    info: dict[str, Any] = field(default_factory=dict)
    """What the replica last said about itself at :meth:`ClusterStorage.beat` (leases it holds, turns running...)."""


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    name: str
    holder: str | None
    """The holding incarnation; None when free (released, or its holder was reaped)."""
    fence: int
    acquired_at: float | None
    takeovers: int
    """How many times the lease moved from a replica that did not release it (it died or expired)."""
    progress: str | None
    """What the holder recorded with the fence (the Telegram offset), for the next holder."""
    holder_expires_at: float | None = None


@dataclass(frozen=True, slots=True)
class ClaimRecord:
    session_key: str
    holder: str
    fence: int
    claimed_at: float


class Listener(Protocol):
    async def close(self) -> None: ...


@runtime_checkable
class ClusterStorage(Protocol):
    """The shared state of the replicas on one database (see the module docstring for the model)."""

    # -- replicas ------------------------------------------------------------------------------

    async def join(self, name: str, *, host: str, pid: int, version: str, expire_after: float) -> ReplicaRecord:
        """Register a new incarnation of ``name`` alive for ``expire_after`` seconds; the store's fenced writes
        carry it from now on. Returns its record (``id`` is the incarnation id)."""
        ...

    async def beat(self, expire_after: float, info: dict[str, Any] | None = None) -> float | None:
        """Renew this process's incarnation for ``expire_after`` seconds (and store ``info``); the new expiry on
        the server's clock, or None when it had expired already (or was reaped): dead for good, join again."""
        ...

    async def leave(self) -> None:
        """A clean stop: release every lease and claim and delete this incarnation, so others take over at once
        (one transaction; a ``released`` signal goes out)."""
        ...

    async def reap(self) -> list[str]:
        """Delete the replicas whose expiry passed (whatever they held falls free with them); their ids."""
        ...

    async def replicas(self, *, seen_within: float = 60.0) -> list[ReplicaRecord]:
        """The replicas that beat within ``seen_within`` seconds (dead ones not reaped yet included)."""
        ...

    # -- leases --------------------------------------------------------------------------------

    async def lease_acquire(self, name: str) -> LeaseRecord | None:
        """Take ``name`` for this incarnation when it is free, held by a replica that expired, or ours already
        (then it is returned unchanged). A new holder draws a new fence. None when a live replica holds it."""
        ...

    async def lease_release(self, name: str, fence: int) -> bool:
        """Let go of ``name`` if this incarnation still holds it with ``fence`` (a ``released`` signal goes out)."""
        ...

    async def lease_held(self, name: str, fence: int) -> bool:
        """Whether this live incarnation still holds ``name`` with ``fence`` (asks the server)."""
        ...

    async def lease_progress(self, name: str, fence: int, progress: str) -> bool:
        """Record ``progress`` with the lease, only while this live incarnation holds it with ``fence``."""
        ...

    async def leases(self) -> list[LeaseRecord]:
        """Every lease, with its holder's expiry."""
        ...

    # -- session claims ------------------------------------------------------------------------

    async def claim_session(self, session_key: str) -> ClaimRecord | None:
        """Claim ``session_key`` for this incarnation: free, or held by a replica that expired (reaped here), or
        ours already (returned unchanged). None when a live replica holds it."""
        ...

    async def release_session(self, session_key: str, fence: int) -> bool:
        """Let go of a claim, only if this incarnation still holds it with ``fence`` and the session has no
        unfinished inbox event left (False otherwise: keep it and route what is left)."""
        ...

    async def claim_holder(self, session_key: str) -> ClaimRecord | None:
        """Who holds ``session_key`` now (a dead holder not reaped yet included)."""
        ...

    async def claims(self, *, limit: int = 1000) -> list[ClaimRecord]:
        ...

    async def unclaimed_sessions(self, *, limit: int = 100) -> list[str]:
        """Session keys with unfinished inbox events and no claim (oldest event first): work nobody does."""
        ...

    async def unfinished_of(self, session_key: str) -> list[Any]:
        """The unfinished inbox events of ``session_key`` in arrival order (``InboxRecord``s)."""
        ...

    async def chunks_elsewhere(self, platform: str, chat_id: str) -> bool:
        """Whether the chat has pending outbox chunks this incarnation does not hold: another replica's (being sent,
        or a dead one's not reaped yet), or free ones (another replica may be taking them now)."""
        ...

    # -- signals -------------------------------------------------------------------------------

    async def notify(self, payload: dict[str, Any]) -> None:
        """Send ``payload`` (JSON, under 7,000 bytes) to every listening replica, this one included."""
        ...

    async def listen(self, on_signal: Callable[[dict[str, Any]], Awaitable[None] | None]) -> Listener:
        """Call ``on_signal`` with each signal on a connection of its own (reconnected after a server restart,
        signals sent meanwhile are lost); ``close()`` the listener to stop."""
        ...

    async def server_time(self) -> float:
        """The database server's clock (seconds since the epoch)."""
        ...


def cluster_of(store: object) -> ClusterStorage | None:
    """The engine's cluster state, or None for an engine that runs one gateway (SQLite)."""
    cluster = getattr(store, "cluster", None)
    return cluster if isinstance(cluster, ClusterStorage) else None

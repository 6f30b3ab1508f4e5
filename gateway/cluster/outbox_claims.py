"""A replica's part of the outbox when several gateways share one database: what a dead replica left is sent here.

The rows themselves say who sends them (``storage/postgres/outbox_claims.py``): each replica sends
the chunks it queued, and a replica that dies leaves its chunks free when another reaps it. After
every scan (``Replica.on_scan``, every ``cluster.scan_every`` seconds, right after the reaping)
this replica runs :meth:`Delivery.resume`, which takes the free chunks (whole chats at a time, no
chat split between two replicas) and sends them in order, each chat on its own task, with the
same bookkeeping as after a restart: a chunk the dead replica may have sent already goes with
``maybe_sent`` (the Slack adapter looks for it by its nonce first) and its platform message id is
recorded. Failover thus waits for the reap, not for ``gateway.undelivered_retry_every``. A chat whose
chunk was deferred here (the platform kept refusing it, or asked for a long wait) is not tried at every
scan: ``Delivery.retry_stalled`` tries it when its time comes, and its new replies wait behind it.

When this replica expires (``Replica.on_expired``) its resumes under way stop (``Delivery.forget_claims``):
the chunks they hold fall to another replica with the reap, and must not go out twice.
"""

from __future__ import annotations

from gateway.cluster.replica import Replica
from gateway.delivery.outbox import Delivery, Spawn

__all__ = ["pick_up_left_chunks"]


def pick_up_left_chunks(replica: Replica, delivery: Delivery, spawn: Spawn) -> None:
    """After each of ``replica``'s scans, send the chunks nobody sends (``spawn``: the gateway's task tracker's), and
    stop the resumes under way when it expires. A failure is the scan's to log; the next scan tries again."""

    async def pick_up() -> None:
        await delivery.resume(spawn=spawn, deferred=False)

    async def expired() -> None:
        delivery.forget_claims()

    replica.on_scan(pick_up)
    replica.on_expired(expired)

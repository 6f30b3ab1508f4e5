"""Outbox claims on PostgreSQL: which replica sends which chunk when several gateways share the database.

The model is ``storage/cluster.py``'s: a chunk's row names the replica incarnation that sends it
(``outbox.claimed_by``, migration 2), and a replica that dies leaves its chunks free when it is
reaped (the foreign key sets the column to NULL in the reaping statement).

* **Rows this replica writes are its own.** A reply queued (``outbox.add``), a streamed message
  opened or closed (``outbox_live.py``) and an edit put back to pending carry this incarnation, as
  :func:`claimant` finds it: alive, its row locked against a reap until the transaction ends. An
  incarnation that expired claims nothing: what it writes is left free for a live replica.
* **Free rows are taken whole chats at a time** (:func:`take_free_chats`, by ``outbox.pending``):
  one statement takes every free pending row of the chats whose transaction-scoped advisory lock
  it gets (``pg_try_advisory_xact_lock``; a chat another replica takes at that moment is skipped,
  as ``FOR UPDATE SKIP LOCKED`` skips a locked row), so two replicas never split one chat's
  chunks and each chat's order holds.
* **A live row is its stream's** (:data:`OURS_OR_FREE`, by ``outbox_live.py``): one of another
  live replica is that replica's turn's, never an orphan to close here.

Without an incarnation (None: the only gateway on the database) nothing is claimed and every row
is this gateway's, as before several gateways could share a database.
"""

from __future__ import annotations

from typing import Final

from storage.cluster import ReplicaExpiredError
from storage.postgres.cluster import hold_alive
from storage.postgres.connection import Connection

__all__ = ["OURS_OR_FREE", "claimant", "take_free_chats"]

OURS_OR_FREE: Final = "({replica}::text IS NULL OR claimed_by IS NULL OR claimed_by = {replica})"
"""The rows a replica (the parameter ``{replica}``; NULL: the only gateway) may take as its own: free, or its own
already. Format it with the parameter's place (``$1``)."""

_TAKE_FREE_CHATS: Final = """
    WITH free AS MATERIALIZED (
        SELECT DISTINCT platform, chat_id FROM outbox WHERE status = 'pending' AND claimed_by IS NULL
    ), taken AS MATERIALIZED (
        SELECT platform, chat_id FROM free
        WHERE pg_try_advisory_xact_lock(hashtextextended('outbox chat ' || platform || ' ' || chat_id, 0))
    )
    UPDATE outbox SET claimed_by = $1 FROM taken
    WHERE outbox.platform = taken.platform AND outbox.chat_id = taken.chat_id
      AND outbox.status = 'pending' AND outbox.claimed_by IS NULL
"""


async def claimant(conn: Connection, replica: str | None) -> str | None:
    """``replica`` while its incarnation is alive on the server's clock, its row held against a reap until the
    transaction ends (``cluster.hold_alive``: a reap passes over it, and then frees what this transaction claims); None when it
    expired or was reaped, or for none."""
    if replica is None:
        return None
    try:
        await hold_alive(conn, replica)
    except ReplicaExpiredError:
        return None
    return replica


async def take_free_chats(conn: Connection, replica: str) -> bool:
    """Claim for ``replica`` every free pending row of each chat no other replica is taking now; False (nothing
    taken, nothing of its own to send) when the incarnation expired. Inside a transaction."""
    if await claimant(conn, replica) is None:
        return False
    await conn.execute(_TAKE_FREE_CHATS, replica)
    return True

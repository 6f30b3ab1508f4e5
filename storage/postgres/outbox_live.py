"""Live outbox rows on PostgreSQL: the queries of ``storage/outbox_live.py`` (a streamed reply's message, on record
from before its first send), as coroutines of a connection run inside the store's transaction.

What each step means is told there. Here, opening is one ``INSERT ... ON CONFLICT DO UPDATE ...
RETURNING``, so two stores opening the same turn's stream at once get the same row; closing locks
the row (``FOR UPDATE``) before it decides between dropping it and queueing the closing edit. With several
gateways, a live row is its stream's replica's: only a free one or this replica's own is closed here
(``outbox_claims.py``).
"""

from __future__ import annotations

from storage.postgres.connection import Connection
from storage.postgres.outbox import COLUMNS
from storage.postgres.outbox_claims import OURS_OR_FREE, claimant
from storage.postgres.text import clean
from storage.records import OutboxChunk, OutboxRecord

__all__ = ["attempted", "close", "live_rows", "open_row", "shown"]


async def open_row(
    conn: Connection,
    *,
    turn_id: str,
    platform: str,
    chat_id: str,
    thread_id: str | None,
    chunk: OutboxChunk,
    mode: str,
    now: float,
    replica: str | None = None,
) -> OutboxRecord:
    """The live row ``(turn_id, 0)``: created, or the existing one, live again if it shows a message; a row that
    never reached the platform and is not live is returned as it is (its turn's answer is queued); ``stream``
    stays ``native`` once it was. The row is ``replica``'s from now on (its turn runs there: ``outbox_claims.py``)."""
    row = await conn.fetchrow(
        f"""INSERT INTO outbox (turn_id, platform, chat_id, thread_id, chunk_index, text, plain, markup, reply_to,
                                status, created_at, updated_at, stream, claimed_by)
            VALUES ($1, $2, $3, $4, 0, $5, $6, $7, $8, 'live', $9, $9, $10, $11)
            ON CONFLICT (turn_id, chunk_index) DO UPDATE SET
                status = CASE WHEN outbox.platform_message_id IS NOT NULL THEN 'live' ELSE outbox.status END,
                stream = CASE WHEN outbox.stream = 'native' THEN 'native' ELSE excluded.stream END,
                last_error = NULL, updated_at = excluded.updated_at, claimed_by = excluded.claimed_by
            RETURNING {COLUMNS}""",  # noqa: S608
        clean(turn_id), clean(platform), clean(chat_id), clean(thread_id), clean(chunk.text), clean(chunk.plain),
        clean(chunk.markup), clean(chunk.reply_to), now, mode, await claimant(conn, replica),
    )  # fmt: skip
    return OutboxRecord(*row)


async def shown(
    conn: Connection,
    *,
    outbox_id: int,
    text: str,
    plain: str | None,
    platform_message_id: str | None,
    mode: str | None,
    now: float,
) -> bool:
    """Record what a live row's message shows now (and its id, once sent); False if the row is not live."""
    updated = await conn.fetchval(
        """UPDATE outbox SET text = $2, plain = $3, platform_message_id = coalesce($4, platform_message_id),
                             stream = CASE WHEN stream = 'native' THEN 'native' ELSE coalesce($5, stream) END,
                             updated_at = $6
           WHERE id = $1 AND status = 'live' RETURNING 1""",
        outbox_id, clean(text), clean(plain), clean(platform_message_id), mode, now,
    )  # fmt: skip
    return updated is not None


async def attempted(conn: Connection, *, outbox_id: int, error: str, now: float) -> bool:
    """Count a send of a live row whose answer was lost; False if the row is not live."""
    updated = await conn.fetchval(
        "UPDATE outbox SET attempts = attempts + 1, last_error = $2, updated_at = $3 WHERE id = $1 AND status = 'live' "
        "RETURNING 1",
        outbox_id, clean(error), now,
    )  # fmt: skip
    return updated is not None


async def close(
    conn: Connection, *, outbox_id: int, text: str, plain: str | None, now: float, replica: str | None = None
) -> OutboxRecord | None:
    """End a live row without the turn's answer: a pending edit to ``text`` if it shows a message (returned, claimed
    by ``replica``), dropped if it never did (None). A row no longer live, or another replica's: None, unchanged."""
    sender = await claimant(conn, replica)  # first: a reap locks the replica's row before its outbox rows
    message_id = await conn.fetchrow(
        f"SELECT platform_message_id FROM outbox WHERE id = $1 AND status = 'live' AND {OURS_OR_FREE.format(replica='$2')} "  # noqa: S608
        "FOR UPDATE",
        outbox_id, replica,
    )  # fmt: skip
    if message_id is None:
        return None
    if message_id[0] is None:
        await conn.execute("DELETE FROM outbox WHERE id = $1", outbox_id)
        return None
    row = await conn.fetchrow(
        f"""UPDATE outbox SET text = $2, plain = $3, status = 'pending', last_error = NULL, updated_at = $4,
                              claimed_by = $5
            WHERE id = $1 RETURNING {COLUMNS}""",  # noqa: S608
        outbox_id, clean(text), clean(plain), now, sender,
    )  # fmt: skip
    return OutboxRecord(*row)


async def live_rows(conn: Connection, *, replica: str | None = None) -> list[OutboxRecord]:
    """Every live row, oldest first; with ``replica``, the ones it may close: free, or its own."""
    rows = await conn.fetch(
        f"SELECT {COLUMNS} FROM outbox WHERE status = 'live' AND {OURS_OR_FREE.format(replica='$1')} ORDER BY id",  # noqa: S608
        replica,
    )  # fmt: skip
    return [OutboxRecord(*row) for row in rows]

"""The gateway's durable outbox on PostgreSQL: the queries of ``storage/outbox.py``, as coroutines of a connection.

The rows and their life are as ``storage/outbox.py`` describes: unique on ``(turn_id,
chunk_index)``, so queueing a reply again returns the rows queued the first time; an edit puts a
delivered row back to ``pending`` with its ``platform_message_id``; a ``live`` row (a streamed
reply, ``storage/postgres/outbox_live.py``) becomes the chunk at its place when the reply is queued.

:func:`add` is how a reply is queued, also inside a turn's end (``PostgresStore.finish_turn``),
in the caller's transaction: the events it answers marked done, the live row taken over, the
chunks inserted (one ``INSERT ... SELECT FROM unnest``, ``ON CONFLICT DO NOTHING``). Two stores
queueing one turn at once take turns on the unique index, and both return the rows that won.
Text is stored as ``storage/postgres/text.py`` says (a NUL becomes U+FFFD), the keys too, so a
turn id with a NUL names the same rows wherever it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from storage.outbox import _COLUMNS as COLUMNS
from storage.postgres.connection import Connection
from storage.postgres.inbox import mark_done_all
from storage.postgres.outbox_claims import claimant, take_free_chats
from storage.postgres.text import clean
from storage.records import OutboxChunk, OutboxRecord

__all__ = ["COLUMNS", "add", "edit", "get", "mark_failed", "mark_sent", "pending", "prune"]

_CHUNKS: Final = "unnest($3::text[], $4::text[], $5::text[], $6::text[]) WITH ORDINALITY AS c(text, plain, markup, reply_to, n)"
"""The chunks of a reply as rows, numbered from 1 (``chunk_index`` is ``n - 1``); ``$1`` is the turn, ``$2`` the time."""

_ADOPT: Final = f"""
    UPDATE outbox SET text = c.text, plain = c.plain, markup = c.markup, reply_to = c.reply_to, status = 'pending',
                      last_error = NULL, updated_at = $2, claimed_by = $7
    FROM {_CHUNKS}
    WHERE outbox.turn_id = $1 AND outbox.status = 'live' AND outbox.chunk_index = c.n - 1
"""

_INSERT: Final = f"""
    INSERT INTO outbox (turn_id, platform, chat_id, thread_id, chunk_index, text, plain, markup, reply_to, created_at,
                        updated_at, claimed_by)
    SELECT $1, $7, $8, $9, c.n - 1, c.text, c.plain, c.markup, c.reply_to, $2, $2, $10 FROM {_CHUNKS}
    ORDER BY c.n
    ON CONFLICT (turn_id, chunk_index) DO NOTHING
    RETURNING {COLUMNS}
"""


async def add(
    conn: Connection,
    *,
    turn_id: str,
    platform: str,
    chat_id: str,
    thread_id: str | None,
    chunks: Sequence[OutboxChunk],
    answered: Sequence[tuple[str, str]],
    now: float,
    claimed_by: str | None = None,
) -> list[OutboxRecord]:
    """Queue a reply's chunks and mark the events it answers done; its rows in chunk order (the rows queued before
    under ``turn_id`` where there are some, a live row at a chunk's place taken over: pending, with the chunk's
    text, its message id kept). The rows written are claimed by ``claimed_by``, a replica the caller found alive
    (``outbox_claims.claimant``) or None."""
    if answered:
        await mark_done_all(conn, answered, now)
    if not chunks:
        return []
    turn_id = clean(turn_id)
    columns = (
        [clean(c.text) for c in chunks], [clean(c.plain) for c in chunks], [clean(c.markup) for c in chunks],
        [clean(c.reply_to) for c in chunks],
    )  # fmt: skip
    # A streamed message becomes its chunk first: its row then conflicts with the insert below.
    await conn.execute(_ADOPT, turn_id, now, *columns, claimed_by)
    inserted = await conn.fetch(_INSERT, turn_id, now, *columns, clean(platform), clean(chat_id), clean(thread_id),
                                claimed_by)  # fmt: skip
    if len(inserted) == len(chunks):
        rows = inserted  # every row is new: what RETURNING gave is what is stored
    else:
        rows = await conn.fetch(
            f"SELECT {COLUMNS} FROM outbox WHERE turn_id = $1 AND chunk_index < $2",  # noqa: S608
            turn_id, len(chunks),
        )  # fmt: skip
    return sorted((OutboxRecord(*row) for row in rows), key=lambda record: record.chunk_index)


async def mark_sent(conn: Connection, *, outbox_id: int, platform_message_id: str | None, now: float) -> bool:
    """Record a chunk delivered; False for a row unknown or no longer pending."""
    marked = await conn.fetchval(
        """UPDATE outbox SET status = 'sent', platform_message_id = $2, attempts = attempts + 1, updated_at = $3
           WHERE id = $1 AND status = 'pending' RETURNING 1""",
        outbox_id, clean(platform_message_id), now,
    )  # fmt: skip
    return marked is not None


async def edit(
    conn: Connection, *, outbox_id: int, text: str, plain: str | None, markup: str | None, now: float,
    replica: str | None = None,
) -> OutboxRecord | None:  # fmt: skip
    """New text for a delivered chunk, the edit pending (and claimed by ``replica``, which makes it); the row as it is
    now, or None (nothing changed) for a row that never reached the platform or is live."""
    row = await conn.fetchrow(
        f"""UPDATE outbox SET text = $2, plain = $3, markup = $4, status = 'pending', last_error = NULL, updated_at = $5,
                              claimed_by = $6
            WHERE id = $1 AND platform_message_id IS NOT NULL AND status <> 'live'
            RETURNING {COLUMNS}""",  # noqa: S608
        outbox_id, clean(text), clean(plain), clean(markup), now, await claimant(conn, replica),
    )  # fmt: skip
    return None if row is None else OutboxRecord(*row)


async def mark_failed(conn: Connection, *, outbox_id: int, error: str, give_up: bool, now: float) -> bool:
    """Count a failed attempt of a pending chunk; ``give_up`` moves it to ``failed`` for good."""
    marked = await conn.fetchval(
        """UPDATE outbox SET attempts = attempts + 1, last_error = $2, updated_at = $3,
                             status = CASE WHEN $4 THEN 'failed' ELSE status END
           WHERE id = $1 AND status = 'pending' RETURNING 1""",
        outbox_id, clean(error), now, give_up,
    )  # fmt: skip
    return marked is not None


async def get(conn: Connection, outbox_id: int) -> OutboxRecord | None:
    row = await conn.fetchrow(f"SELECT {COLUMNS} FROM outbox WHERE id = $1", outbox_id)  # noqa: S608
    return None if row is None else OutboxRecord(*row)


async def pending(conn: Connection, *, replica: str | None = None) -> list[OutboxRecord]:
    """What is to deliver, grouped by chat, in order within it; the chats in the order SQLite lists them (byte
    order, no thread first), so both engines hand delivery the same sequence. With ``replica`` (one of several
    gateways): only its own rows, after it took the free ones it could (``outbox_claims.take_free_chats``); none
    once it expired. Inside a transaction then."""
    if replica is not None and not await take_free_chats(conn, replica):
        return []
    rows = await conn.fetch(
        f"""SELECT {COLUMNS} FROM outbox WHERE status = 'pending' AND ($1::text IS NULL OR claimed_by = $1)
            ORDER BY platform COLLATE "C", chat_id COLLATE "C", thread_id COLLATE "C" NULLS FIRST, id""",  # noqa: S608
        replica,
    )  # fmt: skip
    return [OutboxRecord(*row) for row in rows]


async def prune(conn: Connection, *, older_than: float) -> int:
    """Forget sent or given-up chunks settled before ``older_than``; how many went."""
    return int(await conn.fetchval(
        """WITH gone AS (DELETE FROM outbox WHERE status NOT IN ('pending', 'live') AND updated_at < $1 RETURNING 1)
           SELECT count(*) FROM gone""",
        older_than,
    ))  # fmt: skip

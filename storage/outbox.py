"""The gateway's durable outbox: reply chunks written before they are sent.

Each chunk is one row, unique on ``(turn_id, chunk_index)``: adding the same
turn again (a replay after a crash) returns the existing rows instead of
queueing duplicates. A chunk keeps its rendered text, a plain-text fallback,
the markup it is written in and what it replies to, so a delivery resumed
after a restart sends exactly what was decided before. ``pending`` rows come back grouped by chat and in order
within it, so a resumed delivery keeps each conversation's order.

An edit rewrites a delivered row in place: :func:`edit` stores the new text
and puts the row back to ``pending`` while it keeps its
``platform_message_id``. Such a row reads as "edit pending": the sender edits
that message instead of sending a new one, then marks the row sent again.
"""

from __future__ import annotations

import sqlite3
from typing import Final

import aiosqlite

from storage.records import OutboxChunk, OutboxRecord

__all__ = ["add", "edit", "get", "mark_failed", "mark_sent", "pending", "prune"]

_COLUMNS: Final = (
    "id, turn_id, platform, chat_id, thread_id, chunk_index, text, plain, markup, reply_to, status, "
    "platform_message_id, attempts, created_at, updated_at, last_error"
)


def add(
    conn: sqlite3.Connection,
    *,
    turn_id: str,
    platform: str,
    chat_id: str,
    thread_id: str | None,
    chunks: tuple[OutboxChunk, ...],
    now: float,
) -> list[OutboxRecord]:
    """Queue the chunks of one reply; returns their rows in chunk order (existing ones if already queued)."""
    conn.executemany(
        """INSERT INTO outbox (turn_id, platform, chat_id, thread_id, chunk_index, text, plain, markup, reply_to,
                               created_at, updated_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (turn_id, chunk_index) DO NOTHING""",
        [(turn_id, platform, chat_id, thread_id, index, c.text, c.plain, c.markup, c.reply_to, now, now)
         for index, c in enumerate(chunks)],
    )  # fmt: skip
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM outbox WHERE turn_id = ? AND chunk_index < ? ORDER BY chunk_index",
        (turn_id, len(chunks)),
    ).fetchall()
    return [OutboxRecord(*row) for row in rows]


def edit(
    conn: sqlite3.Connection,
    *,
    outbox_id: int,
    text: str,
    plain: str | None,
    markup: str | None,
    now: float,
) -> OutboxRecord | None:
    """Record new text for a delivered chunk and mark the edit pending; returns the row as it is now.

    Only a row that reached the platform (it has a ``platform_message_id``) can be edited; for any
    other row nothing changes and None comes back. The error of an earlier attempt is cleared.
    """
    cursor = conn.execute(
        """UPDATE outbox SET text = ?, plain = ?, markup = ?, status = 'pending', last_error = NULL, updated_at = ?
           WHERE id = ? AND platform_message_id IS NOT NULL""",
        (text, plain, markup, now, outbox_id),
    )
    if cursor.rowcount != 1:
        return None
    row = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE id = ?", (outbox_id,)).fetchone()
    return OutboxRecord(*row)


def mark_sent(
    conn: sqlite3.Connection, *, outbox_id: int, platform_message_id: str | None, now: float
) -> bool:
    """Record a delivery; False if the row is unknown or was no longer pending."""
    cursor = conn.execute(
        """UPDATE outbox SET status = 'sent', platform_message_id = ?, attempts = attempts + 1, updated_at = ?
           WHERE id = ? AND status = 'pending'""",
        (platform_message_id, now, outbox_id),
    )
    return cursor.rowcount == 1


def mark_failed(conn: sqlite3.Connection, *, outbox_id: int, error: str, give_up: bool, now: float) -> bool:
    """Count a failed attempt; ``give_up`` moves the row to ``failed`` for good."""
    cursor = conn.execute(
        """UPDATE outbox SET attempts = attempts + 1, last_error = ?, updated_at = ?,
                             status = CASE WHEN ? THEN 'failed' ELSE status END
           WHERE id = ? AND status = 'pending'""",
        (error, now, give_up, outbox_id),
    )
    return cursor.rowcount == 1


async def pending(conn: aiosqlite.Connection) -> list[OutboxRecord]:
    rows = await conn.execute_fetchall(
        f"SELECT {_COLUMNS} FROM outbox WHERE status = 'pending' ORDER BY platform, chat_id, thread_id, id"
    )
    return [OutboxRecord(*row) for row in rows]


async def get(conn: aiosqlite.Connection, outbox_id: int) -> OutboxRecord | None:
    rows = list(await conn.execute_fetchall(f"SELECT {_COLUMNS} FROM outbox WHERE id = ?", (outbox_id,)))
    return OutboxRecord(*rows[0]) if rows else None


def prune(conn: sqlite3.Connection, *, older_than: float) -> int:
    cursor = conn.execute("DELETE FROM outbox WHERE status != 'pending' AND updated_at < ?", (older_than,))
    return cursor.rowcount

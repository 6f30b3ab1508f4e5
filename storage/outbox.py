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

A reply shown while it is written is a ``live`` row (``storage/outbox_live.py``): only its stream
writes to it, and nothing here sends it. When the turn ends, :func:`add_all` makes the live row
at a reply chunk's place that chunk: its text becomes the chunk's, it goes to ``pending`` and
keeps its ``platform_message_id``, so delivery edits the streamed message to the final text
instead of sending the reply again.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any, Final

import aiosqlite

from storage.engine.bulk import PAIRS_IN, first_hits, json_result, json_rows
from storage.inbox import mark_done_all
from storage.records import OutboxChunk, OutboxRecord

__all__ = ["Reply", "add_all", "edit", "get", "mark_failed", "mark_sent_all", "pending", "prune"]

_COLUMNS: Final = (
    "id, turn_id, platform, chat_id, thread_id, chunk_index, text, plain, markup, reply_to, status, "
    "platform_message_id, attempts, created_at, updated_at, last_error, stream"
)


# JSON writes a REAL with 15 significant digits; quote() writes it so that it reads back exactly.
_JSON_COLUMNS: Final = _COLUMNS.replace("created_at, updated_at", "quote(created_at), quote(updated_at)")


def _from_json(row: list[Any]) -> OutboxRecord:
    """A record from a row of ``_JSON_COLUMNS`` read back through JSON."""
    row[13], row[14] = float(row[13]), float(row[14])
    return OutboxRecord(*row)


Reply = tuple[str, str, str, str | None, tuple[OutboxChunk, ...], tuple[tuple[str, str], ...]]
"""What :func:`add_all` takes per item: ``(turn_id, platform, chat_id, thread_id, chunks, answered)``;
``answered`` are the inbox events ``(platform, event_id)`` the reply finishes."""

_INSERT_COLUMNS: Final = (
    "turn_id, platform, chat_id, thread_id, chunk_index, text, plain, markup, reply_to, created_at, updated_at"
)


def add_all(conn: sqlite3.Connection, items: Sequence[Reply], now: float) -> list[list[OutboxRecord]]:
    """A bulk kind: queue several replies; per reply, its rows in chunk order (existing ones if queued before).

    The inbox events each reply answers are marked done in the same transaction (how a turn ends:
    ``storage/ledger.py``): a crash leaves either the reply queued and its events done, or neither.
    """
    rows = [
        (turn_id, platform, chat_id, thread_id, index, c.text, c.plain, c.markup, c.reply_to)
        for turn_id, platform, chat_id, thread_id, chunks, _ in items
        for index, c in enumerate(chunks)
    ]
    keys = [(turn_id, len(chunks)) for turn_id, _, _, _, chunks, _ in items]
    answered = [event for *_, events in items for event in events]
    if answered:
        mark_done_all(conn, answered, now)
    payload = json_rows(rows)
    by_key: dict[tuple[str, int], OutboxRecord] | None = None
    # A streamed message becomes its chunk first: its row then conflicts with the insert below
    # (so the fast path, which counts inserted rows, reads the rows back).
    _adopt_live(conn, rows, payload, now)
    if payload is None:
        conn.executemany(
            f"""INSERT INTO outbox ({_INSERT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (turn_id, chunk_index) DO NOTHING""",
            [(*row, now, now) for row in rows],
        )
    elif rows:
        cursor = conn.execute(
            f"""INSERT INTO outbox ({_INSERT_COLUMNS})
                SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3, j.value->>4, j.value->>5, j.value->>6,
                       j.value->>7, j.value->>8, ?1, ?1
                FROM json_each(?2) AS j WHERE true
                ON CONFLICT (turn_id, chunk_index) DO NOTHING""",
            (now, payload),
        )
        if cursor.rowcount == len(rows) and cursor.lastrowid is not None:
            # Every row is new (none queued before): one statement gave them consecutive ids, and
            # they hold what was bound plus the column defaults, so nothing needs reading back.
            first = cursor.lastrowid - len(rows) + 1
            by_key = {
                (row[0], row[4]): OutboxRecord(first + n, *row, "pending", None, 0, now, now, None)
                for n, row in enumerate(rows)
            }
    if by_key is None:
        by_key = _queued_rows(conn, keys) if rows else {}
    return [[by_key[(turn_id, index)] for index in range(count)] for turn_id, count in keys]


_ADOPT_SET: Final = (
    "text = {0}5, plain = {0}6, markup = {0}7, reply_to = {0}8, status = 'pending', last_error = NULL, updated_at = ?1"
)


def _adopt_live(conn: sqlite3.Connection, rows: Sequence[tuple[Any, ...]], payload: str | None, now: float) -> None:
    """Every live row at the place of one of ``rows`` becomes that chunk, pending, its message id kept."""
    if not rows:
        return
    if payload is None:  # a NUL in a value: one statement per row, with bound parameters
        conn.executemany(
            f"""UPDATE outbox SET {_ADOPT_SET.format("?")} WHERE turn_id = ?2 AND chunk_index = ?3 AND status = 'live'""",
            [(now, turn_id, index, None, text, plain, markup, reply_to)
             for turn_id, _, _, _, index, text, plain, markup, reply_to in rows],
        )  # fmt: skip
        return
    conn.execute(
        f"""UPDATE outbox SET {_ADOPT_SET.format("j.value->>")}
            FROM json_each(?2) AS j
            WHERE outbox.status = 'live' AND outbox.turn_id = j.value->>0 AND outbox.chunk_index = j.value->>4""",
        (now, payload),
    )


def _queued_rows(conn: sqlite3.Connection, keys: Sequence[tuple[str, int]]) -> dict[tuple[str, int], OutboxRecord]:
    """The rows of each ``(turn_id, chunk count)`` as stored, by ``(turn_id, chunk_index)``."""
    wanted = json_rows([(turn_id, index) for turn_id, count in keys for index in range(count)])
    if wanted is None:  # a turn id with a NUL in it: look each reply up with bound parameters
        return {
            (row[1], row[5]): OutboxRecord(*row)
            for turn_id, count in keys
            for row in conn.execute(
                f"SELECT {_COLUMNS} FROM outbox WHERE turn_id = ? AND chunk_index < ?", (turn_id, count)
            )
        }
    found = json_result(
        conn,
        f"""SELECT json_group_array(json_array({_JSON_COLUMNS})) FROM outbox
            WHERE (turn_id, chunk_index) IN {PAIRS_IN}""",
        (wanted,),
    )
    return {(row[1], row[5]): _from_json(row) for row in found}


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
           WHERE id = ? AND platform_message_id IS NOT NULL AND status != 'live'""",
        (text, plain, markup, now, outbox_id),
    )
    if cursor.rowcount != 1:
        return None
    row = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE id = ?", (outbox_id,)).fetchone()
    return OutboxRecord(*row)


def mark_sent_all(conn: sqlite3.Connection, items: Sequence[tuple[int, str | None]], now: float) -> list[bool]:
    """A bulk kind: ``(outbox_id, platform_message_id)`` per item; False for a row unknown or no longer pending."""
    first_of_each = {outbox_id: message_id for outbox_id, message_id in reversed(items)}  # the first mark wins
    payload = json_rows(list(first_of_each.items()))
    if payload is None:
        return [_mark_sent_one(conn, item, now) for item in items]
    pending = json_result(
        conn,
        """SELECT json_group_array(id) FROM outbox
           WHERE status = 'pending' AND id IN (SELECT j.value->>0 FROM json_each(?) AS j)""",
        (payload,),
    )
    conn.execute(
        """UPDATE outbox SET status = 'sent', platform_message_id = j.value->>1, attempts = attempts + 1,
                             updated_at = ?1
           FROM json_each(?2) AS j WHERE outbox.id = j.value->>0 AND outbox.status = 'pending'""",
        (now, payload),
    )
    return first_hits([outbox_id for outbox_id, _ in items], set(pending))


def _mark_sent_one(conn: sqlite3.Connection, item: tuple[int, str | None], now: float) -> bool:
    outbox_id, platform_message_id = item
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
    cursor = conn.execute(
        "DELETE FROM outbox WHERE status != 'pending' AND status != 'live' AND updated_at < ?", (older_than,)
    )
    return cursor.rowcount

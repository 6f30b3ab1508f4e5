"""Live outbox rows: a reply's message while it is shown as the model writes it.

A streamed reply (the gateway's ``gateway/delivery/streaming/``) is in the outbox from before its
first send: one row, chunk 0 of the turn's reply key, with status ``live``. Delivery never sends
a live row (it is not ``pending``); only the stream writes to it:

* :func:`open_row`: the row is created, or the one a crashed run left is returned (a replayed
  turn adopts the message that run showed: the row keeps its ``platform_message_id``);
* :func:`shown`: what the message shows now, after each send or edit;
* :func:`attempted`: a first send whose answer was lost (it may have landed) is counted, so
  whoever sends the row next (the turn's answer taking it over) asks the platform first;
* :func:`close`: the stream ends without the turn's answer (``/stop``, an interrupt, a restart
  whose turn will not run again): a row with a message becomes a pending edit to the closing
  text, which delivery finishes (also after a crash); a row never shown is dropped;
* :func:`live_rows`: every live row, for the startup sweep.

How the turn's answer takes the row over is in ``storage/outbox.py`` (``add_all``).
"""

from __future__ import annotations

import sqlite3

import aiosqlite

from storage.outbox import _COLUMNS
from storage.records import LIVE, OutboxChunk, OutboxRecord

__all__ = ["attempted", "close", "live_rows", "open_row", "shown"]


def open_row(
    conn: sqlite3.Connection,
    *,
    turn_id: str,
    platform: str,
    chat_id: str,
    thread_id: str | None,
    chunk: OutboxChunk,
    mode: str,
    now: float,
) -> OutboxRecord:
    """The live row ``(turn_id, 0)``: created, or the existing one, live again if it shows a message.

    An existing row that was closed (its turn stopped, then run again after a restart) goes back to
    live while it keeps its message, so the replay edits that message. One that never reached the
    platform and is not live (a turn's answer queued) is returned as it is: not for the stream.
    The row's ``stream`` stays ``native`` once it was: such a message is stopped before it is edited.
    """
    conn.execute(
        """INSERT INTO outbox (turn_id, platform, chat_id, thread_id, chunk_index, text, plain, markup, reply_to,
                               status, created_at, updated_at, stream)
           VALUES (?, ?, ?, ?, 0, ?, ?, ?, ?, 'live', ?, ?, ?)
           ON CONFLICT (turn_id, chunk_index) DO UPDATE SET
               status = CASE WHEN outbox.platform_message_id IS NOT NULL THEN 'live' ELSE outbox.status END,
               stream = CASE WHEN outbox.stream = 'native' THEN 'native' ELSE excluded.stream END,
               last_error = NULL, updated_at = excluded.updated_at""",
        (turn_id, platform, chat_id, thread_id, chunk.text, chunk.plain, chunk.markup, chunk.reply_to, now, now, mode),
    )
    row = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE turn_id = ? AND chunk_index = 0", (turn_id,)).fetchone()
    return OutboxRecord(*row)


def shown(
    conn: sqlite3.Connection,
    *,
    outbox_id: int,
    text: str,
    plain: str | None,
    platform_message_id: str | None,
    mode: str | None,
    now: float,
) -> bool:
    """Record what a live row's message shows now (and its id, once sent); False if the row is not live."""
    cursor = conn.execute(
        """UPDATE outbox SET text = ?, plain = ?, platform_message_id = coalesce(?, platform_message_id),
                             stream = CASE WHEN stream = 'native' THEN 'native' ELSE coalesce(?, stream) END,
                             updated_at = ?
           WHERE id = ? AND status = 'live'""",
        (text, plain, platform_message_id, mode, now, outbox_id),
    )
    return cursor.rowcount == 1


def attempted(conn: sqlite3.Connection, *, outbox_id: int, error: str, now: float) -> bool:
    """Count a send of a live row that may have reached the platform without its answer reaching us;
    False if the row is not live."""
    cursor = conn.execute(
        """UPDATE outbox SET attempts = attempts + 1, last_error = ?, updated_at = ? WHERE id = ? AND status = 'live'""",
        (error, now, outbox_id),
    )
    return cursor.rowcount == 1


def close(conn: sqlite3.Connection, *, outbox_id: int, text: str, plain: str | None, now: float) -> OutboxRecord | None:
    """End a live row without the turn's answer: a pending edit to ``text`` if it shows a message
    (returned, for delivery), dropped if it never did (None). A row no longer live: None, unchanged."""
    row = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE id = ? AND status = ?", (outbox_id, LIVE)).fetchone()
    if row is None:
        return None
    record = OutboxRecord(*row)
    if record.platform_message_id is None:
        conn.execute("DELETE FROM outbox WHERE id = ?", (outbox_id,))
        return None
    conn.execute(
        """UPDATE outbox SET text = ?, plain = ?, status = 'pending', last_error = NULL, updated_at = ? WHERE id = ?""",
        (text, plain, now, outbox_id),
    )
    row = conn.execute(f"SELECT {_COLUMNS} FROM outbox WHERE id = ?", (outbox_id,)).fetchone()
    return OutboxRecord(*row)


async def live_rows(conn: aiosqlite.Connection) -> list[OutboxRecord]:
    rows = await conn.execute_fetchall(f"SELECT {_COLUMNS} FROM outbox WHERE status = 'live' ORDER BY id")
    return [OutboxRecord(*row) for row in rows]

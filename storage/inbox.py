"""The gateway's durable inbox: every accepted platform event, until its turn is done.

A row is unique on ``(platform, event_id)``, which is how redelivered updates
are recognised; ``accepted`` rows left over after a crash are the work to
resume. Finished rows are kept for a while (the dedup window) and pruned.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping
from typing import Any, Final

import aiosqlite

from storage.records import InboxRecord

__all__ = ["accept", "mark_done", "prune", "unfinished"]

_COLUMNS: Final = "id, platform, event_id, session_key, payload, status, received_at, done_at"


def accept(
    conn: sqlite3.Connection,
    *,
    platform: str,
    event_id: str,
    session_key: str,
    payload: Mapping[str, Any],
    now: float,
) -> bool:
    """Store the event; False when this platform already delivered this event id."""
    cursor = conn.execute(
        """INSERT INTO inbox (platform, event_id, session_key, payload, received_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (platform, event_id) DO NOTHING""",
        (platform, event_id, session_key, json.dumps(payload, ensure_ascii=False, separators=(",", ":")), now),
    )
    return cursor.rowcount == 1


def mark_done(conn: sqlite3.Connection, *, platform: str, event_id: str, now: float) -> bool:
    """Mark an accepted event done; False if it is unknown or was already done."""
    cursor = conn.execute(
        "UPDATE inbox SET status = 'done', done_at = ? WHERE platform = ? AND event_id = ? AND status = 'accepted'",
        (now, platform, event_id),
    )
    return cursor.rowcount == 1


async def unfinished(conn: aiosqlite.Connection) -> list[InboxRecord]:
    """Accepted, not done, in arrival order."""
    rows = await conn.execute_fetchall(f"SELECT {_COLUMNS} FROM inbox WHERE status = 'accepted' ORDER BY id")
    return [
        InboxRecord(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5], row[6], row[7]) for row in rows
    ]


def prune(conn: sqlite3.Connection, *, older_than: float) -> int:
    cursor = conn.execute("DELETE FROM inbox WHERE status = 'done' AND done_at < ?", (older_than,))
    return cursor.rowcount

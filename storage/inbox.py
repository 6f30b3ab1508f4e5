"""The gateway's durable inbox: every accepted platform event, until its turn is done.

A row is unique on ``(platform, event_id)``, which is how redelivered updates
are recognised; ``accepted`` rows left over after a crash are the work to
resume. Finished rows are kept for a while (the dedup window) and pruned.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Mapping, Sequence
from typing import Any, Final

import aiosqlite

from storage.engine.bulk import PAIRS_IN, first_hits, json_result, json_rows
from storage.records import InboxRecord

__all__ = ["accept_all", "mark_done_all", "payload_text", "prune", "unfinished"]

_COLUMNS: Final = "id, platform, event_id, session_key, payload, status, received_at, done_at"


_PAYLOAD_ENCODER: Final = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))
"""Made once: ``json.dumps`` with any non-default option builds a new encoder on every call."""


def payload_text(payload: Mapping[str, Any]) -> str:
    return _PAYLOAD_ENCODER.encode(payload)


def accept_all(conn: sqlite3.Connection, items: Sequence[tuple[str, str, str, str]], now: float) -> list[bool]:
    """A bulk kind: ``(platform, event_id, session_key, payload_text)`` per item; False for an event seen before."""
    rows = json_rows(items)
    if rows is None:
        return [_accept_one(conn, item, now) for item in items]
    keys = [(platform, event_id) for platform, event_id, *_ in items]
    cursor = conn.execute(
        """INSERT INTO inbox (platform, event_id, session_key, payload, received_at)
           SELECT j.value->>0, j.value->>1, j.value->>2, j.value->>3, ?1 FROM json_each(?2) AS j WHERE true
           ON CONFLICT (platform, event_id) DO NOTHING""",
        (now, rows),
    )
    inserted = cursor.rowcount
    if inserted == len(keys) and len(set(keys)) == len(keys):
        return [True] * len(keys)  # all new: the usual case, and no read needed
    if inserted <= 0 or cursor.lastrowid is None:
        return [False] * len(keys)
    # One statement gave the rows it inserted consecutive ids, the highest in the table.
    new = json_result(
        conn,
        "SELECT json_group_array(json_array(platform, event_id)) FROM inbox WHERE id > ?",
        (cursor.lastrowid - inserted,),
    )
    return first_hits(keys, {tuple(key) for key in new})


def _accept_one(conn: sqlite3.Connection, item: tuple[str, str, str, str], now: float) -> bool:
    cursor = conn.execute(
        """INSERT INTO inbox (platform, event_id, session_key, payload, received_at) VALUES (?, ?, ?, ?, ?)
           ON CONFLICT (platform, event_id) DO NOTHING""",
        (*item, now),
    )
    return cursor.rowcount == 1


def mark_done_all(conn: sqlite3.Connection, items: Sequence[tuple[str, str]], now: float) -> list[bool]:
    """A bulk kind: ``(platform, event_id)`` per item; False for an event unknown or already done."""
    rows = json_rows(items)
    if rows is None:
        return [_mark_done_one(conn, item, now) for item in items]
    accepted = json_result(
        conn,
        f"""SELECT json_group_array(json_array(platform, event_id)) FROM inbox
            WHERE status = 'accepted' AND (platform, event_id) IN {PAIRS_IN}""",
        (rows,),
    )
    conn.execute(
        f"UPDATE inbox SET status = 'done', done_at = ? WHERE status = 'accepted' AND (platform, event_id) IN {PAIRS_IN}",
        (now, rows),
    )
    return first_hits([tuple(item) for item in items], {tuple(key) for key in accepted})


def _mark_done_one(conn: sqlite3.Connection, item: tuple[str, str], now: float) -> bool:
    cursor = conn.execute(
        "UPDATE inbox SET status = 'done', done_at = ? WHERE platform = ? AND event_id = ? AND status = 'accepted'",
        (now, *item),
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

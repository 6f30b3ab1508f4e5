"""The gateway's durable inbox on PostgreSQL: the queries of ``storage/inbox.py``, as coroutines of a connection.

A row is unique on ``(platform, event_id)``. An accept is one ``INSERT ... ON CONFLICT DO NOTHING
RETURNING``: the row comes back only to the transaction that stored it, so of any number of
accepts of one event, in this process or others, exactly one is told True (a second inserter
waits on the unique index for the first to commit, then inserts nothing). The payload is kept as
``jsonb`` (JSON text in, JSON text out: ``payload::text``), cleaned of NUL (``storage/postgres/text.py``).

``jsonb`` holds only what JSON can: a float that is not a number or infinite (which Python's JSON
writes as ``NaN``, ``Infinity``, and SQLite keeps as text) is stored as ``null``, so such an event
is still accepted (refused, the platform would redeliver it forever) with everything else intact.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from storage.inbox import payload_text
from storage.postgres.connection import Connection
from storage.postgres.text import clean, clean_json
from storage.records import InboxRecord

__all__ = ["accept", "mark_done", "mark_done_all", "prune", "unfinished"]

_COLUMNS: Final = "id, platform, event_id, session_key, payload::text, status, received_at, done_at"


async def accept(
    conn: Connection, *, platform: str, event_id: str, session_key: str, payload: Mapping[str, Any], now: float
) -> bool:
    """Store an event; False when ``(platform, event_id)`` is stored already (nothing written)."""
    stored = await conn.fetchval(
        """INSERT INTO inbox (platform, event_id, session_key, payload, received_at) VALUES ($1, $2, $3, $4::jsonb, $5)
           ON CONFLICT (platform, event_id) DO NOTHING RETURNING id""",
        clean(platform), clean(event_id), clean(session_key), payload_json(payload), now,
    )  # fmt: skip
    return stored is not None


def payload_json(payload: Mapping[str, Any]) -> str:
    """``payload`` as JSON ``jsonb`` takes: no NUL, no ``NaN`` or ``Infinity`` (``null`` in their place)."""
    text = payload_text(payload)
    if "NaN" in text or "Infinity" in text:  # maybe only inside a string: then the same text comes out again
        text = payload_text(_finite(payload))
    return clean_json(text)


def _finite(value: Any) -> Any:
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(item) for item in value]
    return value


async def mark_done(conn: Connection, *, platform: str, event_id: str, now: float) -> bool:
    """Mark one event done; False when it is unknown or done already."""
    return bool(await mark_done_all(conn, [(platform, event_id)], now))


async def mark_done_all(conn: Connection, events: Sequence[tuple[str, str]], now: float) -> int:
    """Mark the accepted ones of ``events`` (``(platform, event_id)`` each) done; how many were."""
    if not events:
        return 0
    done = await conn.fetch(
        """UPDATE inbox SET status = 'done', done_at = $1
           FROM unnest($2::text[], $3::text[]) AS e(platform, event_id)
           WHERE inbox.platform = e.platform AND inbox.event_id = e.event_id AND inbox.status = 'accepted'
           RETURNING inbox.id""",
        now, [clean(p) for p, _ in events], [clean(e) for _, e in events],
    )  # fmt: skip
    return len(done)


async def unfinished(conn: Connection, *, session_key: str | None = None) -> list[InboxRecord]:
    """Accepted, not done, in arrival order (only ``session_key``'s, when given)."""
    if session_key is None:
        rows = await conn.fetch(f"SELECT {_COLUMNS} FROM inbox WHERE status = 'accepted' ORDER BY id")  # noqa: S608
    else:
        rows = await conn.fetch(f"SELECT {_COLUMNS} FROM inbox WHERE status = 'accepted' AND session_key = $1 "  # noqa: S608
                                "ORDER BY id", session_key)  # fmt: skip
    return [
        InboxRecord(row[0], row[1], row[2], row[3], json.loads(row[4]), row[5], row[6], row[7]) for row in rows
    ]


async def prune(conn: Connection, *, older_than: float) -> int:
    """Forget events done before ``older_than``; how many went."""
    gone = "WITH gone AS (DELETE FROM inbox WHERE status = 'done' AND done_at < $1 RETURNING 1) SELECT count(*) FROM gone"
    return int(await conn.fetchval(gone, older_than))

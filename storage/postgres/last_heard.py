"""Where each chat with an open session last heard from, on PostgreSQL: ``storage/last_heard.py``'s two reads.

The same two short reads as on SQLite (what they find and why is told there): each open session's
newest inbox row by the index ``inbox_by_session`` gives the chats' last activity; then, for the
chats chosen, the newest :data:`~storage.last_heard.RECENT_ROWS` rows of each of their sessions (a
``LATERAL`` read of the same index) give the message with the latest send time, the one stored last
of two sent in the same instant. The payload's ``timestamp`` is compared as a number (``->>`` gives
text here, which would put "99.5" after "100.0"); a payload without a numeric one gives no mark.
Both reads are in one snapshot.
"""

from __future__ import annotations

from storage.last_heard import RECENT_ROWS, LastHeard, choose_chats, marked
from storage.postgres.connection import Connection

__all__ = ["last_heard"]


async def last_heard(conn: Connection, *, platform: str, limit: int) -> list[LastHeard]:
    """The chats of ``platform`` with an open session, the most recently active first, at most ``limit``."""
    async with conn.transaction(readonly=True, isolation="repeatable_read"):
        sessions = await conn.fetch(
            """SELECT s.session_key, s.chat_id, s.thread_id, s.chat_type, s.started_at,
                      (SELECT i.received_at FROM inbox AS i WHERE i.session_key = s.session_key AND i.platform = $1
                       ORDER BY i.id DESC LIMIT 1) AS active
               FROM sessions AS s WHERE s.platform = $1 AND s.ended_at IS NULL""",
            platform,
        )
        chosen = choose_chats(sessions, limit)
        keys = [key for chat in chosen for key in chat.keys]
        rows = await conn.fetch(
            f"""WITH recent AS (
                    SELECT k.session_key, i.id,
                           CASE WHEN jsonb_typeof(i.payload->'timestamp') = 'number'
                                THEN (i.payload->>'timestamp')::double precision END AS at
                    FROM unnest($2::text[]) AS k(session_key),
                         LATERAL (SELECT id, payload FROM inbox
                                  WHERE session_key = k.session_key AND platform = $1
                                  ORDER BY id DESC LIMIT {RECENT_ROWS}) AS i
                ), newest AS (
                    SELECT id, at, ROW_NUMBER() OVER (PARTITION BY session_key ORDER BY at DESC NULLS LAST, id DESC) AS n
                    FROM recent
                )
                SELECT n.id, i.payload->>'chat_id', i.payload->>'thread_id', i.payload->>'message_id', n.at
                FROM newest AS n JOIN inbox AS i ON i.id = n.id WHERE n.n = 1""",  # noqa: S608  (a constant)
            platform, keys,
        )  # fmt: skip
    return marked(chosen, rows)

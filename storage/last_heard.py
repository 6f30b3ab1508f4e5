"""Where each chat with an open session last heard from: the last message the inbox holds from it.

After a platform connection was rebuilt, the gateway asks the platform for what was sent since
the last message it stored from each chat (or thread) where a conversation is going on. The
inbox keeps every accepted event's payload (its chat, thread, platform message id and send
time) for a week; a chat whose messages were pruned since has only its session's start.

Several open sessions can share one chat (one per person in a group): the chat is listed once.
"""

from __future__ import annotations

from dataclasses import dataclass

import aiosqlite

__all__ = ["LastHeard", "last_heard"]


@dataclass(frozen=True, slots=True)
class LastHeard:
    """One chat (or thread) of a platform with an open session, and the last message stored from it."""

    chat_id: str
    chat_type: str | None
    thread_id: str | None
    message_id: str | None
    """The platform's id of the newest message stored from there; None when the inbox holds none."""
    message_at: float | None
    """That message's send time (epoch seconds), as the platform gave it."""
    session_started_at: float
    """When the newest open session there started."""

    @property
    def active_at(self) -> float:
        """The last sign of life: the last message stored, else the session's start."""
        return self.message_at if self.message_at is not None else self.session_started_at


async def last_heard(conn: aiosqlite.Connection, *, platform: str, limit: int) -> list[LastHeard]:
    """The chats of ``platform`` with an open session, the most recently active first, at most ``limit``.

    One scan of the platform's inbox rows (a week at most); the newest message of a chat is the one
    with the latest send time, so messages stored out of order (read back after a reconnect) do
    not move the mark back; of two sent in the same instant, the one stored last.
    """
    rows = await conn.execute_fetchall(
        """WITH open AS (
               SELECT chat_id, thread_id, MAX(chat_type) AS chat_type, MAX(started_at) AS started_at
               FROM sessions WHERE platform = ?1 AND ended_at IS NULL GROUP BY chat_id, thread_id
           ), stored AS (
               SELECT payload->>'chat_id' AS chat_id, payload->>'thread_id' AS thread_id,
                      payload->>'message_id' AS message_id, payload->>'timestamp' AS at,
                      ROW_NUMBER() OVER (PARTITION BY payload->>'chat_id', payload->>'thread_id'
                                         ORDER BY payload->>'timestamp' DESC, id DESC) AS newest
               FROM inbox WHERE platform = ?1
           ), heard AS (SELECT chat_id, thread_id, message_id, at FROM stored WHERE newest = 1)
           SELECT o.chat_id, o.chat_type, o.thread_id, h.message_id, h.at, o.started_at
           FROM open AS o LEFT JOIN heard AS h ON h.chat_id = o.chat_id AND h.thread_id IS o.thread_id
           ORDER BY COALESCE(h.at, o.started_at) DESC LIMIT ?2""",
        (platform, limit),
    )
    return [
        LastHeard(
            chat_id=row[0], chat_type=row[1], thread_id=row[2],
            message_id=None if row[3] is None else str(row[3]),
            message_at=None if row[4] is None else float(row[4]), session_started_at=row[5],
        )  # fmt: skip
        for row in rows
    ]

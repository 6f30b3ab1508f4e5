"""Where each chat with an open session last heard from: the last message the inbox holds from it.

After a platform connection was rebuilt, the gateway asks the platform for what was sent since
the last message it stored from each chat (or thread) where a conversation is going on. The
inbox keeps every accepted event's payload (its chat, thread, platform message id and send
time) for a week; a chat whose messages were pruned since has only its session's start.

Several open sessions can share one chat (one per person in a group): the chat is listed once.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import aiosqlite

__all__ = ["RECENT_ROWS", "LastHeard", "choose_chats", "last_heard", "marked"]


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

    Two short reads instead of a scan of the week's inbox (whose payloads are JSON: reading them
    all took over a second at 100,000 rows): each open session's newest inbox row by the index
    ``inbox_by_session`` gives the chats' last activity; then, for the ``limit`` most recently
    active chats only, the newest :data:`RECENT_ROWS` rows of their sessions give the message
    with the latest send time, so messages stored out of order (read back after a reconnect)
    do not move the mark back; of two sent in the same instant, the one stored last.
    """
    sessions = await conn.execute_fetchall(
        """SELECT s.session_key, s.chat_id, s.thread_id, s.chat_type, s.started_at,
                  (SELECT i.received_at FROM inbox AS i WHERE i.session_key = s.session_key AND i.platform = ?1
                   ORDER BY i.id DESC LIMIT 1) AS active
           FROM sessions AS s WHERE s.platform = ?1 AND s.ended_at IS NULL""",
        (platform,),
    )
    chosen = choose_chats(sessions, limit)
    keys = [key for chat in chosen for key in chat.keys]
    rows = await conn.execute_fetchall(
        f"""WITH recent AS (
                SELECT k.value AS session_key, i.id, i.payload->>'timestamp' AS at
                FROM json_each(?2) AS k, inbox AS i
                WHERE i.id IN (SELECT id FROM inbox WHERE session_key = k.value AND platform = ?1
                               ORDER BY id DESC LIMIT {RECENT_ROWS})
            ), newest AS (
                SELECT id, at, ROW_NUMBER() OVER (PARTITION BY session_key ORDER BY at DESC, id DESC) AS n
                FROM recent
            )
            SELECT n.id, i.payload->>'chat_id', i.payload->>'thread_id', i.payload->>'message_id', n.at
            FROM newest AS n JOIN inbox AS i ON i.id = n.id WHERE n.n = 1""",
        (platform, json.dumps(keys)),
    )
    return marked(chosen, rows)


RECENT_ROWS = 64
"""Inbox rows read per session for its newest message: more than one catch-up feeds out of order (``catch_up.per_chat``
is 50 by default), so a message received live after them is among them."""


def choose_chats(sessions: Iterable[Sequence[Any]], limit: int) -> list[_Chat]:
    """The ``limit`` most recently active chats of ``sessions``: rows ``(session_key, chat_id, thread_id, chat_type,
    started_at, newest inbox row's received_at or None)`` of every open session of the platform (engine-neutral)."""
    chats: dict[tuple[str, str | None], _Chat] = {}
    for key, chat_id, thread_id, chat_type, started_at, active in sessions:
        chat = chats.setdefault((chat_id, thread_id), _Chat(chat_id, thread_id))
        chat.add(key, chat_type, started_at, active)
    return sorted(chats.values(), key=lambda c: c.active, reverse=True)[:limit]


def marked(chosen: Sequence[_Chat], rows: Iterable[Sequence[Any]]) -> list[LastHeard]:
    """``chosen`` with their marks, the most recently active first: ``rows`` are ``(inbox id, chat_id, thread_id,
    message_id, send time)`` of the newest message of each of their sessions (engine-neutral)."""
    places = {(chat.chat_id, chat.thread_id) for chat in chosen}
    newest: dict[tuple[str, str | None], tuple[float, int, str]] = {}
    for row_id, chat_id, thread_id, message_id, at in rows:
        if message_id is None or at is None:
            continue
        mark = (float(at), row_id, str(message_id))
        place = (str(chat_id), None if thread_id is None else str(thread_id))
        if place in places and mark > newest.get(place, (float("-inf"), 0, "")):
            newest[place] = mark
    heard = []
    for chat in chosen:
        mark = newest.get((chat.chat_id, chat.thread_id))
        heard.append(LastHeard(
            chat_id=chat.chat_id, chat_type=chat.chat_type, thread_id=chat.thread_id,
            message_id=None if mark is None else mark[2], message_at=None if mark is None else mark[0],
            session_started_at=chat.started_at,
        ))  # fmt: skip
    return sorted(heard, key=lambda h: h.active_at, reverse=True)


class _Chat:
    """One chat (thread) while its open sessions are gathered."""

    __slots__ = ("active", "chat_id", "chat_type", "keys", "started_at", "thread_id")

    def __init__(self, chat_id: str, thread_id: str | None) -> None:
        self.chat_id = chat_id
        self.thread_id = thread_id
        self.chat_type: str | None = None
        self.keys: list[str] = []
        self.started_at = float("-inf")
        self.active = float("-inf")

    def add(self, key: str, chat_type: str | None, started_at: float, active: float | None) -> None:
        self.keys.append(key)
        self.chat_type = max(filter(None, (self.chat_type, chat_type)), default=None)
        self.started_at = max(self.started_at, started_at)
        self.active = max(self.active, started_at if active is None else active)

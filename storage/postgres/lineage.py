"""Lineage on PostgreSQL: the queries of ``storage/lineage.py`` (splitting for compression, walking a chain,
resolving a title), as coroutines of an asyncpg connection.

``split_session`` runs inside the store's transaction. It locks the parent's row first
(``SELECT ... FOR UPDATE``, as an append does), so two splits of one session, or a split and an
append, take turns, in this process or another: the second split finds the parent ended (the first
reason stays) and its child takes the chain's next number, as it would after SQLite's single
writer. Two chains whose titles share a base can still split at the same moment and pick the same
number; the title's unique index makes one wait for the other, and the loser counts again.

A chain is read in one snapshot (``REPEATABLE READ``): the walk up and the walk down agree.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from storage.errors import SessionNotFoundError, TitleInUseError
from storage.lineage import END_COMPRESSION, newest_path, walk_queries
from storage.postgres import messages
from storage.postgres.connection import Connection
from storage.postgres.sessions import SESSION_SELECT, try_insert_session
from storage.postgres.text import clean
from storage.records import NewMessage, SessionRecord
from storage.sessions import NewSession, session_from_row
from storage.titles import chain_title_range, next_numbered_title, normalize_title

__all__ = ["chain", "resolve_title", "split_session"]

_TITLE_TRIES: Final = 100  # each lost race means another session took a number: the count moves on

_ANCESTORS, _DESCENDANTS = walk_queries("$1::text")

_PARENT: Final = SESSION_SELECT + " WHERE s.id = $1 FOR UPDATE OF s"


async def split_session(
    conn: Connection, *, parent_id: str, new: tuple[NewMessage, ...], system_prompt: str | None, child_id: str,
    now: float,
) -> SessionRecord:  # fmt: skip
    """End ``parent_id`` for compression (unless it ended already) and open its child holding ``new``."""
    parent_id = clean(parent_id)
    row = await conn.fetchrow(_PARENT, parent_id)
    if row is None:
        raise SessionNotFoundError(parent_id)
    parent = session_from_row(row)
    await conn.execute(
        "UPDATE sessions SET ended_at = $2, end_reason = $3 WHERE id = $1 AND ended_at IS NULL",
        parent_id, now, END_COMPRESSION,
    )  # fmt: skip
    fields = NewSession(
        session_key=parent.session_key, platform=parent.platform, chat_id=parent.chat_id, chat_type=parent.chat_type,
        thread_id=parent.thread_id, user_id=parent.user_id, title=None, model=parent.model,
        system_prompt=system_prompt if system_prompt is not None else parent.system_prompt,
        tool_specs=parent.tool_specs,  # a compaction continues the conversation: the same tools
        parent_session_id=parent_id,
    )  # fmt: skip
    child = await _insert_child(conn, fields, parent.title, child_id=child_id, now=now)
    if not new:
        return child
    records = await messages.append(conn, child.id, new, None, now)
    return replace(child, message_count=records[-1].seq)


async def _insert_child(
    conn: Connection, fields: NewSession, parent_title: str | None, *, child_id: str, now: float
) -> SessionRecord:
    """The child's row, titled with the next free number of the parent's chain (counted again after a lost race)."""
    title = None
    for _ in range(_TITLE_TRIES):
        title = await _next_title(conn, parent_title) if parent_title else None
        child = await try_insert_session(conn, replace(fields, title=title), session_id=child_id, started_at=now)
        if child is not None:
            return child
    holder = await conn.fetchval("SELECT id FROM sessions WHERE title = $1", title)
    raise TitleInUseError(title or "", holder or "")


async def _next_title(conn: Connection, title: str) -> str:
    low, high = chain_title_range(title)
    rows = await conn.fetch("SELECT title FROM sessions WHERE title >= $1 AND title < $2", low, high)
    return next_numbered_title(title, (row[0] for row in rows))


async def chain(conn: Connection, session_id: str) -> list[SessionRecord]:
    """Root ... ``session_id`` ... newest descendant (following the newest child at each step), in one snapshot."""
    session_id = clean(session_id)
    async with conn.transaction(readonly=True, isolation="repeatable_read"):
        return await _chain(conn, session_id)


async def _chain(conn: Connection, session_id: str) -> list[SessionRecord]:
    ancestors = [session_from_row(row) for row in await conn.fetch(_ANCESTORS, session_id)]
    if not ancestors or ancestors[-1].id != session_id:
        raise SessionNotFoundError(session_id)
    descendants = [session_from_row(row) for row in await conn.fetch(_DESCENDANTS, session_id)]
    return ancestors + newest_path(session_id, descendants)


async def resolve_title(conn: Connection, title: str) -> SessionRecord | None:
    """The newest session of the chain containing the session titled exactly ``title`` (as cleaned)."""
    wanted = normalize_title(title)
    if wanted is None:
        return None
    async with conn.transaction(readonly=True, isolation="repeatable_read"):
        holder = await conn.fetchval("SELECT id FROM sessions WHERE title = $1", wanted)
        if holder is None:
            return None
        return (await _chain(conn, holder))[-1]

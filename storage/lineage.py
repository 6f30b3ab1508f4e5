"""Lineage: compression splits a session into a chain of sessions linked by ``parent_session_id``.

``split_session`` runs as one write operation (so one transaction): the
parent is ended with ``end_reason='compression'`` unless it already ended (the
first reason wins), and a child is created with the parent's routing fields,
the next title of the chain and the compacted messages.

A chain is walked upwards through parents to the root, and downwards by
following, at each step, the newest child.
"""

from __future__ import annotations

import sqlite3
from typing import Final

import aiosqlite

from storage.errors import SessionNotFoundError
from storage.messages import AppendRequest, insert_appends
from storage.records import SessionRecord
from storage.sessions import SESSION_SELECT, NewSession, insert_session, session_by_id, session_from_row
from storage.titles import next_title_in_chain, normalize_title

__all__ = ["END_COMPRESSION", "chain", "newest_path", "resolve_title", "split_session", "walk_queries"]

END_COMPRESSION: Final = "compression"
_MAX_DEPTH: Final = 10_000  # a guard against a cycle written by hand


def walk_queries(session_id: str) -> tuple[str, str]:
    """The walk up from a session to its root (the session last) and the walk down to every session below it, with
    ``session_id`` standing for the session's id (``?`` in SQLite, ``$1::text`` in PostgreSQL); both engines'
    ``SESSION_SELECT`` select the same columns, so either engine's serves."""
    up = f"""
        WITH RECURSIVE up(id, depth) AS (
            SELECT {session_id}, 0
            UNION ALL
            SELECT s.parent_session_id, up.depth + 1 FROM sessions AS s JOIN up ON s.id = up.id
            WHERE s.parent_session_id IS NOT NULL AND up.depth < {_MAX_DEPTH}
        )
        {SESSION_SELECT} JOIN up ON up.id = s.id ORDER BY up.depth DESC
    """
    down = f"""
        WITH RECURSIVE down(id, depth) AS (
            SELECT id, 1 FROM sessions WHERE parent_session_id = {session_id}
            UNION ALL
            SELECT s.id, down.depth + 1 FROM sessions AS s JOIN down ON s.parent_session_id = down.id
            WHERE down.depth < {_MAX_DEPTH}
        )
        {SESSION_SELECT} JOIN down ON down.id = s.id
    """
    return up, down


_ANCESTORS, _DESCENDANTS = walk_queries("?")


def split_session(
    conn: sqlite3.Connection,
    *,
    parent_id: str,
    request: AppendRequest,
    system_prompt: str | None,
    child_id: str,
    now: float,
) -> SessionRecord:
    parent = session_by_id(conn, parent_id)
    if parent is None:
        raise SessionNotFoundError(parent_id)
    title = next_title_in_chain(conn, parent.title) if parent.title else None
    conn.execute(
        "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
        (now, END_COMPRESSION, parent_id),
    )
    child = insert_session(
        conn,
        NewSession(
            session_key=parent.session_key,
            platform=parent.platform,
            chat_id=parent.chat_id,
            chat_type=parent.chat_type,
            thread_id=parent.thread_id,
            user_id=parent.user_id,
            title=title,
            model=parent.model,
            system_prompt=system_prompt if system_prompt is not None else parent.system_prompt,
            parent_session_id=parent_id,
            tool_specs=parent.tool_specs,  # a compaction continues the conversation: the same tools
        ),
        session_id=child_id,
        started_at=now,
    )
    if request.messages:
        (result,) = insert_appends(conn, [AppendRequest(child_id, request.messages, request.values)], now)
        if isinstance(result, Exception):
            raise result
    return session_by_id(conn, child_id) or child


async def chain(conn: aiosqlite.Connection, session_id: str) -> list[SessionRecord]:
    """Root ... ``session_id`` ... newest descendant (following the newest child at each step)."""
    ancestors = [session_from_row(row) for row in await conn.execute_fetchall(_ANCESTORS, (session_id,))]
    if not ancestors or ancestors[-1].id != session_id:
        raise SessionNotFoundError(session_id)
    descendants = [session_from_row(row) for row in await conn.execute_fetchall(_DESCENDANTS, (session_id,))]
    return ancestors + newest_path(session_id, descendants)


def newest_path(start: str, descendants: list[SessionRecord]) -> list[SessionRecord]:
    """From ``start`` down through ``descendants`` (every session below it), taking the newest child at each step."""
    newest_child: dict[str, SessionRecord] = {}
    for record in descendants:
        parent = record.parent_session_id or ""
        current = newest_child.get(parent)
        if current is None or (record.started_at, record.id) > (current.started_at, current.id):
            newest_child[parent] = record
    path: list[SessionRecord] = []
    cursor = start
    while cursor in newest_child and len(path) <= _MAX_DEPTH:
        cursor_record = newest_child[cursor]
        path.append(cursor_record)
        cursor = cursor_record.id
    return path


async def resolve_title(conn: aiosqlite.Connection, title: str) -> SessionRecord | None:
    """The newest session of the chain containing the session titled exactly ``title``."""
    rows = await conn.execute_fetchall("SELECT id FROM sessions WHERE title = ?", (normalize_title(title),))
    if not rows:
        return None
    return (await chain(conn, rows[0][0]))[-1]

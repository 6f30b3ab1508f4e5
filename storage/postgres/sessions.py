"""Session rows on PostgreSQL: the queries of ``storage/sessions.py``, as coroutines of an asyncpg connection.

Write functions run inside the store's transaction (``PostgresStore._write``); read functions on a
pooled connection. ``message_count`` is the session's last ``seq`` (``sessions.last_seq``), read with the row.

Where SQLite's single writer makes a check and the write that follows one step, two PostgreSQL
transactions can pass the same check at once; the database's own constraints decide then:

* a title is claimed by the ``sessions_title`` unique index. An insert claims it with
  ``ON CONFLICT DO NOTHING`` (which waits for a transaction claiming it at the same moment, and
  then sees its row), a title change under a savepoint; either way the loser gets
  ``TitleInUseError`` naming the session that holds it, never a driver error;
* a system prompt (and a session's tool list, interned the same way) is stored once per digest: a writer that finds none inserts it with
  ``ON CONFLICT DO NOTHING`` and reads it back when another one got there first.

Text goes in as ``storage/postgres/text.py`` says (a NUL becomes U+FFFD); the records returned hold
what was stored.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

import asyncpg

from storage.errors import SessionNotFoundError, TitleInUseError
from storage.postgres.connection import Connection
from storage.postgres.text import clean
from storage.records import SessionRecord, UsageTotals
from storage.sessions import NewSession, session_from_row
from storage.titles import clean_title

__all__ = [
    "SESSION_SELECT",
    "TITLE_INDEX",
    "end_session",
    "fetch_session",
    "find_open_session",
    "insert_session",
    "list_sessions",
    "set_title",
    "try_insert_session",
    "usage_since",
]

SESSION_SELECT: Final = """
    SELECT s.id, s.session_key, s.platform, s.chat_id, s.chat_type, s.thread_id, s.user_id, s.title,
           s.model, p.text, s.parent_session_id, s.started_at, s.ended_at, s.end_reason,
           s.last_seq,
           s.input_tokens, s.output_tokens, s.cache_read_tokens,
           s.cache_write_tokens, s.last_prompt_tokens, s.cost_usd, t.text
    FROM sessions AS s LEFT JOIN prompts AS p ON p.id = s.prompt_id LEFT JOIN prompts AS t ON t.id = s.tools_id
"""

TITLE_INDEX: Final = "sessions_title"
"""The unique index that keeps titles apart (``storage/postgres/schema.py``)."""

_BY_ID: Final = SESSION_SELECT + " WHERE s.id = $1"

_INSERT: Final = """
    INSERT INTO sessions (id, session_key, platform, chat_id, chat_type, thread_id, user_id, title, model,
                          prompt_id, parent_session_id, started_at, tools_id)
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
    ON CONFLICT (title) WHERE title IS NOT NULL DO NOTHING
    RETURNING 1
"""


async def fetch_session(conn: Connection, session_id: str) -> SessionRecord | None:
    row = await conn.fetchrow(_BY_ID, clean(session_id))
    return session_from_row(row) if row is not None else None


async def _title_holder(conn: Connection, title: str) -> str | None:
    holder: str | None = await conn.fetchval("SELECT id FROM sessions WHERE title = $1", title)
    return holder


async def _intern_prompt(conn: Connection, text: str) -> int:
    """The id of ``text`` in the prompt table, adding it the first time it is seen."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    found = await conn.fetchval("SELECT id FROM prompts WHERE digest = $1", digest)
    if found is None:
        found = await conn.fetchval(
            "INSERT INTO prompts (digest, text) VALUES ($1, $2) ON CONFLICT (digest) DO NOTHING RETURNING id",
            digest, text,
        )  # fmt: skip
    if found is None:  # another transaction stored it since our first look; this statement sees it
        found = await conn.fetchval("SELECT id FROM prompts WHERE digest = $1", digest)
    return int(found)


def _stored(new: NewSession) -> NewSession:
    """``new`` as PostgreSQL will hold it (no NUL in any text)."""
    return replace(
        new, session_key=clean(new.session_key), platform=clean(new.platform), chat_id=clean(new.chat_id),
        chat_type=clean(new.chat_type), thread_id=clean(new.thread_id), user_id=clean(new.user_id),
        model=clean(new.model), system_prompt=clean(new.system_prompt),
        parent_session_id=clean(new.parent_session_id), tool_specs=clean(new.tool_specs),
    )  # fmt: skip


async def try_insert_session(
    conn: Connection, new: NewSession, *, session_id: str, started_at: float
) -> SessionRecord | None:
    """Insert a session row (``new.title`` already cleaned); None, with nothing inserted, when another session holds
    the title. ``SessionNotFoundError`` for an unknown parent (the transaction is then spoilt: raise it on)."""
    new, session_id = _stored(new), clean(session_id)
    prompt_id = await _intern_prompt(conn, new.system_prompt) if new.system_prompt is not None else None
    tools_id = await _intern_prompt(conn, new.tool_specs) if new.tool_specs is not None else None
    try:
        inserted = await conn.fetchval(
            _INSERT, session_id, new.session_key, new.platform, new.chat_id, new.chat_type, new.thread_id,
            new.user_id, new.title, new.model, prompt_id, new.parent_session_id, started_at, tools_id,
        )  # fmt: skip
    except asyncpg.ForeignKeyViolationError as error:
        raise SessionNotFoundError(new.parent_session_id or "") from error
    if inserted is None:
        return None
    return SessionRecord(
        session_id, new.session_key, new.platform, new.chat_id, new.chat_type, new.thread_id, new.user_id,
        new.title, new.model, new.system_prompt, new.parent_session_id, started_at, None, None,
        0, 0, 0, 0, 0, 0, 0.0, new.tool_specs,
    )  # fmt: skip


async def insert_session(conn: Connection, new: NewSession, *, session_id: str, started_at: float) -> SessionRecord:
    """Insert a session row (``new.title`` already cleaned); ``TitleInUseError`` when another session holds the title,
    ``SessionNotFoundError`` for an unknown parent."""
    record = await try_insert_session(conn, new, session_id=session_id, started_at=started_at)
    if record is None:
        title = new.title or ""
        raise TitleInUseError(title, await _title_holder(conn, title) or "")
    return record


async def end_session(conn: Connection, session_id: str, reason: str, *, ended_at: float) -> bool:
    """End an open session; False (and nothing changed) if it had already ended."""
    session_id = clean(session_id)
    ended = await conn.fetchval(
        "UPDATE sessions SET ended_at = $2, end_reason = $3 WHERE id = $1 AND ended_at IS NULL RETURNING 1",
        session_id, ended_at, clean(reason),
    )  # fmt: skip
    if ended is not None:
        return True
    if await conn.fetchval("SELECT 1 FROM sessions WHERE id = $1", session_id) is None:
        raise SessionNotFoundError(session_id)
    return False


async def set_title(conn: Connection, session_id: str, title: str | None) -> str | None:
    """Set (or with None/blank, clear) a session's title; returns the cleaned title."""
    cleaned, session_id = clean_title(title), clean(session_id)
    try:
        async with conn.transaction():  # a savepoint: the holder can still be read when the title is taken
            updated = await conn.fetchval("UPDATE sessions SET title = $2 WHERE id = $1 RETURNING 1", session_id,
                                          cleaned)  # fmt: skip
    except asyncpg.UniqueViolationError as error:
        if error.constraint_name != TITLE_INDEX or cleaned is None:
            raise
        raise TitleInUseError(cleaned, await _title_holder(conn, cleaned) or "") from error
    if updated is None:
        raise SessionNotFoundError(session_id)
    return cleaned


async def usage_since(conn: Connection, *, since: float) -> UsageTotals:
    """Model calls made at or after ``since`` (epoch seconds), summed over every session."""
    row = await conn.fetchrow(
        """SELECT COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                  COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0),
                  COALESCE(SUM(cost_usd), 0.0)
           FROM usage WHERE at >= $1""",
        since,
    )
    return UsageTotals(*_ints(row[:5]), float(row[5]))


def _ints(values: Sequence[Any]) -> list[int]:
    return [int(v) for v in values]  # SUM of bigint is numeric: Decimal in Python


async def list_sessions(conn: Connection, *, platform: str | None = None, limit: int = 50) -> list[SessionRecord]:
    """Newest first; a negative ``limit`` is no limit, as in SQLite."""
    at_most = limit if limit >= 0 else None  # LIMIT NULL is LIMIT ALL
    if platform is None:
        rows = await conn.fetch(f"{SESSION_SELECT} ORDER BY s.started_at DESC, s.id DESC LIMIT $1", at_most)
    else:
        rows = await conn.fetch(
            f"{SESSION_SELECT} WHERE s.platform = $1 ORDER BY s.started_at DESC, s.id DESC LIMIT $2",
            clean(platform), at_most,
        )  # fmt: skip
    return [session_from_row(row) for row in rows]


async def find_open_session(conn: Connection, session_key: str) -> SessionRecord | None:
    """The newest session of a routing key that has not ended."""
    row = await conn.fetchrow(
        f"""{SESSION_SELECT} WHERE s.session_key = $1 AND s.ended_at IS NULL
            ORDER BY s.started_at DESC, s.id DESC LIMIT 1""",
        clean(session_key),
    )
    return session_from_row(row) if row is not None else None

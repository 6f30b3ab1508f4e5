"""Session rows: creating, ending, titling, counting usage, and the queries over them.

Write functions are plain functions of the writer's ``sqlite3.Connection`` and
run inside the writer's transaction, in its thread; read functions are
coroutines on an aiosqlite reader connection.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import aiosqlite

from storage.engine.bulk import json_result
from storage.errors import SessionNotFoundError, TitleInUseError
from storage.records import SessionRecord, UsageTotals
from storage.titles import clean_title

__all__ = [
    "SESSION_SELECT",
    "NewSession",
    "Usage",
    "add_usage_all",
    "end_session",
    "fetch_session",
    "find_open_session",
    "insert_session",
    "list_sessions",
    "session_by_id",
    "session_from_row",
    "set_title",
    "usage_since",
]

SESSION_SELECT: Final = """
    SELECT s.id, s.session_key, s.platform, s.chat_id, s.chat_type, s.thread_id, s.user_id, s.title,
           s.model, p.text, s.parent_session_id, s.started_at, s.ended_at, s.end_reason,
           (SELECT COALESCE(MAX(m.seq), 0) FROM messages AS m WHERE m.session_id = s.id),
           s.input_tokens, s.output_tokens, s.cache_read_tokens,
           s.cache_write_tokens, s.last_prompt_tokens, s.cost_usd, t.text
    FROM sessions AS s LEFT JOIN prompts AS p ON p.id = s.prompt_id LEFT JOIN prompts AS t ON t.id = s.tools_id
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class NewSession:
    """The routing and model fields a session starts with."""

    session_key: str
    platform: str
    chat_id: str
    chat_type: str | None = None
    thread_id: str | None = None
    user_id: str | None = None
    title: str | None = None
    model: str | None = None
    system_prompt: str | None = None
    parent_session_id: str | None = None
    tool_specs: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Usage:
    """What one model call cost; counters are added, ``last_prompt_tokens`` replaces."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    last_prompt_tokens: int = 0
    cost_usd: float = 0.0


def session_from_row(row: Sequence[Any]) -> SessionRecord:
    """A ``SessionRecord`` from a row selected with ``SESSION_SELECT``."""
    return SessionRecord(*row)


_BY_ID: Final = SESSION_SELECT + " WHERE s.id = ?"


async def fetch_session(conn: aiosqlite.Connection, session_id: str) -> SessionRecord | None:
    rows = await conn.execute_fetchall(_BY_ID, (session_id,))
    return session_from_row(rows[0]) if rows else None


def session_by_id(conn: sqlite3.Connection, session_id: str) -> SessionRecord | None:
    """``fetch_session`` for the writer's thread."""
    row = conn.execute(_BY_ID, (session_id,)).fetchone()
    return session_from_row(row) if row else None


def _require_session(conn: sqlite3.Connection, session_id: str) -> None:
    if conn.execute("SELECT 1 FROM sessions WHERE id = ?", (session_id,)).fetchone() is None:
        raise SessionNotFoundError(session_id)


def _check_title_free(conn: sqlite3.Connection, title: str, session_id: str) -> None:
    row = conn.execute("SELECT id FROM sessions WHERE title = ? AND id != ?", (title, session_id)).fetchone()
    if row is not None:
        raise TitleInUseError(title, row[0])


def _intern_prompt(conn: sqlite3.Connection, text: str) -> int:
    """The id of ``text`` in the prompt table, adding it the first time it is seen (system prompts and
    tool lists alike: frozen texts many sessions share)."""
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    row = conn.execute("SELECT id FROM prompts WHERE digest = ?", (digest,)).fetchone()
    if row is not None:
        return int(row[0])
    cursor = conn.execute("INSERT INTO prompts (digest, text) VALUES (?, ?)", (digest, text))
    return int(cursor.lastrowid or 0)


def insert_session(conn: sqlite3.Connection, new: NewSession, *, session_id: str, started_at: float) -> SessionRecord:
    """Insert a session row (``new.title`` already cleaned). Checks come first: a refusal writes nothing."""
    title = new.title
    if title is not None:
        _check_title_free(conn, title, session_id)
    if new.parent_session_id is not None:
        _require_session(conn, new.parent_session_id)
    prompt_id = _intern_prompt(conn, new.system_prompt) if new.system_prompt is not None else None
    tools_id = _intern_prompt(conn, new.tool_specs) if new.tool_specs is not None else None
    conn.execute(
        """INSERT INTO sessions (id, session_key, platform, chat_id, chat_type, thread_id, user_id, title,
                                 model, prompt_id, parent_session_id, started_at, tools_id)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)""",
        (
            session_id,
            new.session_key,
            new.platform,
            new.chat_id,
            new.chat_type,
            new.thread_id,
            new.user_id,
            title,
            new.model,
            prompt_id,
            new.parent_session_id,
            started_at,
            tools_id,
        ),
    )
    return SessionRecord(
        session_id, new.session_key, new.platform, new.chat_id, new.chat_type, new.thread_id, new.user_id,
        title, new.model, new.system_prompt, new.parent_session_id, started_at, None, None,
        0, 0, 0, 0, 0, 0, 0.0, new.tool_specs,
    )  # fmt: skip


def end_session(conn: sqlite3.Connection, session_id: str, reason: str, *, ended_at: float) -> bool:
    """End an open session; False (and nothing changed) if it had already ended."""
    if not reason:
        raise ValueError("an end reason is required")
    cursor = conn.execute(
        "UPDATE sessions SET ended_at = ?, end_reason = ? WHERE id = ? AND ended_at IS NULL",
        (ended_at, reason, session_id),
    )
    if cursor.rowcount == 1:
        return True
    _require_session(conn, session_id)
    return False


def set_title(conn: sqlite3.Connection, session_id: str, title: str | None) -> str | None:
    """Set (or with None/blank, clear) a session's title; returns the cleaned title."""
    cleaned = clean_title(title)
    if cleaned is not None:
        _check_title_free(conn, cleaned, session_id)
    cursor = conn.execute("UPDATE sessions SET title = ? WHERE id = ?", (cleaned, session_id))
    if cursor.rowcount == 0:
        raise SessionNotFoundError(session_id)
    return cleaned


def add_usage_all(
    conn: sqlite3.Connection, items: Sequence[tuple[str, Usage]], now: float, *, sessions_exist: bool = False
) -> list[None | SessionNotFoundError]:
    """A bulk kind: ``(session_id, usage)`` per model call; the counters of each session move once, by the sum
    of its calls (``last_prompt_tokens`` from its last call), and every call gets its row in the usage log.

    ``sessions_exist``: the caller knows every session is there (it just appended to them), so
    they are not looked up first."""
    totals: dict[str, list[Any]] = {}
    for session_id, u in items:
        total = totals.setdefault(session_id, [session_id, 0, 0, 0, 0, 0, 0.0])
        total[1] += u.input_tokens
        total[2] += u.output_tokens
        total[3] += u.cache_read_tokens
        total[4] += u.cache_write_tokens
        total[5] = u.last_prompt_tokens
        total[6] += u.cost_usd
    totals_json = json.dumps(list(totals.values()), ensure_ascii=False)
    found = set(totals) if sessions_exist else set(
        json_result(
            conn, "SELECT json_group_array(id) FROM sessions WHERE id IN (SELECT j.value->>0 FROM json_each(?) AS j)",
            (totals_json,),
        )
    )
    conn.execute(
        """UPDATE sessions SET input_tokens = input_tokens + (j.value->>1),
                               output_tokens = output_tokens + (j.value->>2),
                               cache_read_tokens = cache_read_tokens + (j.value->>3),
                               cache_write_tokens = cache_write_tokens + (j.value->>4),
                               last_prompt_tokens = j.value->>5, cost_usd = cost_usd + (j.value->>6)
           FROM json_each(?) AS j WHERE sessions.id = j.value->>0""",
        (totals_json,),
    )
    logged = [
        (session_id, u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cost_usd)
        for session_id, u in items
        if session_id in found
    ]
    if logged:
        conn.execute(
            """INSERT INTO usage (session_id, at, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
                                  cost_usd)
               SELECT j.value->>0, ?1, j.value->>1, j.value->>2, j.value->>3, j.value->>4, j.value->>5
               FROM json_each(?2) AS j""",
            (now, json.dumps(logged, ensure_ascii=False)),
        )
    return [None if session_id in found else SessionNotFoundError(session_id) for session_id, _ in items]


async def usage_since(conn: aiosqlite.Connection, *, since: float) -> UsageTotals:
    """Model calls made at or after ``since`` (epoch seconds), summed over every session."""
    rows = await conn.execute_fetchall(
        """SELECT COUNT(*), COALESCE(SUM(input_tokens), 0), COALESCE(SUM(output_tokens), 0),
                  COALESCE(SUM(cache_read_tokens), 0), COALESCE(SUM(cache_write_tokens), 0),
                  COALESCE(SUM(cost_usd), 0.0)
           FROM usage WHERE at >= ?""",
        (since,),
    )
    return UsageTotals(*rows[0])


async def list_sessions(
    conn: aiosqlite.Connection, *, platform: str | None = None, limit: int = 50
) -> list[SessionRecord]:
    """Newest first."""
    where, params = ("WHERE s.platform = ?", (platform,)) if platform is not None else ("", ())
    rows = await conn.execute_fetchall(
        f"{SESSION_SELECT} {where} ORDER BY s.started_at DESC, s.id DESC LIMIT ?", (*params, limit)
    )
    return [session_from_row(row) for row in rows]


async def find_open_session(conn: aiosqlite.Connection, session_key: str) -> SessionRecord | None:
    """The newest session of a routing key that has not ended."""
    rows = await conn.execute_fetchall(
        f"{SESSION_SELECT} WHERE s.session_key = ? AND s.ended_at IS NULL ORDER BY s.started_at DESC LIMIT 1",
        (session_key,),
    )
    return session_from_row(rows[0]) if rows else None

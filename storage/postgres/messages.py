"""Messages on PostgreSQL: appending in order with no gap in ``seq``, and reading a history back.

``append`` is one statement, one round trip however many messages there are. Its first step is an
``UPDATE`` of the session's row that moves ``sessions.last_seq`` past the new messages (and adds the
model call's usage to the counters): two writers appending to one session, in this process or
another, queue on that row's lock, and the second re-reads the row the first committed, so each
numbers on from the other's last message. The messages go in with ``INSERT ... SELECT FROM unnest``
numbered from the value the ``UPDATE`` started from; the usage log row with them. Text is stored as
``storage/postgres/text.py`` says (a NUL becomes U+FFFD); the records returned hold what was stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from storage.errors import SessionNotFoundError
from storage.postgres.connection import Connection
from storage.postgres.text import clean, clean_json
from storage.records import (
    MessageRecord,
    NewMessage,
    media_from_json,
    media_to_json,
    message_record,
    tool_calls_from_json,
    tool_calls_to_json,
)
from storage.sessions import Usage

__all__ = ["MESSAGE_COLUMNS", "append", "load", "record_from_row"]

MESSAGE_COLUMNS: Final = (
    "id, session_id, seq, role, content, tool_calls::text, tool_call_id, tool_name, reasoning, token_estimate, "
    "created_at, platform_message_id, media::text"
)

_APPEND: Final = """
    WITH session AS (
        UPDATE sessions SET last_seq = last_seq + $2,
               input_tokens = input_tokens + $13, output_tokens = output_tokens + $14,
               cache_read_tokens = cache_read_tokens + $15, cache_write_tokens = cache_write_tokens + $16,
               last_prompt_tokens = CASE WHEN $18 THEN $17 ELSE last_prompt_tokens END,
               cost_usd = cost_usd + $19
        WHERE id = $1
        RETURNING last_seq - $2 AS base
    ), added AS (
        INSERT INTO messages (session_id, seq, role, content, tool_calls, tool_call_id, tool_name, reasoning,
                              token_estimate, created_at, platform_message_id, media)
        SELECT $1, session.base + m.n, m.role, m.content, m.tool_calls::jsonb, m.tool_call_id, m.tool_name,
               m.reasoning, m.token_estimate, $3, m.platform_message_id, m.media::jsonb
        FROM session, unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::int[],
                             $11::text[], $12::text[]) WITH ORDINALITY
             AS m(role, content, tool_calls, tool_call_id, tool_name, reasoning, token_estimate, platform_message_id,
                  media, n)
        RETURNING id, seq
    ), logged AS (
        INSERT INTO usage (session_id, at, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd)
        SELECT $1, $3, $13, $14, $15, $16, $19 FROM session WHERE $18
    )
    SELECT (SELECT base FROM session) AS base, (SELECT array_agg(id ORDER BY seq) FROM added) AS ids
"""


async def append(
    conn: Connection, session_id: str, new: Sequence[NewMessage], usage: Usage | None, now: float
) -> list[MessageRecord]:
    """Store ``new`` after the session's last message (and ``usage`` on its counters, with its usage log row), in one
    statement; the records, in order. ``SessionNotFoundError`` for an unknown session, with nothing written."""
    stored = [_stored(m) for m in new]
    columns: list[list[Any]] = [list(col) for col in zip(*(_values(m) for m in stored))] or [[] for _ in range(9)]
    u = usage or Usage()
    row = await conn.fetchrow(
        _APPEND, session_id, len(stored), now, *columns, u.input_tokens, u.output_tokens, u.cache_read_tokens,
        u.cache_write_tokens, u.last_prompt_tokens, usage is not None, u.cost_usd,
    )  # fmt: skip
    if row is None or row["base"] is None:
        raise SessionNotFoundError(session_id)
    base, ids = row["base"], row["ids"] or []
    return [_record(message_id, session_id, base + n, now, m) for n, (message_id, m) in enumerate(zip(ids, stored), 1)]


async def load(conn: Connection, session_id: str, *, after_seq: int = 0) -> list[MessageRecord]:
    """The session's messages after ``after_seq``, in order (no check that the session exists)."""
    rows = await conn.fetch(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = $1 AND seq > $2 ORDER BY seq",  # noqa: S608
        session_id, after_seq,
    )  # fmt: skip
    return [record_from_row(row) for row in rows]


def record_from_row(row: Sequence[Any]) -> MessageRecord:
    """A ``MessageRecord`` from a row selected with ``MESSAGE_COLUMNS``."""
    return message_record(
        row[0], row[1], row[2], row[3], row[4], tool_calls_from_json(row[5]) if row[5] else (),
        row[6], row[7], row[8], row[9], row[10], row[11], media_from_json(row[12]) if row[12] else (),
    )  # fmt: skip


def _stored(m: NewMessage) -> NewMessage:
    """``m`` as PostgreSQL will hold it (no NUL anywhere)."""
    texts = (m.content, m.tool_call_id, m.tool_name, m.reasoning, m.platform_message_id)
    calls = tool_calls_to_json(m.tool_calls)
    media = media_to_json(m.media)
    if not any(t is not None and "\0" in t for t in (*texts, calls, media)) and (
        (calls is None or "\\u0000" not in calls) and (media is None or "\\u0000" not in media)
    ):
        return m
    return replace(
        m, content=clean(m.content), tool_call_id=clean(m.tool_call_id), tool_name=clean(m.tool_name),
        reasoning=clean(m.reasoning), platform_message_id=clean(m.platform_message_id),
        tool_calls=tool_calls_from_json(clean_json(calls)), media=media_from_json(clean_json(media)),
    )  # fmt: skip


def _values(m: NewMessage) -> tuple[Any, ...]:
    return (
        m.role, m.content, tool_calls_to_json(m.tool_calls), m.tool_call_id, m.tool_name, m.reasoning,
        m.token_estimate, m.platform_message_id, media_to_json(m.media),
    )  # fmt: skip


def _record(message_id: int, session_id: str, seq: int, now: float, m: NewMessage) -> MessageRecord:
    return message_record(
        message_id, session_id, seq, m.role, m.content, m.tool_calls, m.tool_call_id, m.tool_name, m.reasoning,
        m.token_estimate, now, m.platform_message_id, m.media,
    )  # fmt: skip

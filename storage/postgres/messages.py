"""Messages on PostgreSQL: appending in order with no gap in ``seq``, and reading a history back.

``append`` runs inside the caller's transaction. It first locks the session's row
(``SELECT ... FOR UPDATE``): two writers appending to one session, in this process or another,
take turns there, so each numbers on from the last ``seq`` the other committed. The rows go in
with one ``INSERT ... SELECT FROM unnest(...)``, one round trip however many messages there are.
Text is stored as ``storage/postgres/text.py`` says (a NUL becomes U+FFFD); the records returned
hold what was stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any, Final

from storage.errors import SessionNotFoundError
from storage.postgres.sessions import add_usage
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

_INSERT: Final = """
    INSERT INTO messages (session_id, seq, role, content, tool_calls, tool_call_id, tool_name, reasoning,
                          token_estimate, created_at, platform_message_id, media)
    SELECT $1, $2 + n, role, content, tool_calls::jsonb, tool_call_id, tool_name, reasoning, token_estimate, $3,
           platform_message_id, media::jsonb
    FROM unnest($4::text[], $5::text[], $6::text[], $7::text[], $8::text[], $9::text[], $10::int[], $11::text[],
                $12::text[]) WITH ORDINALITY
         AS m(role, content, tool_calls, tool_call_id, tool_name, reasoning, token_estimate, platform_message_id,
              media, n)
    ORDER BY n
    RETURNING id, seq
"""


async def append(
    conn: Connection, session_id: str, new: Sequence[NewMessage], usage: Usage | None, now: float
) -> list[MessageRecord]:
    """Store ``new`` after the session's last message (and ``usage`` on its counters); the records, in order.
    ``SessionNotFoundError`` for an unknown session, with nothing written."""
    if await conn.fetchval("SELECT 1 FROM sessions WHERE id = $1 FOR UPDATE", session_id) is None:
        raise SessionNotFoundError(session_id)
    records: list[MessageRecord] = []
    if new:
        last = await conn.fetchval("SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = $1", session_id)
        stored = [_stored(m) for m in new]
        columns: list[list[Any]] = [list(col) for col in zip(*(_values(m) for m in stored))]
        rows = await conn.fetch(_INSERT, session_id, last, now, *columns)
        records = [_record(row["id"], session_id, row["seq"], now, m) for row, m in zip(rows, stored)]
    if usage is not None:
        await add_usage(conn, session_id, usage, now)
    return records


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

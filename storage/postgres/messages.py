"""Messages on PostgreSQL: appending in order with no gap in ``seq``, and reading a history back.

``append`` is one statement, one round trip however many messages there are. Its first step is an
``UPDATE`` of the session's row that moves ``sessions.last_seq`` past the new messages (and adds the
model call's usage to the counters): two writers appending to one session, in this process or
another, queue on that row's lock, and the second re-reads the row the first committed, so each
numbers on from the other's last message. The messages go in with ``INSERT ... SELECT FROM unnest``
numbered from the value the ``UPDATE`` started from; the usage log row with them, and the words of
the vocabulary they use that it does not hold yet (``storage/postgres/vocabulary.py``), in one order
for every statement (byte order), so two statements adding the same new words wait for each other
instead of deadlocking. Text is stored as
``storage/postgres/text.py`` says (a NUL becomes U+FFFD); the records returned hold what was stored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from storage.errors import SessionNotFoundError
from storage.postgres.connection import Connection
from storage.postgres.text import clean, clean_json
from storage.postgres.vocabulary import KEPT
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

__all__ = ["MESSAGE_COLUMNS", "Append", "append", "append_many", "load", "record_from_row"]

MESSAGE_COLUMNS: Final = (
    "id, session_id, seq, role, content, tool_calls::text, tool_call_id, tool_name, reasoning, token_estimate, "
    "created_at, platform_message_id, media::text"
)

_APPEND: Final = """
    WITH asked AS (
        SELECT * FROM unnest($1::text[], $2::int[], $3::bigint[], $4::bigint[], $5::bigint[], $6::bigint[],
                             $7::bigint[], $8::bool[], $9::float8[])
            AS r(session_id, n, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
                 last_prompt_tokens, has_usage, cost_usd)
    ), session AS (
        UPDATE sessions AS s SET last_seq = s.last_seq + r.n,
               input_tokens = s.input_tokens + r.input_tokens, output_tokens = s.output_tokens + r.output_tokens,
               cache_read_tokens = s.cache_read_tokens + r.cache_read_tokens,
               cache_write_tokens = s.cache_write_tokens + r.cache_write_tokens,
               last_prompt_tokens = CASE WHEN r.has_usage THEN r.last_prompt_tokens ELSE s.last_prompt_tokens END,
               cost_usd = s.cost_usd + r.cost_usd
        FROM asked AS r WHERE s.id = r.session_id
        RETURNING s.id, s.last_seq - r.n AS base
    ), added AS (
        INSERT INTO messages (session_id, seq, role, content, tool_calls, tool_call_id, tool_name, reasoning,
                              token_estimate, created_at, platform_message_id, media)
        SELECT m.session_id, session.base + m.k, m.role, m.content, m.tool_calls::jsonb, m.tool_call_id, m.tool_name,
               m.reasoning, m.token_estimate, $10, m.platform_message_id, m.media::jsonb
        FROM unnest($11::text[], $12::int[], $13::text[], $14::text[], $15::text[], $16::text[], $17::text[],
                    $18::text[], $19::int[], $20::text[], $21::text[]) WITH ORDINALITY
             AS m(session_id, k, role, content, tool_calls, tool_call_id, tool_name, reasoning, token_estimate,
                  platform_message_id, media, position)
        JOIN session ON session.id = m.session_id
        ORDER BY m.position
        RETURNING id, session_id, seq, words
    ), known AS (
        INSERT INTO search_vocabulary (word)
        SELECT DISTINCT w.word COLLATE "C" FROM added, unnest(tsvector_to_array(added.words)) AS w(word)
        WHERE {kept}
        ORDER BY 1
        ON CONFLICT DO NOTHING
    ), logged AS (
        INSERT INTO usage (session_id, at, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd)
        SELECT r.session_id, $10, r.input_tokens, r.output_tokens, r.cache_read_tokens, r.cache_write_tokens, r.cost_usd
        FROM asked AS r JOIN session ON session.id = r.session_id WHERE r.has_usage
    )
    SELECT (SELECT array_agg(id ORDER BY id) FROM session) AS sessions,
           (SELECT array_agg(base ORDER BY id) FROM session) AS bases,
           (SELECT array_agg(id ORDER BY session_id, seq) FROM added) AS ids,
           (SELECT array_agg(session_id ORDER BY session_id, seq) FROM added) AS owners,
           (SELECT array_agg(seq ORDER BY session_id, seq) FROM added) AS seqs
""".format(kept=KEPT.format(word="w.word"))
"""Any number of appends, each to a different session, in one statement: the appends of many conversations at
once go to the server together (``storage/postgres/append_batch.py``), as SQLite's writer commits them in one
transaction. A session that does not exist has no ``session`` row, so nothing of its append is written."""


@dataclass(frozen=True, slots=True)
class Append:
    """One append: messages for a session (cleaned for PostgreSQL), and the model call's usage if any."""

    session_id: str
    messages: tuple[NewMessage, ...]
    usage: Usage | None

    @classmethod
    def of(cls, session_id: str, new: Sequence[NewMessage], usage: Usage | None) -> Append:
        return cls(clean(session_id), tuple(_stored(m) for m in new), usage)


async def append_many(
    conn: Connection, appends: Sequence[Append], now: float
) -> list[list[MessageRecord] | SessionNotFoundError]:
    """Store every append in one statement (their sessions all different): for each, in order, its records, or
    ``SessionNotFoundError`` when its session does not exist (nothing of it written; the others are)."""
    usages = [a.usage or Usage() for a in appends]
    asked = (
        [a.session_id for a in appends], [len(a.messages) for a in appends],
        [u.input_tokens for u in usages], [u.output_tokens for u in usages], [u.cache_read_tokens for u in usages],
        [u.cache_write_tokens for u in usages], [u.last_prompt_tokens for u in usages],
        [a.usage is not None for a in appends], [u.cost_usd for u in usages],
    )  # fmt: skip
    rows = [(a.session_id, k, *_values(m)) for a in appends for k, m in enumerate(a.messages, 1)]
    columns: list[list[Any]] = [list(col) for col in zip(*rows)] or [[] for _ in range(11)]
    found = await conn.fetchrow(_APPEND, *asked, now, *columns)
    bases = dict(zip(found["sessions"] or (), found["bases"] or ()))
    ids = {(owner, seq): i for owner, seq, i in zip(found["owners"] or (), found["seqs"] or (), found["ids"] or ())}
    results: list[list[MessageRecord] | SessionNotFoundError] = []
    for a in appends:
        base = bases.get(a.session_id)
        if base is None:
            results.append(SessionNotFoundError(a.session_id))
            continue
        results.append([
            _record(ids[(a.session_id, base + k)], a.session_id, base + k, now, m) for k, m in enumerate(a.messages, 1)
        ])  # fmt: skip
    return results


async def append(
    conn: Connection, session_id: str, new: Sequence[NewMessage], usage: Usage | None, now: float
) -> list[MessageRecord]:
    """Store ``new`` after the session's last message (and ``usage`` on its counters, with its usage log row), in one
    statement; the records, in order. ``SessionNotFoundError`` for an unknown session, with nothing written."""
    (result,) = await append_many(conn, [Append.of(session_id, new, usage)], now)
    if isinstance(result, SessionNotFoundError):
        raise result
    return result


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

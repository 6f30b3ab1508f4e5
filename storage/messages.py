"""Appending messages to sessions and reading them back.

An append is prepared in the caller's coroutine (JSON for tool calls, the CJK
search tokens) so the writer's transaction only binds ready values. Inside
the transaction (``insert_appends`` runs in the writer's thread) rows get
explicit ids and sequence numbers, which is safe because ``BEGIN IMMEDIATE``
holds the write lock: the writer remembers what it wrote last (``Sequences``)
and probes the database only for sessions it has not appended to yet, or
after another connection committed. Appends to sessions it knows may go in
as one statement with no transaction around it (``append_alone``): ids and
seqs are unique in the table, so a guess another connection overtook fails
whole and the batch is written again the careful way. Reads are coroutines
on a reader connection.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass
from json.encoder import encode_basestring  # type: ignore[attr-defined]
from typing import Any, Final

import aiosqlite

from storage.engine.bulk import BulkWrite
from storage.search.cjk import message_cjk_tokens
from storage.errors import SessionNotFoundError, StorageError
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

__all__ = [
    "MESSAGE_COLUMNS",
    "AppendRequest",
    "MessageAppend",
    "Sequences",
    "append_alone",
    "insert_appends",
    "last_seq",
    "load_messages",
    "prepare_append",
    "record_from_row",
]

MESSAGE_COLUMNS: Final = (
    "id, session_id, seq, role, content, tool_calls, tool_call_id, tool_name, "
    "reasoning, token_estimate, created_at, platform_message_id, media"
)

_PROBE: Final = """
    SELECT s.id, (SELECT MAX(m.seq) FROM messages AS m WHERE m.session_id = s.id)
    FROM sessions AS s WHERE s.id IN (SELECT value FROM json_each(?))
    UNION ALL
    SELECT NULL, (SELECT MAX(id) FROM messages)
"""
_COLUMNS_IN: Final = """
    messages (id, session_id, seq, created_at, role, content, tool_calls, tool_call_id,
              tool_name, reasoning, token_estimate, platform_message_id, search_cjk, media)
"""
# All rows of a batch in one statement: FTS5 flushes its pending terms into a new
# index segment at every statement boundary inside a transaction, so
# ``executemany`` would write one segment per message (slower, and far more
# merging later). JSON keeps types: text, integers and NULL.
_BULK_INSERT: Final = f"""
    INSERT INTO {_COLUMNS_IN}
    SELECT r.value->>0, r.value->>1, r.value->>2, ?1, r.value->>3, r.value->>4, r.value->>5, r.value->>6,
           r.value->>7, r.value->>8, r.value->>9, r.value->>10, r.value->>11, r.value->>12
    FROM json_each(?2) AS r
"""
# SQLite's JSON functions stop a string at a NUL character; such rows go in one by one.
_HAS_NUL: Final = "\\u0000"
_ROW_INSERT: Final = f"INSERT INTO {_COLUMNS_IN} VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"


@dataclass(frozen=True, slots=True)
class AppendRequest:
    """Messages for one session, with their column values ready to bind."""

    session_id: str
    messages: tuple[NewMessage, ...]
    values: tuple[tuple[Any, ...], ...]
    encoded: tuple[str, ...] = ()
    """Each message's ``values`` as JSON text (``_encode_values``), made by the caller: the writer only
    joins them with the row's id, session and seq. Empty: the writer encodes them itself."""
    usage: Usage | None = None
    """A model call's usage to add to the session in the same transaction (the call that produced them)."""
    then: BulkWrite | None = None
    """A write that goes in the same transaction only if these messages do (the reply that delivers them);
    the request's result is then ``(records, then's result)``."""


@dataclass(frozen=True, slots=True)
class MessageAppend:
    """A turn's final messages and their call's usage, stored with the rest of its end (``storage.ledger.TurnEnd``)."""

    session_id: str
    messages: Sequence[NewMessage]
    usage: Usage | None = None


def prepare_append(
    session_id: str, messages: Sequence[NewMessage], usage: Usage | None = None, *, then: BulkWrite | None = None
) -> AppendRequest:
    values = tuple(
        (
            m.role,
            m.content,
            tool_calls_to_json(m.tool_calls),
            m.tool_call_id,
            m.tool_name,
            m.reasoning,
            m.token_estimate,
            m.platform_message_id,
            message_cjk_tokens(m.content, m.tool_name, m.tool_calls),
            media_to_json(m.media),
        )
        for m in messages
    )
    return AppendRequest(session_id, tuple(messages), values, tuple(map(_encode_values, values)), usage, then)


_JSON: Final = json.JSONEncoder(ensure_ascii=False)
"""As ``json.dumps(..., ensure_ascii=False)``, made once (``dumps`` with an option makes an encoder per call)."""


def _encode_values(values: tuple[Any, ...]) -> str:
    """``values`` as the tail of a JSON row, ``"role", "content", ...]``: the writer puts ``[id, session, seq,`` first."""
    return _JSON.encode(values)[1:]


class Sequences:
    """The last message id, and each session's last ``seq``, as the writer connection left them.

    Lets a batch skip the probe for sessions it appended to before. Only the
    writer's thread touches it, around its writes. ``PRAGMA
    data_version`` changes exactly when another connection committed, so the
    values are dropped then; the writer also drops them when a transaction
    rolls back, or after any other kind of write that might touch messages.
    """

    _MAX_SESSIONS: Final = 20_000

    def __init__(self) -> None:
        self._data_version: int | None = None
        self.last_id: int | None = None
        self.last_seq: dict[str, int] = {}
        self.external_commits = 0
        """How many times another connection was found to have committed (read from other threads)."""

    def refresh(self, conn: sqlite3.Connection) -> None:
        """Call first thing in a write transaction, or just after a write made outside one."""
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        if version != self._data_version and self._data_version is not None:
            self.external_commits += 1
        if version != self._data_version or len(self.last_seq) > self._MAX_SESSIONS:
            self._data_version = version
            self.forget()

    def forget(self) -> None:
        self.last_id = None
        self.last_seq.clear()


def insert_appends(
    conn: sqlite3.Connection, requests: Sequence[AppendRequest], now: float, known: Sequences | None = None
) -> list[list[MessageRecord] | StorageError]:
    """Insert every request's messages; one result (records or error) per request, in order.

    Runs inside the caller's transaction. ``known`` (updated in place) saves probing sessions
    appended to before; without it every session of the batch is probed.
    """
    known = known if known is not None else Sequences()
    wanted = {request.session_id for request in requests}
    unknown = sorted(wanted - known.last_seq.keys())
    if unknown or known.last_id is None:
        for session_id, value in conn.execute(_PROBE, (json.dumps(unknown),)):
            if session_id is None:
                known.last_id = value or 0
            else:
                known.last_seq[session_id] = value or 0
    placed = _place(requests, now, known)
    if placed.rows:
        _insert_rows(conn, placed.rows, placed.payload, now)
    placed.keep(known)
    return placed.results


def append_alone(
    conn: sqlite3.Connection, requests: Sequence[AppendRequest], now: float, known: Sequences
) -> list[list[MessageRecord] | StorageError] | None:
    """Insert appends as one statement outside any transaction (SQLite commits it on its own), or None.

    Saves the ``BEGIN`` and the ``COMMIT`` of a transaction, each a trip from SQLite back to
    Python that must take the GIL from a busy event loop. Only for
    sessions ``known`` holds, and messages without NUL characters (those need a statement of their
    own); None, with nothing written, otherwise. Safe without the probe a transaction starts with:
    if another connection has appended since ``known`` was filled, an id or ``(session_id, seq)``
    of this statement is taken, it fails with ``sqlite3.IntegrityError`` and writes nothing (the
    caller forgets ``known`` and runs the batch in a transaction, probing afresh); a commit that
    did not collide is noticed just after (``Sequences.refresh``). What it buys shows in
    ``bench.storage``'s appends per second (``ratio_to_floor``).
    """
    if known.last_id is None or any(request.session_id not in known.last_seq for request in requests):
        return None
    placed = _place(requests, now, known)
    if not placed.rows or _HAS_NUL in placed.payload:
        return None
    conn.execute(_BULK_INSERT, (now, placed.payload))
    placed.keep(known)
    known.refresh(conn)  # another connection's commit that did not collide
    return placed.results


@dataclass(slots=True)
class _Placed:
    """A batch of appends with ids and seqs given, not yet written (``keep`` makes ``Sequences`` follow)."""

    results: list[list[MessageRecord] | StorageError]
    rows: list[tuple[int, str, int, tuple[Any, ...]]]  # (id, session, seq, values) of every row
    payload: str  # the same rows as one JSON array, from the values the callers encoded
    last_id: int
    last_seq: dict[str, int]

    def keep(self, known: Sequences) -> None:
        known.last_id = self.last_id
        known.last_seq.update(self.last_seq)


def _place(requests: Sequence[AppendRequest], now: float, known: Sequences) -> _Placed:
    last_id = known.last_id or 0
    last_seq: dict[str, int] = {}
    rows: list[tuple[int, str, int, tuple[Any, ...]]] = []
    texts: list[str] = []
    results: list[list[MessageRecord] | StorageError] = []
    for request in requests:
        session_id = request.session_id
        seq = last_seq.get(session_id, known.last_seq.get(session_id))
        if seq is None:
            results.append(SessionNotFoundError(session_id))
            continue
        records = []
        head = f",{encode_basestring(session_id)},"
        encoded = request.encoded or tuple(map(_encode_values, request.values))
        for message, values, tail in zip(request.messages, request.values, encoded):
            last_id += 1
            seq += 1
            rows.append((last_id, session_id, seq, values))
            texts.append(f"[{last_id}{head}{seq},{tail}")
            records.append(_record(last_id, session_id, seq, now, message))
        last_seq[session_id] = seq
        results.append(records)
    return _Placed(results, rows, f"[{','.join(texts)}]", last_id, last_seq)


def _insert_rows(
    conn: sqlite3.Connection, placed: list[tuple[int, str, int, tuple[Any, ...]]], payload: str, now: float
) -> None:
    """``payload``: the rows as a JSON array (``[id, session, seq, *values]`` each)."""
    if _HAS_NUL not in payload:
        conn.execute(_BULK_INSERT, (now, payload))
        return
    rows = [(message_id, session_id, seq, *values) for message_id, session_id, seq, values in placed]
    plain: list[tuple[Any, ...]] = []
    with_nul: list[tuple[Any, ...]] = []
    for row in rows:
        (with_nul if any(isinstance(v, str) and "\0" in v for v in row) else plain).append(row)
    if plain:
        conn.execute(_BULK_INSERT, (now, _JSON.encode(plain)))
    conn.executemany(_ROW_INSERT, [(*row[:3], now, *row[3:]) for row in with_nul])


def _record(message_id: int, session_id: str, seq: int, now: float, message: NewMessage) -> MessageRecord:
    return message_record(
        message_id,
        session_id,
        seq,
        message.role,
        message.content,
        message.tool_calls,
        message.tool_call_id,
        message.tool_name,
        message.reasoning,
        message.token_estimate,
        now,
        message.platform_message_id,
        message.media,
    )


def record_from_row(row: Sequence[Any]) -> MessageRecord:
    """A ``MessageRecord`` from a row selected with ``MESSAGE_COLUMNS``."""
    return message_record(
        row[0], row[1], row[2], row[3], row[4], tool_calls_from_json(row[5]) if row[5] else (),
        row[6], row[7], row[8], row[9], row[10], row[11], media_from_json(row[12]) if row[12] else (),
    )  # fmt: skip


async def load_messages(conn: aiosqlite.Connection, session_id: str, *, after_seq: int = 0) -> list[MessageRecord]:
    rows = await conn.execute_fetchall(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
        (session_id, after_seq),
    )
    return [record_from_row(row) for row in rows]


async def last_seq(conn: aiosqlite.Connection, session_id: str) -> int | None:
    """The last ``seq`` of a session (0 when empty), or None if there is no such session."""
    rows = await conn.execute_fetchall(
        "SELECT (SELECT MAX(m.seq) FROM messages AS m WHERE m.session_id = s.id) FROM sessions AS s WHERE s.id = ?",
        (session_id,),
    )
    if not rows:
        return None
    return rows[0][0] or 0

"""The schema, as an ordered list of forward migrations.

Version N of the schema is what migrations 1..N produce; ``LATEST`` is the
version this build writes. Adding a table later is one more ``Migration``
appended to ``MIGRATIONS`` (as version 4 did for DM pairing).
Never edit a migration that has shipped: databases out there already ran it.

Notes on the layout:

* System prompts live in ``prompts``, deduplicated by digest: sessions of one
  agent share a prompt of several kilobytes, and keeping it out of the
  ``sessions`` row keeps counter updates from rewriting it each time.
* ``messages`` rows are append-only: a ``(session_id, seq)`` row never changes
  once written, and a session's ``seq`` runs 1, 2, 3, ... without gaps. So a
  session's message count is its last ``seq`` (one index probe; no counter to
  update on every append), and the history cache can check itself cheaply.
* ``messages_fts`` is an external-content FTS5 index over the message text,
  the tool name and the tool calls (so arguments are searchable; from version 7
  as decoded text, see ``storage/search/call_text.py``); triggers keep it in step with
  ``messages``. As the index does not hold the stored JSON, never 'rebuild' it:
  refill it as migration 7 does. From version 2 it also covers
  ``search_cjk`` (see ``storage/search/cjk.py``). Its automatic merging is off: the
  writer merges in small slices between transactions instead, so no single
  append pays for a large merge.
* ``search_words`` (version 6) is the vocabulary substring search looks words
  up in; it is filled off the write path (``storage/search/words.py``).
* ``messages.media`` (version 9) holds a message's media references as JSON
  (``storage/records.py``); the bytes are files in the home's media folder
  (``storage/media.py``), never in the database.
* ``sessions.tools_id`` (version 11) names the tool list a session was offered when it started, a
  JSON text interned in ``prompts`` like the system prompt (many sessions share one list); NULL for
  sessions stored before.
* Messages go in with one statement per batch: FTS5 turns every statement of a
  transaction into a new index segment (see ``storage/messages.py``).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Final

from storage.search.call_text import readable_calls_sql
from storage.search.cjk import message_cjk_tokens
from storage.records import tool_calls_from_json

__all__ = ["LATEST", "MIGRATIONS", "TOKENIZER", "Migration"]

Apply = Callable[[sqlite3.Connection], None]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    apply: Apply


def _statements(*sql: str) -> Apply:
    def apply(conn: sqlite3.Connection) -> None:
        for statement in sql:  # not executescript(): it would COMMIT the migration's transaction
            conn.execute(statement)

    return apply


def _steps(*steps: Apply) -> Apply:
    def apply(conn: sqlite3.Connection) -> None:
        for step in steps:
            step(conn)

    return apply


TOKENIZER: Final = "unicode61 remove_diacritics 2"


def _fts_ddl(columns: Sequence[str]) -> tuple[str, ...]:
    """The FTS table and the three triggers that mirror ``messages`` into it."""
    cols = ", ".join(columns)
    return (
        f"CREATE VIRTUAL TABLE messages_fts USING fts5({cols}, content='messages', "
        f"content_rowid='id', tokenize='{TOKENIZER}')",
        *_fts_triggers(columns),
    )


def _indexed(column: str, row: str) -> str:
    """What the index takes for ``column`` of ``row`` (``new``/``old``/a table alias), from version 7."""
    return readable_calls_sql(f"{row}.{column}") if column == "tool_calls" else f"{row}.{column}"


def _as_stored(column: str, row: str) -> str:
    return f"{row}.{column}"


def _fts_triggers(columns: Sequence[str], value: Callable[[str, str], str] = _as_stored) -> tuple[str, ...]:
    """The triggers that mirror ``messages`` into ``messages_fts``; ``value(column, row)`` is what is indexed."""
    cols = ", ".join(columns)
    new = ", ".join(value(c, "new") for c in columns)
    old = ", ".join(value(c, "old") for c in columns)
    return (
        f"""CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, {cols}) VALUES (new.id, {new});
        END""",
        f"""CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, {cols}) VALUES ('delete', old.id, {old});
        END""",
        f"""CREATE TRIGGER messages_fts_update AFTER UPDATE OF {cols} ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, {cols}) VALUES ('delete', old.id, {old});
            INSERT INTO messages_fts(rowid, {cols}) VALUES (new.id, {new});
        END""",
    )


# Automatic merging is off (a commit that trips it pays for the whole step, a stall
# that grows with the index); the writer runs bounded 'merge' slices
# instead. Merging 16 segments at a time means fewer levels, so each message's
# index entries are rewritten fewer times; 'crisismerge' is the backstop if the
# slices ever fall behind.
FTS_USERMERGE: Final = 16
"""Segments of one level that a 'merge' step combines; with fewer on every level, a step has nothing to do."""
_FTS_MERGE_SETTINGS: Final = (
    "INSERT INTO messages_fts(messages_fts, rank) VALUES ('automerge', 0)",
    f"INSERT INTO messages_fts(messages_fts, rank) VALUES ('usermerge', {FTS_USERMERGE})",
    "INSERT INTO messages_fts(messages_fts, rank) VALUES ('crisismerge', 32)",
)

_DROP_FTS_TRIGGERS: Final = (
    "DROP TRIGGER messages_fts_insert",
    "DROP TRIGGER messages_fts_delete",
    "DROP TRIGGER messages_fts_update",
)
_DROP_FTS: Final = (*_DROP_FTS_TRIGGERS, "DROP TABLE messages_fts")

_V1_CORE: Final = (
    """CREATE TABLE schema_version (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        version INTEGER NOT NULL,
        migrated_at REAL NOT NULL
    )""",
    """CREATE TABLE prompts (
        id INTEGER PRIMARY KEY,
        digest TEXT NOT NULL UNIQUE,
        text TEXT NOT NULL
    )""",
    """CREATE TABLE sessions (
        id TEXT PRIMARY KEY,
        session_key TEXT NOT NULL,
        platform TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        chat_type TEXT,
        thread_id TEXT,
        user_id TEXT,
        title TEXT,
        model TEXT,
        prompt_id INTEGER REFERENCES prompts(id),
        parent_session_id TEXT REFERENCES sessions(id),
        started_at REAL NOT NULL,
        ended_at REAL,
        end_reason TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cache_read_tokens INTEGER NOT NULL DEFAULT 0,
        cache_write_tokens INTEGER NOT NULL DEFAULT 0,
        last_prompt_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd REAL NOT NULL DEFAULT 0,
        CHECK ((ended_at IS NULL) = (end_reason IS NULL))
    )""",
    "CREATE UNIQUE INDEX sessions_title ON sessions(title) WHERE title IS NOT NULL",
    "CREATE INDEX sessions_open_by_key ON sessions(session_key, started_at) WHERE ended_at IS NULL",
    "CREATE INDEX sessions_by_parent ON sessions(parent_session_id) WHERE parent_session_id IS NOT NULL",
    "CREATE INDEX sessions_by_start ON sessions(started_at)",
    "CREATE INDEX sessions_by_platform ON sessions(platform, started_at)",
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
        content TEXT NOT NULL DEFAULT '',
        tool_calls TEXT,
        tool_call_id TEXT,
        tool_name TEXT,
        reasoning TEXT,
        token_estimate INTEGER,
        created_at REAL NOT NULL,
        platform_message_id TEXT,
        UNIQUE (session_id, seq)
    )""",
    """CREATE INDEX messages_by_platform_id ON messages(session_id, platform_message_id)
        WHERE platform_message_id IS NOT NULL""",
)

_V1_FTS_COLUMNS: Final = ("content", "tool_name", "tool_calls")
FTS_COLUMNS: Final = ("content", "tool_name", "tool_calls", "search_cjk")


def _refill_search_cjk(conn: sqlite3.Connection, where: str = "1", chunk: int = 2000) -> None:
    """Set ``search_cjk`` to what :func:`message_cjk_tokens` makes of each message matching ``where``
    (only rows whose value changes are written)."""
    last_id = 0
    while True:
        rows = conn.execute(
            "SELECT id, content, tool_name, tool_calls, search_cjk FROM messages "
            f"WHERE id > ? AND ({where}) ORDER BY id LIMIT ?",
            (last_id, chunk),
        ).fetchall()
        if not rows:
            return
        last_id = rows[-1][0]
        updates = []
        for message_id, content, tool_name, tool_calls, stored in rows:
            tokens = message_cjk_tokens(content, tool_name, tool_calls_from_json(tool_calls))
            if tokens != stored:
                updates.append((tokens, message_id))
        if updates:
            conn.executemany("UPDATE messages SET search_cjk = ? WHERE id = ?", updates)


_V3_GATEWAY: Final = (
    """CREATE TABLE inbox (
        id INTEGER PRIMARY KEY,
        platform TEXT NOT NULL,
        event_id TEXT NOT NULL,
        session_key TEXT NOT NULL,
        payload TEXT NOT NULL,
        status TEXT NOT NULL DEFAULT 'accepted' CHECK (status IN ('accepted', 'done')),
        received_at REAL NOT NULL,
        done_at REAL,
        UNIQUE (platform, event_id)
    )""",
    "CREATE INDEX inbox_unfinished ON inbox(id) WHERE status = 'accepted'",
    "CREATE INDEX inbox_finished ON inbox(done_at) WHERE status = 'done'",
    """CREATE TABLE outbox (
        id INTEGER PRIMARY KEY,
        turn_id TEXT NOT NULL,
        platform TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        thread_id TEXT,
        chunk_index INTEGER NOT NULL,
        text TEXT NOT NULL,
        plain TEXT,
        markup TEXT,
        reply_to TEXT,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
        platform_message_id TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        last_error TEXT,
        UNIQUE (turn_id, chunk_index)
    )""",
    "CREATE INDEX outbox_pending ON outbox(platform, chat_id, thread_id, id) WHERE status = 'pending'",
    "CREATE INDEX outbox_settled ON outbox(updated_at) WHERE status != 'pending'",
)

_V4_PAIRING: Final = (
    """CREATE TABLE pairing_codes (
        platform TEXT NOT NULL,
        code TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT,
        chat_id TEXT,
        created_at REAL NOT NULL,
        expires_at REAL NOT NULL,
        used_at REAL,
        PRIMARY KEY (platform, code)
    )""",
    "CREATE INDEX pairing_codes_by_user ON pairing_codes(platform, user_id, created_at)",
    """CREATE TABLE pairing_approvals (
        platform TEXT NOT NULL,
        user_id TEXT NOT NULL,
        user_name TEXT,
        approved_at REAL NOT NULL,
        PRIMARY KEY (platform, user_id)
    )""",
    """CREATE TABLE pairing_failures (
        id INTEGER PRIMARY KEY,
        platform TEXT NOT NULL,
        failed_at REAL NOT NULL
    )""",
    "CREATE INDEX pairing_failures_by_platform ON pairing_failures(platform, failed_at)",
)

_V5_USAGE: Final = (
    """CREATE TABLE usage (
        id INTEGER PRIMARY KEY,
        session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
        at REAL NOT NULL,
        input_tokens INTEGER NOT NULL,
        output_tokens INTEGER NOT NULL,
        cache_read_tokens INTEGER NOT NULL,
        cache_write_tokens INTEGER NOT NULL,
        cost_usd REAL NOT NULL
    )""",
    "CREATE INDEX usage_by_time ON usage(at)",
    "CREATE INDEX usage_by_session ON usage(session_id)",
)

# The vocabulary for substring search (see ``storage/search/words.py``): every distinct word of
# the messages, a trigram index over it, and the watermark of messages already read
# into it. Starting at 0, the background indexer fills it for existing messages too,
# so the migration itself stays instant on a large database.
_V6_WORDS: Final = (
    "CREATE TABLE search_words (id INTEGER PRIMARY KEY, word TEXT NOT NULL UNIQUE)",
    """CREATE VIRTUAL TABLE search_words_tri USING fts5(word, content='search_words', content_rowid='id',
        tokenize='trigram')""",
    """CREATE TRIGGER search_words_insert AFTER INSERT ON search_words BEGIN
        INSERT INTO search_words_tri(rowid, word) VALUES (new.id, new.word);
    END""",
    """CREATE TABLE search_progress (
        singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
        words_through INTEGER NOT NULL
    )""",
    "INSERT INTO search_progress (singleton, words_through) VALUES (1, 0)",
)

# Until version 6 the index took the tool-call JSON as stored, arguments escaped twice
# (``storage/search/call_text.py``). Version 7 indexes the decoded text: new triggers, the
# index refilled from the messages, the CJK pairs of tool-call messages made again from
# the decoded arguments (they held them re-encoded as JSON), and the substring vocabulary
# (which holds the escaped words too) emptied so the background indexer reads every
# message again.
_V7_READABLE_CALLS: Final = (
    *_fts_triggers(FTS_COLUMNS, _indexed),
    "INSERT INTO messages_fts(messages_fts) VALUES ('delete-all')",
    f"""INSERT INTO messages_fts(rowid, {", ".join(FTS_COLUMNS)})
        SELECT id, {", ".join(_indexed(c, "m") for c in FTS_COLUMNS)} FROM messages AS m""",
    "DELETE FROM search_words",
    "INSERT INTO search_words_tri(search_words_tri) VALUES ('delete-all')",
    "UPDATE search_progress SET words_through = 0 WHERE singleton = 1",
)

# Version 8: a reply shown while it is written (issue 27) is in the outbox from its first send, as a
# ``live`` row that only its stream writes to. ``live`` is a status of its own rather than a flag
# beside the status, so every query that picks rows to send (``status = 'pending'``) leaves live rows
# alone without being told. SQLite cannot change a CHECK constraint in place, so the table is built
# again (cheap: the outbox holds a week of chunks). ``stream`` is how a streamed row's message was
# shown ('edit' or 'native'): a natively streamed message is stopped before it is edited to the
# final text, also after a restart.
_V8_OUTBOX: Final = (
    """CREATE TABLE outbox_v8 (
        id INTEGER PRIMARY KEY,
        turn_id TEXT NOT NULL,
        platform TEXT NOT NULL,
        chat_id TEXT NOT NULL,
        thread_id TEXT,
        chunk_index INTEGER NOT NULL,
        text TEXT NOT NULL,
        plain TEXT,
        markup TEXT,
        reply_to TEXT,
        status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed', 'live')),
        platform_message_id TEXT,
        attempts INTEGER NOT NULL DEFAULT 0,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL,
        last_error TEXT,
        stream TEXT CHECK (stream IN ('edit', 'native')),
        UNIQUE (turn_id, chunk_index)
    )""",
    """INSERT INTO outbox_v8 (id, turn_id, platform, chat_id, thread_id, chunk_index, text, plain, markup, reply_to,
                              status, platform_message_id, attempts, created_at, updated_at, last_error)
       SELECT id, turn_id, platform, chat_id, thread_id, chunk_index, text, plain, markup, reply_to,
              status, platform_message_id, attempts, created_at, updated_at, last_error FROM outbox""",
    "DROP TABLE outbox",
    "ALTER TABLE outbox_v8 RENAME TO outbox",
    "CREATE INDEX outbox_pending ON outbox(platform, chat_id, thread_id, id) WHERE status = 'pending'",
    "CREATE INDEX outbox_settled ON outbox(updated_at) WHERE status != 'pending'",
    "CREATE INDEX outbox_live ON outbox(turn_id) WHERE status = 'live'",
)


def _add_media_column(conn: sqlite3.Connection) -> None:
    """Version 9: ``messages.media``, the JSON list of a message's media references (NULL when none).

    Only the column is new: no index reads it and no old row has media, so adding it is instant on any
    size of database. Running it on a file that has the column already (added by hand, or the step run
    again by a tool) changes nothing.
    """
    if "media" not in {row[1] for row in conn.execute("PRAGMA table_info(messages)")}:
        conn.execute("ALTER TABLE messages ADD COLUMN media TEXT")


# Where each open conversation last heard from (``storage/last_heard.py``): its newest inbox rows,
# found without reading the week's payloads.
_V10_INBOX_BY_SESSION: Final = ("CREATE INDEX inbox_by_session ON inbox(session_key, id)",)


def _add_tools_column(conn: sqlite3.Connection) -> None:
    """Version 11: ``sessions.tools_id``, the session's frozen tool list (in ``prompts``; NULL for older sessions).

    Only the column is new, so adding it is instant on any size of database; a file that has it already
    is left as it is.
    """
    if "tools_id" not in {row[1] for row in conn.execute("PRAGMA table_info(sessions)")}:
        conn.execute("ALTER TABLE sessions ADD COLUMN tools_id INTEGER REFERENCES prompts(id)")


MIGRATIONS: Final[tuple[Migration, ...]] = (
    Migration(1, "sessions, messages and word search", _statements(*_V1_CORE, *_fts_ddl(_V1_FTS_COLUMNS))),
    Migration(
        2,
        "CJK search: character pairs in messages.search_cjk",
        _steps(
            _statements(*_DROP_FTS, "ALTER TABLE messages ADD COLUMN search_cjk TEXT"),
            _refill_search_cjk,  # every message: the column is new
            _statements(
                *_fts_ddl(FTS_COLUMNS),
                "INSERT INTO messages_fts(messages_fts) VALUES ('rebuild')",
                *_FTS_MERGE_SETTINGS,
            ),
        ),
    ),
    Migration(3, "gateway inbox and outbox", _statements(*_V3_GATEWAY)),
    Migration(4, "gateway DM pairing", _statements(*_V4_PAIRING)),
    Migration(5, "a row per model call, for usage over time", _statements(*_V5_USAGE)),
    Migration(6, "substring search: a vocabulary of message words with a trigram index", _statements(*_V6_WORDS)),
    Migration(
        7,
        "search tool-call arguments as decoded text, not escaped JSON",
        _steps(
            _statements(*_DROP_FTS_TRIGGERS),
            partial(_refill_search_cjk, where="tool_calls IS NOT NULL AND search_cjk IS NOT NULL"),
            _statements(*_V7_READABLE_CALLS),
        ),
    ),
    Migration(8, "streamed replies: live outbox rows, and how a row was streamed", _statements(*_V8_OUTBOX)),
    Migration(9, "media references on messages (the bytes stay in the home's media folder)", _add_media_column),
    Migration(10, "the inbox by session, for where a catch-up reads from", _statements(*_V10_INBOX_BY_SESSION)),
    Migration(11, "the tools each session was offered when it started", _add_tools_column),
)

LATEST: Final = MIGRATIONS[-1].version

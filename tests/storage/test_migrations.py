"""Schema versions: forward migrations on open, refusing databases that are too new or foreign."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from storage import SCHEMA_VERSION, NewMessage, SchemaError, SchemaTooNewError, Store
from storage.search.cjk import cjk_tokens
from storage.migrations import read_version, upgrade
from storage.schema import MIGRATIONS

V1_SESSION = (
    "INSERT INTO sessions (id, session_key, platform, chat_id, title, started_at) VALUES (?, ?, 'telegram', ?, ?, ?)"
)
V1_MESSAGE = (
    "INSERT INTO messages (session_id, seq, role, content, tool_calls, tool_name, created_at) VALUES (?, ?, ?, ?, ?, ?, ?)"
)


def make_v1_database(path: Path) -> None:
    """A database as the first schema version left it, with sessions, messages and their index."""
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        assert upgrade(conn, path, target=1) == 1
        conn.execute(V1_SESSION, ("s1", "telegram:1", "1", "old chat", 1000.0))
        conn.execute(V1_SESSION, ("s2", "telegram:2", "2", None, 1001.0))
        calls = json.dumps([{"id": "c1", "name": "terminal", "arguments": '{"cmd": "kubectl rollout"}'}])
        rows = [
            ("s1", 1, "user", "please deploy the service", None, None),
            ("s1", 2, "assistant", "", calls, None),
            ("s1", 3, "tool", "rollout finished", None, "terminal"),
            ("s2", 1, "user", "我们用docker部署了服务", None, None),
        ]
        conn.executemany(V1_MESSAGE, [(*row[:5], row[5], 2000.0 + i) for i, row in enumerate(rows)])
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with sqlite3.connect(path) as conn:
        assert read_version(conn) == 1


async def test_populated_first_version_migrates_to_current(db_path: Path) -> None:
    make_v1_database(db_path)
    async with await Store.open(db_path) as store:
        with sqlite3.connect(db_path) as conn:
            assert read_version(conn) == SCHEMA_VERSION
        old = await store.get_session("s1")
        assert old is not None and old.title == "old chat" and old.message_count == 3
        history = await store.load_messages("s1")
        assert [m.role for m in history] == ["user", "assistant", "tool"]
        assert history[1].tool_calls[0].name == "terminal"
        # the rebuilt index covers old rows, including the search added after version 1
        assert [h.message_id for h in await store.search("deploy")] == [history[0].id]
        assert [h.seq for h in await store.search("kubectl")] == [2]
        assert [h.session_id for h in await store.search("部署")] == ["s2"]
        assert [h.session_id for h in await store.search("docker")] == ["s2"]
        # and the tables added later work
        assert await store.inbox_accept("telegram", "e1", "telegram:1", {"text": "hi"})


async def test_new_writes_after_migration_continue_each_session(db_path: Path) -> None:
    make_v1_database(db_path)
    async with await Store.open(db_path) as store:
        (record,) = await store.append_messages("s1", [NewMessage("user", "after the upgrade")])
        assert record.seq == 4
        assert [h.seq for h in await store.search("upgrade")] == [4]


async def test_database_from_a_newer_build_is_refused_untouched(db_path: Path) -> None:
    async with await Store.open(db_path):
        pass
    with sqlite3.connect(db_path) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 5,))
    before = db_path.read_bytes()
    with pytest.raises(SchemaTooNewError) as raised:
        await Store.open(db_path)
    message = str(raised.value)
    assert f"schema version {SCHEMA_VERSION + 5}" in message
    assert f"up to {SCHEMA_VERSION}" in message
    assert "Upgrade Switchboard" in message
    assert raised.value.db_version == SCHEMA_VERSION + 5 and raised.value.build_version == SCHEMA_VERSION
    assert db_path.read_bytes() == before


async def test_foreign_database_is_refused(db_path: Path) -> None:
    with sqlite3.connect(db_path) as conn:
        conn.execute("CREATE TABLE notes (body TEXT)")
    with pytest.raises(SchemaError, match="did not create"):
        await Store.open(db_path)


async def test_concurrent_opens_of_a_new_file_migrate_once(db_path: Path) -> None:
    stores = await asyncio.gather(*(Store.open(db_path) for _ in range(3)))
    try:
        with sqlite3.connect(db_path) as conn:
            assert conn.execute("SELECT COUNT(*), MAX(version) FROM schema_version").fetchone() == (1, SCHEMA_VERSION)
        assert all([await s.ping() for s in stores])
    finally:
        for opened in stores:
            await opened.close()


def make_v5_database(path: Path, messages: int = 300) -> None:
    """A database as version 5 left it (before substring search), holding ``messages`` messages."""
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        assert upgrade(conn, path, target=5) == 5
        conn.execute(V1_SESSION, ("s1", "telegram:1", "1", "ops", 1000.0))
        rows = [("s1", n + 1, "user", f"note {n}: routine checks", None, None) for n in range(messages)]
        rows[-1] = ("s1", messages, "user", "the redeployment was reconfigured", None, None)
        rows[0] = ("s1", 1, "user", "an early misconfiguration", None, None)
        conn.executemany(V1_MESSAGE, [(*row, 2000.0 + i) for i, row in enumerate(rows)])
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with sqlite3.connect(path) as conn:
        assert read_version(conn) == 5
        assert "search_words" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}


async def test_populated_version_5_gains_substring_search(db_path: Path) -> None:
    make_v5_database(db_path)
    async with await Store.open(db_path, word_index_interval=None) as store:
        with sqlite3.connect(db_path) as conn:
            assert read_version(conn) == SCHEMA_VERSION
            assert conn.execute("SELECT words_through FROM search_progress").fetchone() == (0,)
        # before the vocabulary exists, old messages are found by the tail scan
        assert [h.seq for h in await store.search("ploy")] == [300]
        assert {h.seq for h in await store.search("config")} == {1, 300}
        assert await store.index_words() == 300
        with sqlite3.connect(db_path) as conn:
            assert conn.execute("SELECT words_through FROM search_progress").fetchone() == (300,)
            words = {w for (w,) in conn.execute("SELECT word FROM search_words")}
        assert {"redeployment", "reconfigured", "misconfiguration", "routine", "checks"} <= words
        assert {h.seq for h in await store.search("config")} == {1, 300}
        (record,) = await store.append_messages("s1", [NewMessage("user", "a later autodeploy")])
        assert record.seq == 301
        assert {h.seq for h in await store.search("ploy")} == {300, 301}


ESCAPED_CALLS = json.dumps([
    {"id": "c1", "name": "terminal", "arguments": json.dumps({"cmd": "make build\ntestsuite --fast"})},
    {"id": "c2", "name": "weather", "arguments": json.dumps({"city": "Zürich", "region": "華東"})},  # as \u escapes
])  # fmt: skip


@contextmanager
def database_at(path: Path, version: int) -> Iterator[sqlite3.Connection]:
    """A database at schema ``version`` holding one session, ``s1``, to fill as that version would have."""
    with sqlite3.connect(path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        assert upgrade(conn, path, target=version) == version
        conn.execute(V1_SESSION, ("s1", "telegram:1", "1", "ops", 1000.0))
        yield conn


async def test_version_6_tool_call_arguments_become_searchable_as_text(db_path: Path) -> None:
    with database_at(db_path, 6) as conn:
        conn.execute(V1_MESSAGE, ("s1", 1, "assistant", "", ESCAPED_CALLS, None, 2000.0))
        # What version 6 wrote for it: the arguments re-encoded as JSON around the character pairs.
        old_stream = cjk_tokens([json.dumps({"city": "Zürich", "region": "華東"}, ensure_ascii=False)])
        conn.execute("UPDATE messages SET search_cjk = ?", (old_stream,))
        conn.execute("UPDATE search_progress SET words_through = 1")  # as the indexer left it, escapes and all
        conn.execute("INSERT INTO search_words (word) VALUES ('ntestsuite')")
        assert conn.execute("SELECT count(*) FROM messages_fts WHERE messages_fts MATCH 'testsuite'").fetchone() == (0,)
    async with await Store.open(db_path, word_index_interval=None) as store:
        assert [h.seq for h in await store.search("testsuite")] == [1]
        assert [h.seq for h in await store.search("Zürich")] == [1]
        assert [h.seq for h in await store.search("zurich")] == [1]
        assert [h.seq for h in await store.search("華東")] == [1]
        with sqlite3.connect(db_path) as conn:  # the vocabulary is read again from the start
            assert conn.execute("SELECT words_through FROM search_progress").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM search_words").fetchone() == (0,)
            (cjk,) = conn.execute("SELECT search_cjk FROM messages").fetchone()
            assert '"region"' not in cjk and "華東" in cjk  # rebuilt from the decoded arguments
            assert conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')").fetchall() == []
        assert await store.index_words() == 1
        assert [h.seq for h in await store.search("suite")] == [1]  # a substring, through the vocabulary


async def test_version_8_messages_gain_an_empty_media_column(db_path: Path) -> None:
    with database_at(db_path, 8) as conn:
        conn.execute(V1_MESSAGE, ("s1", 1, "user", "a photo came before media was kept", None, None, 2000.0))
    async with await Store.open(db_path) as store:
        (old,) = await store.load_messages("s1")
        assert old.media == () and "media" not in old.to_dict()
        part = {"kind": "image", "mime": "image/png", "sha256": "0f" * 32, "size": 10}
        (new,) = await store.append_messages("s1", [NewMessage("user", "and one after", media=(part,))])
        assert new.seq == 2 and new.media == (part,)
    with sqlite3.connect(db_path) as conn:
        assert read_version(conn) == SCHEMA_VERSION
        stored = [row[0] for row in conn.execute("SELECT media FROM messages ORDER BY seq")]
        assert stored[0] is None and json.loads(stored[1]) == [part]


def test_the_media_migration_can_run_twice(db_path: Path) -> None:
    """Applying migration 9 to a file that has the column already (a copy restored over, a retried upgrade) is a no-op."""
    (media,) = [m for m in MIGRATIONS if m.version == 9]
    with database_at(db_path, 9) as conn:
        conn.execute("INSERT INTO messages (session_id, seq, role, created_at, media) VALUES ('s1', 1, 'user', 1, '[]')")
        media.apply(conn)
        media.apply(conn)
        columns = [row[1] for row in conn.execute("PRAGMA table_info(messages)")]
        assert columns.count("media") == 1
        assert conn.execute("SELECT media FROM messages").fetchall() == [("[]",)]
        assert upgrade(conn, db_path) == SCHEMA_VERSION

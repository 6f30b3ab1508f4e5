"""Copying a SQLite home's database into PostgreSQL (``storage/postgres/copy_from_sqlite.py``) against a real server:
every table round trips, ids go on after the copied ones, and what must be refused is refused with nothing written."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import asyncpg
import pytest

from storage import CopyError, NewMessage, PostgresStore, SchemaError, copy_from_sqlite
from storage.postgres.copy_from_sqlite import COPIED_TABLES, without_password
from storage.postgres.schema import LATEST
from storage.postgres.text import NUL_STANDS_IN
from storage.schema import LATEST as SQLITE_LATEST
from tests.storage.postgres.sqlite_home import CHART, CJK, TOOLS, fill, postgres_rows, sqlite_rows

LOCK_HOLDER = Path(__file__).parents[1] / "lock_holder.py"
IDENTITIES = ("prompts", "messages", "usage", "pairing_failures", "inbox", "outbox")


async def tables_of(dsn: str) -> list[str]:
    conn = await asyncpg.connect(dsn)
    try:
        return sorted(r["tablename"] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'"))
    finally:
        await conn.close()


async def test_every_table_round_trips_with_its_ids_and_new_rows_never_collide(tmp_path: Path, postgres_dsn: str) -> None:
    source = tmp_path / "state.db"
    ids = await fill(source)

    report = await copy_from_sqlite(source, postgres_dsn)

    expected = sqlite_rows(source)
    assert await postgres_rows(postgres_dsn) == expected
    assert {t.table: t.rows for t in report.tables} == {table: len(rows) for table, rows in expected.items()}
    assert all(rows for rows in expected.values()), "the home has rows in every table"
    assert report.source_version == SQLITE_LATEST and report.target_version == LATEST
    conn = await asyncpg.connect(postgres_dsn)
    try:
        assert await conn.fetchval("SELECT content FROM messages WHERE tool_name = 'run'") == f"the tool printed a{NUL_STANDS_IN}b and stopped"
        assert await conn.fetchval("SELECT parent_session_id FROM sessions WHERE id = $1", ids["child"]) == ids["root"]
        assert await conn.fetchval("SELECT count(*) FROM messages WHERE words @@ to_tsquery('switchboard', 'zürich')") >= 2, \
            "the generated search column is made for the copied rows"  # fmt: skip
        for table in IDENTITIES:  # the next id of every table is the one after the largest copied
            last = await conn.fetchval(f"SELECT max(id) FROM {table}")  # noqa: S608
            sequence = await conn.fetchval("SELECT pg_get_serial_sequence($1, 'id')", table)
            assert tuple(await conn.fetchrow(f"SELECT last_value, is_called FROM {sequence}")) == (last, True), table
            assert next(t.next_id for t in report.tables if t.table == table) == last + 1
    finally:
        await conn.close()

    store = await PostgresStore.open(postgres_dsn)
    try:
        history = await store.load_messages(ids["root"])
        assert [m.seq for m in history] == [1, 2, 3, 4, 5, 6] and history[4].content == CJK
        assert history[2].media == (CHART,)  # a tool's picture stays on its message
        for role in ("root", "child"):  # a compaction's child keeps its parent's tools
            assert (await store.get_session(ids[role])).tool_specs == TOOLS  # type: ignore[union-attr]
        assert (await store.get_session(ids["other"])).tool_specs is None  # type: ignore[union-attr]
        assert history[1].tool_calls[0].arguments == '{"query": "Zürich weather", "days": 3, "raw": "x\\u0000y"}'
        assert history[1].tool_calls[1].arguments == f'{{"cmd": "printf a{NUL_STANDS_IN}b"}}'
        found = await store.search("URIC")  # a part of a word: the vocabulary is made from the copied words
        assert len(found) >= 2 and all("ürich" in hit.snippet for hit in found), found
        (added,) = await store.append_messages(ids["child"], [NewMessage("user", "after the move")])
        assert (added.seq, added.id) == (3, max(m["id"] for m in expected["messages"]) + 1)
    finally:
        await store.close()


async def test_a_second_run_is_refused_and_writes_nothing(tmp_path: Path, postgres_dsn: str) -> None:
    source = tmp_path / "state.db"
    await fill(source)
    await copy_from_sqlite(source, postgres_dsn)
    before = await postgres_rows(postgres_dsn)

    with pytest.raises(CopyError, match=r"is not empty \(prompts 3 rows, sessions 3 rows, messages 9 rows, .*the copy "
                                        r"goes only into an empty database, and nothing was written"):  # fmt: skip
        await copy_from_sqlite(source, postgres_dsn)
    assert await postgres_rows(postgres_dsn) == before


async def test_a_target_holding_any_row_is_refused_before_anything_is_written(tmp_path: Path, postgres_dsn: str) -> None:
    source = tmp_path / "state.db"
    await fill(source)
    store = await PostgresStore.open(postgres_dsn)  # migrated, as a gateway started on it would leave it
    await store.close()
    conn = await asyncpg.connect(postgres_dsn)
    try:
        await conn.execute("INSERT INTO pairing_approvals VALUES ('slack', 'U1', 'Bo', 1.0)")
    finally:
        await conn.close()

    with pytest.raises(CopyError, match=r"is not empty \(pairing_approvals 1 rows\)"):
        await copy_from_sqlite(source, postgres_dsn)
    rows = await postgres_rows(postgres_dsn)
    assert {table: len(r) for table, r in rows.items()} == {table: int(table == "pairing_approvals") for table in COPIED_TABLES}


async def test_an_empty_database_migrated_before_is_copied_into(tmp_path: Path, postgres_dsn: str) -> None:
    source = tmp_path / "state.db"
    await fill(source)
    store = await PostgresStore.open(postgres_dsn)
    await store.close()

    await copy_from_sqlite(source, postgres_dsn)
    assert await postgres_rows(postgres_dsn) == sqlite_rows(source)


async def test_a_database_with_other_tables_is_refused(tmp_path: Path, postgres_dsn: str) -> None:
    source = tmp_path / "state.db"
    await fill(source)
    conn = await asyncpg.connect(postgres_dsn)
    try:
        await conn.execute("CREATE TABLE invoices (id int)")
    finally:
        await conn.close()

    with pytest.raises(SchemaError, match="has tables but no schema_version record"):
        await copy_from_sqlite(source, postgres_dsn)
    assert await tables_of(postgres_dsn) == ["invoices"]


async def test_a_source_another_process_has_open_is_refused(tmp_path: Path, postgres_dsn: str) -> None:
    source = tmp_path / "state.db"
    await fill(source)
    holder = subprocess.Popen([sys.executable, str(LOCK_HOLDER), str(source), "-"], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(CopyError, match=r"state.db is open in another process \(a running gateway\?\): stop the "
                                            r"gateway .* then migrate again"):  # fmt: skip
            await copy_from_sqlite(source, postgres_dsn)
    finally:
        holder.communicate("\n")
    assert await tables_of(postgres_dsn) == []

    await copy_from_sqlite(source, postgres_dsn)  # stopped: the same copy goes through
    assert await postgres_rows(postgres_dsn) == sqlite_rows(source)


async def test_a_source_of_an_older_schema_or_none_at_all_is_refused(tmp_path: Path, postgres_dsn: str) -> None:
    with pytest.raises(CopyError, match="there is no SQLite database at .*missing.db: name the one to copy with --from"):
        await copy_from_sqlite(tmp_path / "missing.db", postgres_dsn)
    old = tmp_path / "old.db"
    await fill(old)
    with sqlite3.connect(old) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (SQLITE_LATEST - 1,))
    with pytest.raises(CopyError, match=f"schema version {SQLITE_LATEST - 1}, this build copies version {SQLITE_LATEST}: "
                                        "open it once with this build"):  # fmt: skip
        await copy_from_sqlite(old, postgres_dsn)
    assert await tables_of(postgres_dsn) == []


async def test_the_password_is_never_shown(tmp_path: Path, postgres_dsn: str) -> None:
    secret = "pw-Zq81-never-shown"
    with_password = postgres_dsn.replace("switchboard@", f"switchboard:{secret}@") + f"?password={secret}&sslmode=disable"
    assert without_password(with_password) == postgres_dsn + "?sslmode=disable"
    unreachable = with_password.replace(f":{urlsplit(postgres_dsn).port}/", ":1/")  # a port nobody listens on
    with pytest.raises(CopyError, match="cannot connect to") as refused:
        await copy_from_sqlite(await _filled(tmp_path), unreachable)
    assert secret not in str(refused.value)


async def _filled(tmp_path: Path) -> Path:
    source = tmp_path / "state.db"
    await fill(source)
    return source


async def test_a_copy_that_does_not_match_is_rolled_back(tmp_path: Path, postgres_dsn: str) -> None:
    """The check compares what arrived, not what was sent: a trigger on the target that changes a message on its way
    in makes the checksums differ, and nothing of the copy is kept."""
    source = await _filled(tmp_path)
    store = await PostgresStore.open(postgres_dsn)
    await store.close()
    conn = await asyncpg.connect(postgres_dsn)
    try:
        await conn.execute("CREATE FUNCTION garble() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN "
                           "NEW.content := upper(NEW.content); RETURN NEW; END $$")  # fmt: skip
        await conn.execute("CREATE TRIGGER garble BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION garble()")
    finally:
        await conn.close()

    with pytest.raises(CopyError, match=r"messages in postgresql://.* does not match the SQLite database after the copy "
                                        r"\(9 rows there, 9 here; checksums [0-9a-f]{64} and [0-9a-f]{64}\): it was "
                                        r"rolled back and nothing was kept"):  # fmt: skip
        await copy_from_sqlite(source, postgres_dsn)
    assert {table: len(rows) for table, rows in (await postgres_rows(postgres_dsn)).items()} == dict.fromkeys(COPIED_TABLES, 0)

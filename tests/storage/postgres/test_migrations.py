"""PostgreSQL schema versions (storage/postgres/migrations.py) against a real server: a fresh database
reaches the latest version, running again changes nothing, two processes at once migrate once, and
databases that are newer or not Switchboard's are refused untouched."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from storage.errors import SchemaError, SchemaTooNewError
from storage.postgres.migrations import MIGRATION_LOCK, read_version, upgrade
from storage.postgres.schema import LATEST, MIGRATIONS
from tests.waiting import eventually

TABLES = {
    "schema_version", "prompts", "sessions", "messages", "inbox", "outbox",
    "pairing_codes", "pairing_approvals", "pairing_failures", "usage", "search_vocabulary",
    "replicas", "leases", "session_claims",
}  # fmt: skip
INDEXES = {
    "sessions_title", "sessions_open_by_key", "sessions_by_parent", "sessions_by_start", "sessions_by_platform",
    "messages_by_platform_id", "messages_words", "search_vocabulary_trigrams", "inbox_unfinished", "inbox_finished",
    "inbox_by_session", "outbox_pending", "outbox_settled", "outbox_live", "pairing_codes_by_user",
    "pairing_failures_by_platform", "usage_by_time", "usage_by_session",
    "leases_by_holder", "session_claims_by_holder", "outbox_claimed_by", "inbox_unfinished_by_session",
}  # fmt: skip


async def no_reset(connection: object) -> None:
    """The pool as the engine configures it: no reset query on release (the migration's lock ends with its
    transaction, so there is nothing to reset)."""


@pytest_asyncio.fixture
async def pool(postgres_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    async with asyncpg.create_pool(postgres_dsn, min_size=1, max_size=4, reset=no_reset) as pool:
        yield pool


def migrated(logs: list[dict[str, object]]) -> list[object]:
    return [entry["version"] for entry in logs if entry["event"] == "storage.migrated"]


async def test_a_fresh_database_reaches_the_latest_version_with_every_table(pool: asyncpg.Pool) -> None:
    with capture_logs() as logs:
        assert await upgrade(pool) == LATEST

    async with pool.acquire() as conn:
        assert await read_version(conn) == LATEST
        tables = {r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        indexes = {r[0] for r in await conn.fetch("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")}
        words_type = await conn.fetchval(
            "SELECT data_type FROM information_schema.columns WHERE table_name = 'messages' AND column_name = 'words'"
        )
        trigram_index = await conn.fetchval("SELECT indexdef FROM pg_indexes WHERE indexname = 'search_vocabulary_trigrams'")
        outbox_live = await conn.fetchval(
            "SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conrelid = 'outbox'::regclass "
            "AND pg_get_constraintdef(oid) LIKE '%status%'"
        )
    assert tables == TABLES
    assert indexes >= INDEXES, INDEXES - indexes
    assert words_type == "tsvector"
    assert "gin" in trigram_index and "gin_trgm_ops" in trigram_index
    assert "'live'" in outbox_live
    assert migrated(logs) == [m.version for m in MIGRATIONS]


async def test_the_words_column_follows_every_write_with_tool_calls_decoded(pool: asyncpg.Pool) -> None:
    await upgrade(pool)
    calls = json.dumps([
        {"id": "c1", "name": "terminal", "arguments": json.dumps({"cmd": "make\ntest"})},  # a newline, escaped
        {"id": "c2", "name": "broken", "arguments": "{not json"},
    ])  # fmt: skip
    async with pool.acquire() as conn:
        await conn.execute("INSERT INTO sessions (id, session_key, platform, chat_id, started_at) "
                           "VALUES ('s1', 'k', 'telegram', '1', 1.0)")  # fmt: skip
        message_id = await conn.fetchval(
            "INSERT INTO messages (session_id, seq, role, content, tool_calls, created_at) "
            "VALUES ('s1', 1, 'assistant', 'Deploying now', $1::jsonb, 2.0) RETURNING id",
            calls,
        )
        found = await conn.fetchval(
            "SELECT array_agg(q ORDER BY q) FROM unnest(ARRAY['deploying', 'terminal', 'make', 'test', 'broken', "
            "'not', 'json', 'ntest']) AS q, messages WHERE id = $1 AND words @@ to_tsquery('simple', q)",
            message_id,
        )
        await conn.execute("UPDATE messages SET content = 'rolled back' WHERE id = $1", message_id)
        after = await conn.fetchval("SELECT words @@ to_tsquery('simple', 'rolled & back') FROM messages WHERE id = $1",
                                    message_id)  # fmt: skip
    assert sorted(found) == sorted(["deploying", "terminal", "make", "test", "broken", "not", "json"])  # not 'ntest'
    assert after is True


async def test_running_upgrade_twice_changes_nothing(pool: asyncpg.Pool) -> None:
    await upgrade(pool)
    async with pool.acquire() as conn:
        before = await conn.fetchrow("SELECT version, migrated_at FROM schema_version")
        with capture_logs() as logs:
            assert await upgrade(conn) == LATEST
        after = await conn.fetchrow("SELECT version, migrated_at FROM schema_version")
    assert after == before
    assert migrated(logs) == []


async def test_two_processes_upgrading_one_fresh_database_at_once_migrate_it_once(postgres_dsn: str) -> None:
    """Both read version 0 and then queue on the migration lock (held here until both wait); the second to
    get it finds the work done instead of creating every table a second time."""
    holder, first, second = [await asyncpg.connect(postgres_dsn) for _ in range(3)]
    try:
        holding = holder.transaction()
        await holding.start()
        await holder.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
        with capture_logs() as logs:
            upgrades = [asyncio.create_task(upgrade(conn)) for conn in (first, second)]

            async def both_wait() -> bool:
                waiting = await holder.fetchval(
                    "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND database = "
                    "(SELECT oid FROM pg_database WHERE datname = current_database())"
                )
                return waiting == 2 or any(task.done() for task in upgrades)

            await eventually(both_wait, "both upgrades wait for the migration lock")
            await holding.commit()
            versions = await asyncio.gather(*upgrades)
        assert versions == [LATEST, LATEST]
        assert migrated(logs) == [m.version for m in MIGRATIONS]
        assert await read_version(holder) == LATEST
    finally:
        for conn in (holder, first, second):
            await conn.close()


async def test_a_database_newer_than_the_build_is_refused_naming_both_versions(pool: asyncpg.Pool) -> None:
    await upgrade(pool)
    async with pool.acquire() as conn:
        await conn.execute("UPDATE schema_version SET version = $1", LATEST + 1)
        with capture_logs() as logs, pytest.raises(SchemaTooNewError) as refused:
            await upgrade(conn)
        assert await read_version(conn) == LATEST + 1
        database = await conn.fetchval("SELECT current_database()")
    assert refused.value.db_version == LATEST + 1 and refused.value.build_version == LATEST
    message = str(refused.value)
    assert f"schema version {LATEST + 1}" in message and f"versions up to {LATEST}" in message
    assert database in message and "@" in message
    assert migrated(logs) == []


async def test_a_database_switchboard_did_not_create_is_refused_untouched(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        await conn.execute("CREATE TABLE invoices (id int PRIMARY KEY)")
        with pytest.raises(SchemaError, match="has tables but no schema_version") as refused:
            await upgrade(conn)
        tables = {r[0] for r in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert not isinstance(refused.value, SchemaTooNewError)
    assert tables == {"invoices"}


async def test_pg_trgm_is_installed_by_the_migration(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        before = await conn.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'")
        await upgrade(conn)
        after = await conn.fetchval("SELECT count(*) FROM pg_extension WHERE extname = 'pg_trgm'")
        similar = await conn.fetchval("SELECT '東京都の天気' % '東京都の天気予報'")
    assert (before, after, similar) == (0, 1, True)


async def test_the_words_of_a_message_do_not_depend_on_the_search_path_of_the_writer(postgres_dsn: str) -> None:
    """pg_restore writes the rows with an empty search_path, another program with a path of its own (here one
    whose schema holds a stemming ``switchboard`` configuration): the generated words (configuration, CJK
    pairs, parts of punctuated tokens, tool calls) are those of the schema's own functions every time, also
    for a schema other than ``public``."""
    calls = json.dumps([{"id": "c1", "name": "terminal", "arguments": json.dumps({"cmd": "open src/app.py 部署"})}])
    admin = await asyncpg.connect(postgres_dsn)
    try:
        await admin.execute("CREATE SCHEMA tenant")
        async with asyncpg.create_pool(postgres_dsn, min_size=1, max_size=1, reset=no_reset,
                                       server_settings={"search_path": "tenant"}) as pool:  # fmt: skip
            assert await upgrade(pool) == LATEST
        await admin.execute("CREATE TEXT SEARCH CONFIGURATION public.switchboard (COPY = english)")
        await admin.execute("INSERT INTO tenant.sessions (id, session_key, platform, chat_id, started_at) "
                            "VALUES ('s1', 'k', 'telegram', '1', 1.0)")  # fmt: skip
        for seq, path in enumerate(["tenant", "''", "public", "public, tenant"], start=1):
            await admin.execute(f"SET search_path = {path}")
            await admin.execute(
                "INSERT INTO tenant.messages (session_id, seq, role, content, tool_calls, created_at) "
                "VALUES ('s1', $1, 'assistant', 'Deploying P2.2 在大别山', $2::jsonb, 2.0)",
                seq, calls,
            )  # fmt: skip
        vectors = [row[0] for row in await admin.fetch("SELECT words::text FROM tenant.messages ORDER BY seq")]
    finally:
        await admin.close()
    assert len(set(vectors)) == 1, vectors
    for word in ("'deploying'", "'p2'", "'大别'", "'别山'", "'terminal'", "'app'", "'py'", "'部署'"):
        assert word in vectors[0], (word, vectors[0])

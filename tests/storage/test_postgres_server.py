"""The throwaway PostgreSQL server the PostgreSQL engine's tests run against (tests/fakes/postgres_server.py):
it answers the engine's driver, is the version the engine is built for, has the extensions search needs, and
one server serves the whole session, a fresh database per test."""

from __future__ import annotations

import socket
from pathlib import Path

import asyncpg
import pytest

from tests.fakes.postgres_server import PostgresServer, PostgresUnavailable

seen_servers: list[tuple[int, str]] = []  # (port, postmaster start time) of each test below that saw the server


async def test_the_driver_connects_to_a_postgresql_15_server(postgres: PostgresServer) -> None:
    conn = await asyncpg.connect(postgres.dsn)
    try:
        version = await conn.fetchval("SELECT version()")
        number = await conn.fetchval("SHOW server_version_num")
        encoding = await conn.fetchval("SHOW server_encoding")
    finally:
        await conn.close()

    assert version.startswith("PostgreSQL 15."), version
    assert number.startswith("15"), number
    assert encoding == "UTF8"


async def test_pg_trgm_can_be_created_and_splits_cjk_into_trigrams(postgres_dsn: str) -> None:
    """Search of parts of words and CJK needs pg_trgm (postgresql-contrib); a cluster with a C locale would
    see no word characters in CJK text and give its words no trigrams at all."""
    conn = await asyncpg.connect(postgres_dsn)
    try:
        try:
            await conn.execute("CREATE EXTENSION pg_trgm")
        except asyncpg.PostgresError as error:
            pytest.fail(f"CREATE EXTENSION pg_trgm failed (is the contrib package installed?): {error}")
        trigrams = await conn.fetchval("SELECT show_trgm('日本語')")
        similar = await conn.fetchval("SELECT '東京都の天気' % '東京都の天気予報'")
    finally:
        await conn.close()

    assert len(trigrams) >= 3, trigrams
    assert similar is True


@pytest.mark.parametrize("turn", [1, 2])
async def test_tests_of_one_session_share_one_server_with_a_database_each(
    postgres: PostgresServer, postgres_dsn: str, turn: int
) -> None:
    conn = await asyncpg.connect(postgres_dsn)
    try:
        started = str(await conn.fetchval("SELECT pg_postmaster_start_time()"))
        database = await conn.fetchval("SELECT current_database()")
        tables = await conn.fetchval("SELECT COUNT(*) FROM pg_tables WHERE schemaname = 'public'")
        await conn.execute("CREATE TABLE left_behind (n INT)")  # the other turn's database must not have it
    finally:
        await conn.close()

    assert database != postgres.database and tables == 0
    seen_servers.append((postgres.port, started))
    assert len(set(seen_servers)) == 1, seen_servers


def test_the_server_runs_as_an_unprivileged_user_and_stops() -> None:
    """initdb and postgres refuse root: run as root, the server runs as another user; stop() ends it and
    removes its directory."""
    try:
        server = PostgresServer().start()
    except PostgresUnavailable as missing:
        pytest.skip(str(missing))
    base = server.base
    assert base is not None
    pid = int((base / "data" / "postmaster.pid").read_text().split()[0])
    owner = Path(f"/proc/{pid}").stat().st_uid

    server.stop()

    assert owner != 0
    assert not base.exists()
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", server.port)):
        pass

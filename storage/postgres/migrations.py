"""Bringing a PostgreSQL database up to the schema this build writes (``storage/postgres/schema.py``).

As on SQLite (``storage/migrations.py``): the version is recorded in ``schema_version``, each pending
migration runs in a transaction of its own and re-reads the version inside it, a database newer than
this build is refused before anything is written, and one with tables but no ``schema_version`` is
refused as not Switchboard's. Where SQLite's ``BEGIN IMMEDIATE`` makes two processes take turns,
here every migration's transaction first takes a transaction-scoped advisory lock
(``pg_advisory_xact_lock``): two gateways starting at once on one database migrate it exactly once,
the second finding the work done. The lock goes with the transaction, so a pool needs no reset query
to let go of it.

Everything is read and created in the connection's current schema (the first of its ``search_path``).
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

import asyncpg

from storage.errors import SchemaError, SchemaTooNewError
from storage.log import log
from storage.postgres.schema import LATEST, MIGRATIONS, Migration

__all__ = ["MIGRATION_LOCK", "describe", "read_version", "upgrade"]

MIGRATION_LOCK: Final = 0x5357_4244_4D49_4752  # "SWBDMIGR": the advisory lock key every migration takes
"""The advisory lock key of schema migrations (advisory locks are per database: other databases are not held)."""

Connection = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy


async def read_version(conn: Connection) -> int:
    """The schema version recorded in the database; 0 for a new, empty one."""
    tables = {
        row["tablename"]
        for row in await conn.fetch("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")
    }
    if "schema_version" not in tables:
        if tables:
            raise SchemaError(
                f"the database {await describe(conn)} has tables but no schema_version record: Switchboard did "
                f"not create it. Point storage.url at an empty database (or one Switchboard created)."
            )
        return 0
    version = await conn.fetchval("SELECT version FROM schema_version WHERE singleton = 1")
    if version is None:
        raise SchemaError("the schema_version table is empty; the database is damaged")
    return int(version)


async def describe(conn: Connection) -> str:
    """The database as an operator knows it, ``postgresql://user@host:port/database`` (never a password)."""
    row = await conn.fetchrow(
        "SELECT current_user AS user, host(inet_server_addr()) AS host, inet_server_port() AS port, "
        "current_database() AS database"
    )
    where = f"{row['host']}:{row['port']}" if row["host"] is not None else "(local socket)"
    return f"postgresql://{row['user']}@{where}/{row['database']}"


async def upgrade(pool_or_conn: asyncpg.Pool | Connection, *, target: int = LATEST) -> int:
    """Apply pending migrations up to ``target``; returns the version the database is at now.

    Raises SchemaTooNewError for a database written by a newer build, SchemaError for one Switchboard did
    not create or a migration the server refused (nothing of that migration is kept).
    """
    async with _connection(pool_or_conn) as conn:
        current = await read_version(conn)
        if current > LATEST:
            raise SchemaTooNewError(await describe(conn), current, LATEST)
        for migration in MIGRATIONS:
            if current < migration.version <= target:
                current = await _apply(conn, migration)
        return current


@asynccontextmanager
async def _connection(pool_or_conn: asyncpg.Pool | Connection) -> AsyncIterator[Connection]:
    if isinstance(pool_or_conn, asyncpg.Pool):
        async with pool_or_conn.acquire() as conn:
            yield conn
    else:
        yield pool_or_conn


async def _apply(conn: Connection, migration: Migration) -> int:
    started = time.perf_counter()
    try:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", MIGRATION_LOCK)
            current = await read_version(conn)  # under the lock: another process may have done it meanwhile
            if current > LATEST:
                raise SchemaTooNewError(await describe(conn), current, LATEST)
            if current >= migration.version:
                return current
            if current != migration.version - 1:
                raise SchemaError(f"cannot apply migration {migration.version} to a database at version {current}")
            for statement in migration.statements:
                await conn.execute(statement)
            await conn.execute(
                "INSERT INTO schema_version (singleton, version, migrated_at) VALUES (1, $1, $2) "
                "ON CONFLICT (singleton) DO UPDATE SET version = excluded.version, migrated_at = excluded.migrated_at",
                migration.version, time.time(),
            )  # fmt: skip
    except asyncpg.PostgresError as refused:
        raise SchemaError(
            f"migration {migration.version} ({migration.name}) was refused by the server and rolled back: "
            f"{refused}. The role in storage.url needs to own the database (CREATE on it and its schema)."
        ) from refused
    log.info("storage.migrated", database=await describe(conn), version=migration.version, name=migration.name,
             ms=round((time.perf_counter() - started) * 1000, 1))  # fmt: skip
    return migration.version

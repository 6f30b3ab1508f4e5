"""Bringing a database up to the schema this build writes, on open.

Each pending migration runs in its own ``BEGIN IMMEDIATE`` transaction and
re-reads the version inside it, so two processes opening the same old file
at once migrate it exactly once. A database newer than this build is refused
before anything is written.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from storage.errors import SchemaError, SchemaTooNewError
from storage.log import log
from storage.schema import LATEST, MIGRATIONS, Migration
from storage.engine.transaction import in_transaction

__all__ = ["read_version", "upgrade"]


def read_version(conn: sqlite3.Connection) -> int:
    """The schema version recorded in the file; 0 for a new, empty database."""
    tables = {
        row[0]
        for row in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite\\_%' ESCAPE '\\'"
        )
    }
    if "schema_version" not in tables:
        if tables:
            raise SchemaError("the database has tables but no schema_version record: Switchboard did not create it")
        return 0
    row = conn.execute("SELECT version FROM schema_version WHERE singleton = 1").fetchone()
    if row is None:
        raise SchemaError("the schema_version table is empty; the database is damaged")
    return int(row[0])


def upgrade(conn: sqlite3.Connection, path: Path, *, target: int = LATEST) -> int:
    """Apply pending migrations up to ``target``; returns the version the file is at now.

    Busy errors propagate (the caller retries; finished steps are not redone).
    """
    current = read_version(conn)
    if current > LATEST:
        raise SchemaTooNewError(str(path), current, LATEST)
    for migration in MIGRATIONS:
        if current < migration.version <= target:
            current = in_transaction(conn, lambda c, m=migration: _apply(c, m, path))
    return current


def _apply(conn: sqlite3.Connection, migration: Migration, path: Path) -> int:
    current = read_version(conn)  # inside the transaction: another process may have done it meanwhile
    if current > LATEST:
        raise SchemaTooNewError(str(path), current, LATEST)
    if current >= migration.version:
        return current
    if current != migration.version - 1:
        raise SchemaError(f"cannot apply migration {migration.version} to a database at version {current}")
    started = time.perf_counter()
    migration.apply(conn)
    conn.execute(
        "INSERT INTO schema_version (singleton, version, migrated_at) VALUES (1, ?, ?) "
        "ON CONFLICT (singleton) DO UPDATE SET version = excluded.version, migrated_at = excluded.migrated_at",
        (migration.version, time.time()),
    )
    log.info("storage.migrated", path=str(path), version=migration.version, name=migration.name,
             ms=round((time.perf_counter() - started) * 1000, 1))  # fmt: skip
    return migration.version

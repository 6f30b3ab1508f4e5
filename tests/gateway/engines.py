"""The storage engines the gateway's end-to-end tests run on, and how a test looks into either one.

A module of ``tests/gateway`` marked ``pytestmark = pytest.mark.both_engines`` runs each of its tests that starts a
gateway (``start_gateway``) or asks for ``storage_url`` once on SQLite and once on PostgreSQL (a fresh database on
the session's server); a test in it marked ``sqlite_only`` (it opens ``state.db`` itself) runs on SQLite alone.
``count()`` answers one SQL query on the database of either engine, for the checks the storage contract has no
member for (how many inbox rows there are in all, say), and ``refused()`` makes writes to a table fail on either.
"""

from __future__ import annotations

import contextlib
import sqlite3
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, Final

import asyncpg
import pytest

from storage import StorageEngine, open_store
from tests.storage.test_finish_turn import refused as refused_on

__all__ = ["ENGINES", "count", "database_of", "open_database", "parametrize_engines", "refused", "storage_config"]

ENGINES: Final = ("sqlite", "postgresql")


def parametrize_engines(metafunc: pytest.Metafunc) -> None:
    """Run the test on both engines when its module (or itself) is marked ``both_engines`` and not ``sqlite_only``."""
    if "engine_name" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("both_engines") is None:
        return
    if metafunc.definition.get_closest_marker("sqlite_only") is not None:
        return
    metafunc.parametrize("engine_name", ENGINES, indirect=True)


def storage_config(storage_url: str | None) -> dict:
    """The configuration overrides that point a gateway at ``storage_url`` (none for SQLite in the home)."""
    return {"storage": {"url": storage_url}} if storage_url else {}


def database_of(home: Path, storage_url: str | None) -> str:
    """The database a gateway on ``home`` uses: the PostgreSQL URL, else the home's ``state.db``."""
    return storage_url or str(home / "state.db")


def is_postgresql(database: str) -> bool:
    return database.startswith(("postgresql://", "postgres://"))


def refused(database: str, table: str, event: str, when: str = "true") -> AbstractAsyncContextManager[None]:
    """Every ``event`` (INSERT, UPDATE) on ``table`` of ``database`` for which ``when`` holds fails while this lasts."""
    return refused_on(database if is_postgresql(database) else Path(database), table, event, when)


async def count(database: str, sql: str) -> tuple:
    """The one row ``sql`` (written so both engines understand it: ``count(*) FILTER (WHERE ...)``, not
    ``sum(a = b)``) selects from ``database``, a PostgreSQL URL or a SQLite file."""
    if is_postgresql(database):
        conn = await asyncpg.connect(database)
        try:
            return tuple(await conn.fetchrow(sql))
        finally:
            await conn.close()
    with contextlib.closing(sqlite3.connect(database)) as db:
        return tuple(db.execute(sql).fetchone())


async def open_database(home: Path, storage_url: str | None, **options: Any) -> StorageEngine:
    """A store on the database a gateway on ``home`` uses (to leave in it what an earlier run left); close it after."""
    home.mkdir(parents=True, exist_ok=True)
    return await open_store(database_of(home, storage_url), **options)

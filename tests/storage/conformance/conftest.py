"""Every storage engine, for the conformance tests: a test here is written once and runs against each engine.

A test takes ``engine`` (a fresh, empty store of one engine, closed afterwards) and ``reopen`` (another
store on the same database, to see what was made durable past any cache), and uses nothing but the
contract (``storage.StorageEngine``). Engine-specific tests stay next to their engine, outside this folder.

The ``postgresql`` leg runs on a server the test session starts (``tests/fakes/postgres_server.py``), a new
empty database for each test; where the machine has no PostgreSQL binaries it skips and says so.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from storage import PostgresStore, StorageEngine, Store

Opener = Callable[[], Awaitable[StorageEngine]]

ENGINES = ("sqlite", "postgresql")


@pytest.fixture(params=ENGINES)
def engine_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def database(engine_name: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    """Where the test's database is: a file for SQLite, a new empty database's URL for PostgreSQL."""
    if engine_name == "postgresql":
        dsn: str = request.getfixturevalue("postgres_dsn")
        return dsn
    return str(tmp_path / "state.db")


@pytest_asyncio.fixture
async def reopen(engine_name: str, database: str) -> AsyncIterator[Opener]:
    """Opens another store of ``engine_name`` on the test's database; every store it opened is closed after."""
    opened: list[StorageEngine] = []

    async def open_one() -> StorageEngine:
        store: StorageEngine
        if engine_name == "postgresql":
            store = await PostgresStore.open(database)
        else:
            store = await Store.open(database)
        opened.append(store)
        return store

    try:
        yield open_one
    finally:
        for store in reversed(opened):
            await store.close()


@pytest_asyncio.fixture
async def engine(reopen: Opener) -> StorageEngine:
    """A fresh, empty store of each engine in turn."""
    return await reopen()

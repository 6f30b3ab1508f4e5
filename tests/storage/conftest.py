"""Fixtures for the storage tests: a fresh store in a temporary directory, closed afterwards."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from storage import FaultSeam, MessageRecord, NewMessage, PostgresStore, SessionRecord, Store


class Watched(FaultSeam):
    """The storage tests' fault seam: records the size of every batch the writer commits, and breaks the
    store's bookkeeping of a committed append when ``break_bookkeeping`` is set (it is called and may raise)."""

    def __init__(self) -> None:
        super().__init__()
        self.batch_sizes: list[int] = []
        self.break_bookkeeping: Callable[[str, Sequence[MessageRecord]], None] | None = None

    def batch(self, size: int) -> None:
        self.batch_sizes.append(size)

    def appended(self, session_id: str, records: Sequence[MessageRecord]) -> None:
        if self.break_bookkeeping is not None:
            self.break_bookkeeping(session_id, records)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def faults() -> Watched:
    """The fault seam of the ``store`` fixture."""
    return Watched()


ENGINES = ("sqlite", "postgresql")

Opener = Callable[[], Awaitable[Any]]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A test module marked ``pytestmark = pytest.mark.both_engines`` runs each of its tests that takes ``store`` on
    both engines; a test in it marked ``sqlite_only`` (it looks at SQLite's own machinery) runs on SQLite alone."""
    if "store" not in metafunc.fixturenames or metafunc.definition.get_closest_marker("both_engines") is None:
        return
    if metafunc.definition.get_closest_marker("sqlite_only") is not None:
        return
    metafunc.parametrize("engine_name", ENGINES, indirect=True)


@pytest.fixture
def engine_name(request: pytest.FixtureRequest) -> str:
    """The engine the ``store`` fixture opens: SQLite unless the module runs on both engines."""
    return getattr(request, "param", "sqlite")


@pytest_asyncio.fixture
async def store(engine_name: str, db_path: Path, faults: Watched, request: pytest.FixtureRequest) -> AsyncIterator[Store]:
    """A fresh store: SQLite in ``db_path`` with the ``faults`` seam, or PostgreSQL in a new empty database on the
    session's server (``postgres_dsn``) for a ``both_engines`` module's ``postgresql`` leg."""
    opened: Any
    if engine_name == "postgresql":
        opened = await PostgresStore.open(request.getfixturevalue("postgres_dsn"))
    else:
        opened = await Store.open(db_path, faults=faults)
    try:
        yield opened
    finally:
        await opened.close()


@pytest_asyncio.fixture
async def other_store(engine_name: str, db_path: Path, request: pytest.FixtureRequest) -> AsyncIterator[Opener]:
    """Opens another store on the database of ``store`` (what it reads comes from the database, past any cache of
    ``store``); every store it opened is closed after the test."""
    opened: list[Any] = []

    async def open_one() -> Any:
        if engine_name == "postgresql":
            another: Any = await PostgresStore.open(request.getfixturevalue("postgres_dsn"))
        else:
            another = await Store.open(db_path)
        opened.append(another)
        return another

    try:
        yield open_one
    finally:
        for another in reversed(opened):
            await another.close()


async def new_session(store: Store, key: str = "telegram:1", **fields: object) -> SessionRecord:
    defaults: dict[str, object] = {"platform": "telegram", "chat_id": key.rsplit(":", 1)[-1]}
    defaults.update(fields)
    return await store.create_session(session_key=key, **defaults)  # type: ignore[arg-type]


def user(text: str) -> NewMessage:
    return NewMessage("user", text)


def transaction_sizes(db_path: Path) -> list[int]:
    """How many messages each transaction stored, in order (a transaction stamps its messages with one time)."""
    with sqlite3.connect(db_path) as conn:
        return [n for (n,) in conn.execute("SELECT COUNT(*) FROM messages GROUP BY created_at ORDER BY MIN(id)")]


@contextlib.asynccontextmanager
async def traced(faults: FaultSeam) -> AsyncIterator[list[str]]:
    """Every statement the writer connection of the store opened with ``faults`` runs meanwhile, in order
    (SQLite's trace callback)."""
    statements: list[str] = []
    await faults.on_writer(lambda conn: conn.set_trace_callback(statements.append))  # in the writer's thread
    statements.clear()  # the COMMIT of the write that set the callback
    try:
        yield statements
    finally:
        await faults.on_writer(lambda conn: conn.set_trace_callback(None))

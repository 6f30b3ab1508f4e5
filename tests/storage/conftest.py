"""Fixtures for the storage tests: a fresh store in a temporary directory, closed afterwards."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest
import pytest_asyncio

from storage import FaultSeam, MessageRecord, NewMessage, SessionRecord, Store


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


@pytest_asyncio.fixture
async def store(db_path: Path, faults: Watched) -> AsyncIterator[Store]:
    opened = await Store.open(db_path, faults=faults)
    try:
        yield opened
    finally:
        await opened.close()


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

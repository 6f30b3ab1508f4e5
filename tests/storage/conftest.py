"""Fixtures for the storage tests: a fresh store in a temporary directory, closed afterwards."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from storage import NewMessage, SessionRecord, Store


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest_asyncio.fixture
async def store(db_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(db_path)
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
async def traced(store: Store) -> AsyncIterator[list[str]]:
    """Every statement the store's writer connection runs meanwhile, in order (SQLite's trace callback)."""
    statements: list[str] = []
    await store._writer.run(lambda conn: conn.set_trace_callback(statements.append))  # in the writer's thread
    statements.clear()  # the COMMIT of the write that set the callback
    try:
        yield statements
    finally:
        await store._writer.run(lambda conn: conn.set_trace_callback(None))

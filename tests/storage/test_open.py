"""Opening and closing: file modes, health ping, draining on close, refusing use after close."""

from __future__ import annotations

import asyncio
import sqlite3
import stat
from pathlib import Path

import pytest

from storage import SCHEMA_VERSION, Store, StoreClosedError
from tests.storage.conftest import new_session, user


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


async def test_creates_database_wal_and_shm_private(db_path: Path) -> None:
    store = await Store.open(db_path)
    try:
        await new_session(store)  # a write, so the WAL certainly exists
        for suffix in ("", "-wal", "-shm"):
            assert mode(Path(f"{db_path}{suffix}")) == 0o600, suffix
    finally:
        await store.close()


async def test_creates_missing_parent_directories(tmp_path: Path) -> None:
    path = tmp_path / "home" / "state" / "state.db"
    async with await Store.open(path) as store:
        assert await store.ping()
    assert path.exists()


async def test_ping_answers_while_open_and_not_after_close(db_path: Path) -> None:
    store = await Store.open(db_path)
    assert await store.ping() is True
    await store.close()
    assert await store.ping() is False


async def test_close_drains_queued_writes_and_removes_the_wal(db_path: Path) -> None:
    store = await Store.open(db_path)
    session = await new_session(store)
    pending = [asyncio.ensure_future(store.append_messages(session.id, [user(f"m{i}")])) for i in range(50)]
    await asyncio.sleep(0)  # let them queue
    await store.close()
    assert all(task.done() and not task.exception() for task in pending)
    wal = Path(f"{db_path}-wal")
    assert not wal.exists() or wal.stat().st_size == 0
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 50


async def test_close_is_idempotent_and_use_after_close_is_refused(db_path: Path) -> None:
    store = await Store.open(db_path)
    session = await new_session(store)
    await store.close()
    await store.close()
    with pytest.raises(StoreClosedError):
        await store.append_messages(session.id, [user("late")])
    with pytest.raises(StoreClosedError):
        await store.get_session(session.id)
    with pytest.raises(StoreClosedError):
        await new_session(store, "telegram:2")


async def test_async_context_manager_closes(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        await new_session(store)
    assert not store.is_open


async def test_reopen_keeps_data_and_schema_version(db_path: Path) -> None:
    async with await Store.open(db_path) as store:
        session = await new_session(store)
        await store.append_messages(session.id, [user("kept")])
    async with await Store.open(db_path) as store:
        assert [m.content for m in await store.load_messages(session.id)] == ["kept"]
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


@pytest.mark.parametrize("synchronous", ["normal", "full"])
async def test_synchronous_modes_open(db_path: Path, synchronous: str) -> None:
    async with await Store.open(db_path, synchronous=synchronous) as store:
        session = await new_session(store)
        assert len(await store.append_messages(session.id, [user("x")])) == 1


async def test_unknown_synchronous_mode_is_refused(db_path: Path) -> None:
    with pytest.raises(ValueError, match="synchronous"):
        await Store.open(db_path, synchronous="off")
    assert not db_path.exists()

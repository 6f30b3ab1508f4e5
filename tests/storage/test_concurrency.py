"""Concurrency with another process holding the write lock: retries, order, no loss, no duplicates."""

from __future__ import annotations

import asyncio
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from structlog.testing import capture_logs

from storage import RetryPolicy, Store, WriteFailedError
from tests.storage.conftest import new_session, transaction_sizes, user
from tests.storage.test_migrations import make_v1_database

LOCK_HOLDER = Path(__file__).with_name("lock_holder.py")


@asynccontextmanager
async def lock_held(db_path: Path, seconds: float) -> AsyncIterator[asyncio.subprocess.Process]:
    """Another process holds BEGIN IMMEDIATE on the database for ``seconds``."""
    holder = await asyncio.create_subprocess_exec(
        sys.executable, str(LOCK_HOLDER), str(db_path), str(seconds), stdout=asyncio.subprocess.PIPE
    )
    assert holder.stdout is not None
    try:
        assert await holder.stdout.readline() == b"locked\n"
        yield holder
    finally:
        await holder.wait()


async def test_writes_wait_out_a_lock_held_by_another_process(store: Store, db_path: Path) -> None:
    sessions = [await new_session(store, f"telegram:{n}") for n in range(100)]
    per_session = 5

    async def converse(session_id: str) -> None:
        for i in range(per_session):
            await store.append_messages(session_id, [user(f"{session_id} {i}")])

    with capture_logs() as logs:
        async with lock_held(db_path, 2.0) as holder:
            await asyncio.gather(*(converse(s.id) for s in sessions))
            assert holder.stdout is not None
            assert await holder.stdout.readline() == b"released\n"  # the writes could only finish after this
    assert holder.returncode == 0
    retries = [entry for entry in logs if entry["event"] == "storage.write_retry"]
    assert retries and all(entry["log_level"] == "warning" for entry in retries)

    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 100 * per_session
    for session in sessions:
        history = await store.load_messages(session.id)
        assert [m.content for m in history] == [f"{session.id} {i}" for i in range(per_session)]
        assert [m.seq for m in history] == list(range(1, per_session + 1))


async def test_a_write_that_finally_fails_raises_and_the_store_recovers(db_path: Path) -> None:
    store = await Store.open(db_path, retry=RetryPolicy(attempts=3, first_delay=0.01, max_delay=0.02))
    try:
        session = await new_session(store)
        async with lock_held(db_path, 1.5):
            with pytest.raises(WriteFailedError) as raised:
                await store.append_messages(session.id, [user("refused")])
        assert raised.value.attempts == 3
        assert isinstance(raised.value.cause, sqlite3.OperationalError)
        assert "locked" in str(raised.value.cause) or "busy" in str(raised.value.cause)
        await store.append_messages(session.id, [user("accepted")])
        assert [m.content for m in await store.load_messages(session.id)] == ["accepted"]
    finally:
        await store.close()


async def test_opening_waits_out_a_lock_to_migrate(db_path: Path) -> None:
    make_v1_database(db_path)
    with capture_logs() as logs:
        async with lock_held(db_path, 1.0):
            store = await Store.open(db_path)
    try:
        assert [h.session_id for h in await store.search("部署")] == ["s2"]  # migrated: CJK search works
    finally:
        await store.close()
    assert any(entry["event"] == "storage.write_retry" and entry["what"] == "migrate" for entry in logs)



async def test_a_crowd_of_appends_the_writer_waited_for_goes_in_two_transactions(store: Store, db_path: Path) -> None:
    # The writer is idle when the first append comes, and the other 119 join it while another process
    # holds the lock: it writes them as two halves, so one half's callers resume while the other is
    # written (SPLIT_MIN_APPENDS). Everything is stored, in order, once.
    sessions = [await new_session(store, f"telegram:{n}") for n in range(120)]
    async with lock_held(db_path, 1.0):
        await asyncio.gather(*(store.append_messages(s.id, [user(f"hello from {s.id}")]) for s in sessions))
    assert transaction_sizes(db_path) == [60, 60]
    for session in sessions:
        assert [m.content for m in await store.load_messages(session.id)] == [f"hello from {session.id}"]

"""Keeping the WAL short: background checkpoints, and the WAL starting over once the writer pauses."""

from __future__ import annotations

import asyncio
from pathlib import Path

from storage import FaultSeam, Store
from tests.storage.conftest import new_session, user
from tests.waiting import eventually


async def test_a_writer_that_pauses_starts_the_wal_over_without_copying_the_tail(db_path: Path) -> None:
    """Two bursts with a pause between them: the background checkpoint catches up in the pause, and the
    second burst writes the WAL from its start again instead of after the first (the file does not grow)."""
    faults = FaultSeam()
    store = await Store.open(db_path, checkpoint_interval=0.01, faults=faults)
    wal = Path(f"{db_path}-wal")
    try:
        session = await new_session(store)

        async def burst(name: str) -> None:
            await asyncio.gather(*(store.append_messages(session.id, [user(f"{name} {n} " * 50)]) for n in range(200)))

        await burst("first")
        first = wal.stat().st_size
        rounds = faults.checkpoint_rounds
        await eventually(lambda: faults.checkpoint_rounds >= rounds + 2,
                         "two background checkpoints in the pause")  # fmt: skip
        await burst("second")
        assert wal.stat().st_size <= first
    finally:
        await store.close()


async def test_a_wal_file_grown_past_its_keep_size_is_truncated_once_the_writer_is_quiet(db_path: Path) -> None:
    # the gateway keeps 64 MiB; a test burst is smaller
    store = await Store.open(db_path, checkpoint_interval=0.01, wal_keep_bytes=64 * 1024)
    wal = Path(f"{db_path}-wal")
    try:
        session = await new_session(store)
        await asyncio.gather(*(store.append_messages(session.id, [user(f"burst {n} " * 50)]) for n in range(200)))
        assert wal.stat().st_size > 64 * 1024
        await eventually(lambda: wal.stat().st_size == 0, "the WAL file to be truncated")
        await store.append_messages(session.id, [user("after the truncation")])
        assert len(await store.load_messages(session.id)) == 201
    finally:
        await store.close()

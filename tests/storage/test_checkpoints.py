"""Keeping the WAL short: background checkpoints, and when the writer restarts the WAL itself."""

from __future__ import annotations

import asyncio
from pathlib import Path

from storage import Store
from storage.writer import WAL_RESTART_FRAMES
from tests.storage.conftest import new_session, traced, user
from tests.waiting import eventually


async def test_the_writer_copies_the_wal_tail_only_once_a_background_round_found_the_wal_long(
    db_path: Path,
) -> None:
    # The background task never runs here (an hour between rounds): the test reports its rounds.
    store = await Store.open(db_path, checkpoint_interval=3600)
    progress = store._writer.progress
    try:
        session = await new_session(store)
        async with traced(store) as statements:

            async def copies() -> int:
                await store._writer.run(lambda conn: None)  # the writer looks after a batch: wait for the next
                return sum("wal_checkpoint" in sql for sql in statements)

            progress.wal_frames, progress.background_checkpoints = WAL_RESTART_FRAMES - 1, 1
            await store.append_messages(session.id, [user("a round found a short WAL")])
            assert await copies() == 0
            progress.wal_frames, progress.background_checkpoints = WAL_RESTART_FRAMES, 2
            await store.append_messages(session.id, [user("a round found a long WAL")])
            assert await copies() == 1
            await store.append_messages(session.id, [user("no new round since")])
            assert await copies() == 1
    finally:
        await store.close()


async def test_a_writer_that_pauses_starts_the_wal_over_without_copying_the_tail(db_path: Path) -> None:
    """Two bursts with a pause between them: the background checkpoint catches up in the pause, and the
    second burst writes the WAL from its start again instead of after the first (the file does not grow)."""
    store = await Store.open(db_path, checkpoint_interval=0.01)
    wal = Path(f"{db_path}-wal")
    try:
        session = await new_session(store)

        async def burst(name: str) -> None:
            await asyncio.gather(*(store.append_messages(session.id, [user(f"{name} {n} " * 50)]) for n in range(200)))

        await burst("first")
        first = wal.stat().st_size
        rounds = store._writer.progress.background_checkpoints
        await eventually(lambda: store._writer.progress.background_checkpoints >= rounds + 2,
                         "two background checkpoints in the pause")  # fmt: skip
        await burst("second")
        assert wal.stat().st_size <= first
    finally:
        await store.close()


async def test_a_wal_file_grown_past_its_keep_size_is_truncated_once_the_writer_is_quiet(db_path: Path) -> None:
    store = await Store.open(db_path, checkpoint_interval=0.01)
    store._maintenance._keep_bytes = 64 * 1024  # the gateway keeps 64 MiB; a test burst is smaller
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

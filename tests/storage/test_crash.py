"""A writer killed with SIGKILL loses nothing it acknowledged and leaves no partial transaction."""

from __future__ import annotations

import asyncio
import os
import re
import signal
import sqlite3
import sys
from pathlib import Path

from storage import Store

CRASH_WRITER = Path(__file__).with_name("crash_writer.py")
BATCH = 3  # messages per append call in crash_writer.py
ACKS_BEFORE_KILL = 300


async def test_sigkill_loses_no_acknowledged_message(db_path: Path) -> None:
    child = await asyncio.create_subprocess_exec(
        sys.executable, str(CRASH_WRITER), str(db_path), stdout=asyncio.subprocess.PIPE
    )
    assert child.stdout is not None
    session_line = (await child.stdout.readline()).decode()
    session_id = session_line.split()[1]
    acked_seqs: set[int] = set()
    while len(acked_seqs) < ACKS_BEFORE_KILL * BATCH:
        first, last, _ = map(int, (await child.stdout.readline()).split()[1:])
        acked_seqs.update(range(first, last + 1))
    os.kill(child.pid, signal.SIGKILL)
    for line in (await child.stdout.read()).decode().splitlines():  # acks already in the pipe count too
        first, last, _ = map(int, line.split()[1:])
        acked_seqs.update(range(first, last + 1))
    assert await child.wait() == -signal.SIGKILL

    with sqlite3.connect(db_path) as conn:  # before the store opens: what the killed process left
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.execute("INSERT INTO messages_fts(messages_fts) VALUES ('integrity-check')")
    async with await Store.open(db_path) as store:
        history = await store.load_messages(session_id)
    seqs = [m.seq for m in history]
    assert seqs == list(range(1, len(seqs) + 1))
    assert acked_seqs <= set(seqs)
    calls: dict[str, set[str]] = {}
    for message in history:
        match = re.match(r"message (\d+)\.(\d+) ", message.content)
        assert match is not None
        calls.setdefault(match.group(1), set()).add(match.group(2))
    assert all(parts == {"0", "1", "2"} for parts in calls.values())  # each call all or nothing

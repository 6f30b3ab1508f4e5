"""Catch-up points benchmark: how long finding where each open conversation last heard from takes.

``python -m bench.catch_up [--quick] [--json]``

Every liveness probe of a quiet connection, and every catch-up after a reconnect, asks the store
for the chats of a platform with an open session and the last message stored from each
(``Store.last_heard``). A busy gateway's inbox holds a week of accepted messages, each with its
payload as JSON. The run fills a real database (through the store's own migrations) with
SESSIONS open sessions and ROWS inbox rows spread over them, then times ``Store.last_heard``
for the 100 most recently active chats.

The baseline, measured on the same database in the same run, is the first way this was written:
one query that reads every payload of the platform's inbox and groups them by chat
(:data:`SCAN`). Target: ``points_p50_ms`` at most TARGET_MS and at least SPEEDUP_FLOOR times
faster than the scan; and both must name the same message for every chat.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from bench.common import emit, parse_args, percentile, say
from storage import Store

TARGET_MS: Final = 100.0
SPEEDUP_FLOOR: Final = 5.0
LIMIT: Final = 100
PLATFORM: Final = "discord"

SCAN: Final = """
    WITH open AS (
        SELECT chat_id, thread_id, MAX(chat_type) AS chat_type, MAX(started_at) AS started_at
        FROM sessions WHERE platform = ?1 AND ended_at IS NULL GROUP BY chat_id, thread_id
    ), heard AS (
        SELECT payload->>'chat_id' AS chat_id, payload->>'thread_id' AS thread_id,
               payload->>'message_id' AS message_id, MAX(payload->>'timestamp') AS at
        FROM inbox WHERE platform = ?1 GROUP BY 1, 2
    )
    SELECT o.chat_id, h.message_id FROM open AS o LEFT JOIN heard AS h
        ON h.chat_id = o.chat_id AND h.thread_id IS o.thread_id
    ORDER BY COALESCE(h.at, o.started_at) DESC LIMIT ?2"""


async def build(path: Path, sessions: int, rows: int) -> None:
    """A database of ``sessions`` open DMs and ``rows`` accepted messages (each chat's in send order)."""
    store = await Store.open(path)
    for chat in range(sessions):
        await store.create_session(session_key=f"{PLATFORM}:dm:{chat}", platform=PLATFORM, chat_id=str(chat),
                                   chat_type="dm")  # fmt: skip
    await store.close()
    base = 1.79e9
    with sqlite3.connect(path) as conn:
        conn.executemany(
            "INSERT INTO inbox (platform, event_id, session_key, payload, status, received_at) VALUES (?, ?, ?, ?, ?, ?)",
            (
                (PLATFORM, str(10**17 + n), f"{PLATFORM}:dm:{n % sessions}", json.dumps({
                    "platform": PLATFORM, "event_id": str(10**17 + n), "chat_id": str(n % sessions), "chat_type": "dm",
                    "user_id": str(n % sessions), "text": "a message of ordinary length, " * 4,
                    "message_id": str(10**17 + n), "thread_id": None, "timestamp": base + n,
                }), "done", base + n)  # fmt: skip
                for n in range(rows)
            ),
        )


async def measure(path: Path, rounds: int) -> dict[str, float | int | bool]:
    store = await Store.open(path)
    try:
        await store.last_heard(PLATFORM, limit=LIMIT)  # warm the page cache for both
        ours = []
        for _ in range(rounds):
            started = time.perf_counter()
            points = await store.last_heard(PLATFORM, limit=LIMIT)
            ours.append((time.perf_counter() - started) * 1000)
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute(SCAN, (PLATFORM, LIMIT)).fetchall()
        scans = []
        for _ in range(max(1, rounds // 2)):
            started = time.perf_counter()
            scanned = conn.execute(SCAN, (PLATFORM, LIMIT)).fetchall()
            scans.append((time.perf_counter() - started) * 1000)
    same = {p.chat_id: p.message_id for p in points} == dict(scanned)
    p50, scan_p50 = percentile(ours, 50), percentile(scans, 50)
    return {
        "points_p50_ms": round(p50, 2), "points_max_ms": round(max(ours), 2), "scan_p50_ms": round(scan_p50, 2),
        "speedup": round(scan_p50 / p50, 1) if p50 else 0.0, "chats": len(points), "same_answer": same,
    }  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(__doc__.splitlines()[0], argv)
    sessions, rows, rounds = (2_000, 100_000, 5 if args.quick else 20)
    with tempfile.TemporaryDirectory(prefix="bench-catch-up-") as tmp:
        path = Path(tmp) / "state.db"
        say(f"catch-up points: {sessions:,} open sessions, {rows:,} inbox rows, the {LIMIT} most recently active chats")
        asyncio.run(build(path, sessions, rows))
        results = {"sessions": sessions, "inbox_rows": rows, **asyncio.run(measure(path, rounds))}
    emit(results, as_json=args.json, targets={"points_p50_ms": f"<= {TARGET_MS:g}", "speedup": f">= {SPEEDUP_FLOOR:g}",
                                               "same_answer": "True"})  # fmt: skip
    failed = results["points_p50_ms"] > TARGET_MS or results["speedup"] < SPEEDUP_FLOOR or not results["same_answer"]
    if failed:
        say("FAIL: finding the catch-up points is too slow, or it names other messages than the scan")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

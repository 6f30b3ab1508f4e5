"""``bench.catch_up`` on a small database: the store's answer and the scan it is compared with name the same
message for every chat, so the speedup it reports is between two ways to the same answer."""

from __future__ import annotations

from pathlib import Path

from bench.catch_up import LIMIT, build, measure


async def test_the_store_and_the_baseline_scan_agree_on_a_small_database(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    await build(path, sessions=150, rows=3_000)

    results = await measure(path, rounds=2)

    assert results["chats"] == LIMIT
    assert results["same_answer"] is True

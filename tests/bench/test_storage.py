"""``bench.storage`` on a few rows: each engine's preload holds the planted words where the store's search finds them,
and the appends go through the store; the report judges each figure against its target."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bench import storage_postgres
from bench.storage import preload, verdict
from bench.storage_workload import PLANTED_COPIES, Corpus, concurrent_appends, searches
from storage import PostgresStore, Store


def test_the_sqlite_preload_is_what_the_store_reads(tmp_path: Path) -> None:
    db = tmp_path / "bench.db"

    planted = preload(db, Corpus(seed=1), sessions=4, per_session=20, plant=1)

    async def read() -> tuple[int, list[int]]:
        async with await Store.open(db) as store:
            history = await store.load_messages("pre00003")
            return len(history), [len(await store.search(word)) for word in planted["rare"]]

    assert asyncio.run(read()) == (20, [PLANTED_COPIES])


async def test_the_postgresql_preload_and_appends_go_through_the_store(postgres_dsn: str) -> None:
    corpus = Corpus(seed=1)

    planted = await storage_postgres.preload(postgres_dsn, corpus, sessions=4, per_session=20, plant=1)

    store = await PostgresStore.open(postgres_dsn)
    try:
        assert len(await store.load_messages("pre00003")) == 20
        rate, latencies = await concurrent_appends(store, corpus.workload(3, 4))
        assert len(latencies) == 12 and rate > 0
        figures = await searches(store, planted, repeat=1)
        assert set(figures) >= {"search_p50_ms", "search_prefix_p50_ms", "search_cjk2_p50_ms"}
    finally:
        await store.close()


def test_a_figure_is_judged_against_its_target() -> None:
    assert verdict(3_100.0, ">= 3,000") == "ok"
    assert verdict(2_900.0, ">= 3,000") == "MISSED"
    assert verdict(50.0, "<= 50") == "ok"
    assert verdict(50.1, "<= 50") == "MISSED"

"""Pairing on PostgreSQL under concurrency: writers run side by side on the pool (and, with several gateways, in
other processes), so the two atomic steps of the contract must hold without SQLite's single writer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio

from storage import PairingCode, PostgresStore


@pytest_asyncio.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.open(postgres_dsn) as opened:
        yield opened


def code(value: str, user: str = "u1", *, at: float = 1000.0) -> PairingCode:
    return PairingCode(code=value, platform="telegram", user_id=user, user_name="Ann", chat_id="c1",
                       created_at=at, expires_at=at + 3600.0)  # fmt: skip


async def test_concurrent_offers_to_one_user_store_one_code(store: PostgresStore) -> None:
    for attempt in range(5):  # each round: ten offers at once on ten pooled connections
        at = 2000.0 + attempt * 1000
        results = await asyncio.gather(
            *(store.pairing.add_code(code(f"R{attempt}N{n}", at=at), unless_offered_since=at - 1) for n in range(10))
        )
        assert sorted(results) == [False] * 9 + [True], f"round {attempt}: {results}"
    assert len(await store.pairing.pending(now=2500.0)) == 5


async def test_offers_to_different_users_do_not_wait_for_each_other(store: PostgresStore) -> None:
    results = await asyncio.gather(
        *(store.pairing.add_code(code(f"USER{n}", user=f"u{n}"), unless_offered_since=900.0) for n in range(10))
    )
    assert results == [True] * 10


async def test_concurrent_takes_of_one_code_hand_it_out_once(store: PostgresStore) -> None:
    for attempt in range(5):
        await store.pairing.add_code(code(f"TAKE{attempt}"))
        taken = await asyncio.gather(*(store.pairing.take_code("telegram", f"TAKE{attempt}", 1001.0) for _ in range(10)))
        assert sum(result is not None for result in taken) == 1, f"round {attempt}"
        (winner,) = [result for result in taken if result is not None]
        assert winner.code == f"TAKE{attempt}" and winner.used_at == 1001.0

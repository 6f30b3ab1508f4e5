"""Retrying PostgreSQL transactions (storage/postgres/retry.py) against a real server: conflicting
SERIALIZABLE transactions and deadlocks both land, a connection ended mid-transaction is replaced and the
transaction lands once, a server that goes away is waited for (and logged) until it returns, and a
constraint violation is raised at once as the store's error, not retried."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from storage.errors import WriteFailedError
from storage.log import log
from storage.postgres.faults import Trouble
from storage.postgres.retry import run_with_retry
from storage.retry_policy import DEFAULT_RETRY
from tests.fakes.postgres_server import PostgresServer
from tests.waiting import eventually


async def no_reset(connection: object) -> None:
    """The pool as the engine configures it: no reset query on release."""


@pytest_asyncio.fixture
async def pool(postgres_dsn: str) -> AsyncIterator[asyncpg.Pool]:
    async with asyncpg.create_pool(postgres_dsn, min_size=2, max_size=4, reset=no_reset) as pool:
        await pool.execute("CREATE TABLE items (id int PRIMARY KEY, value int NOT NULL)")
        yield pool


def retries(logs: list[dict[str, object]], trouble: Trouble) -> list[dict[str, object]]:
    return [entry for entry in logs if entry["event"] == "storage.retrying" and entry["trouble"] == trouble.value]


async def test_conflicting_serializable_transactions_both_land(pool: asyncpg.Pool) -> None:
    both_read = asyncio.Barrier(2)
    tries = {"a": 0, "b": 0}

    def next_item(name: str):  # each inserts the row that follows the ones it saw: write skew without a retry
        async def operation() -> None:
            tries[name] += 1
            async with pool.acquire() as conn, conn.transaction(isolation="serializable"):
                top = await conn.fetchval("SELECT coalesce(max(id), 0) FROM items")
                if tries[name] == 1:
                    await both_read.wait()
                await conn.execute("INSERT INTO items VALUES ($1, $2) ON CONFLICT DO NOTHING", top + 1, len(name))
        return operation

    with capture_logs() as logs:
        await asyncio.gather(*(run_with_retry(next_item(name), policy=DEFAULT_RETRY, log=log) for name in tries))
    assert [row["id"] for row in await pool.fetch("SELECT id FROM items ORDER BY id")] == [1, 2]
    assert sorted(tries.values()) == [1, 2]
    assert "serialization" in str(retries(logs, Trouble.CONFLICT)[0]["reason"])


async def test_a_deadlock_is_retried_and_both_land(pool: asyncpg.Pool) -> None:
    await pool.execute("INSERT INTO items VALUES (1, 0), (2, 0)")
    both_locked = asyncio.Barrier(2)
    tries = {(1, 2): 0, (2, 1): 0}

    def add_to_both(order: tuple[int, int]):  # locks the two rows in the given order
        async def operation() -> None:
            tries[order] += 1
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("UPDATE items SET value = value + 1 WHERE id = $1", order[0])
                if tries[order] == 1:
                    await both_locked.wait()
                await conn.execute("UPDATE items SET value = value + 1 WHERE id = $1", order[1])
        return operation

    with capture_logs() as logs:
        await asyncio.gather(*(run_with_retry(add_to_both(order), policy=DEFAULT_RETRY, log=log) for order in tries))
    assert [tuple(row) for row in await pool.fetch("SELECT id, value FROM items ORDER BY id")] == [(1, 2), (2, 2)]
    assert "deadlock" in str(retries(logs, Trouble.CONFLICT)[0]["reason"])


async def test_a_connection_ended_mid_transaction_is_replaced_and_the_transaction_lands_once(
    pool: asyncpg.Pool,
) -> None:
    inside, terminated = asyncio.Event(), asyncio.Event()
    backends: list[int] = []

    async def operation() -> None:
        async with pool.acquire() as conn, conn.transaction():
            backends.append(await conn.fetchval("SELECT pg_backend_pid()"))
            await conn.execute("INSERT INTO items VALUES (1, 1)")
            if len(backends) == 1:
                inside.set()
                await terminated.wait()
            await conn.execute("UPDATE items SET value = value + 1 WHERE id = 1")

    with capture_logs() as logs:
        task = asyncio.create_task(run_with_retry(operation, policy=DEFAULT_RETRY, log=log))
        await inside.wait()
        async with pool.acquire() as killer:
            assert await killer.fetchval("SELECT pg_terminate_backend($1)", backends[0])
            await eventually(lambda: killer.fetchval("SELECT NOT EXISTS (SELECT FROM pg_stat_activity WHERE pid = $1)",
                                                     backends[0]), "the backend to end")  # fmt: skip
        terminated.set()
        await task
    assert len(backends) == 2 and backends[0] != backends[1]
    assert [tuple(row) for row in await pool.fetch("SELECT id, value FROM items")] == [(1, 2)]
    assert retries(logs, Trouble.SERVER_AWAY)


async def test_a_server_that_goes_away_is_waited_for_and_the_transaction_lands_when_it_returns(
    postgres: PostgresServer, pool: asyncpg.Pool
) -> None:
    async def operation() -> None:
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("INSERT INTO items VALUES (7, 7)")

    await asyncio.to_thread(postgres.pause)
    try:
        with capture_logs() as logs:
            task = asyncio.create_task(run_with_retry(operation, policy=DEFAULT_RETRY, log=log, what="append"))
            await eventually(lambda: len(retries(logs, Trouble.SERVER_AWAY)) >= 3, "retries while the server is away")
            assert not task.done()
            await asyncio.to_thread(postgres.resume)
            await task
    finally:
        if not (postgres.base / "data" / "postmaster.pid").exists():  # type: ignore[operator]
            await asyncio.to_thread(postgres.resume)
    waiting = retries(logs, Trouble.SERVER_AWAY)
    assert all(entry["what"] == "append" and entry["delay_ms"] and "reach" in str(entry["reason"])
               for entry in waiting)  # fmt: skip
    assert [entry["event"] for entry in logs if entry["event"] == "storage.reconnected"] == ["storage.reconnected"]
    assert await pool.fetchval("SELECT count(*) FROM items WHERE id = 7") == 1


async def test_a_constraint_violation_is_not_retried(pool: asyncpg.Pool) -> None:
    await pool.execute("INSERT INTO items VALUES (1, 1)")
    calls = 0

    async def operation() -> None:
        nonlocal calls
        calls += 1
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("INSERT INTO items VALUES (1, 2)")

    with capture_logs() as logs, pytest.raises(WriteFailedError, match="items_pkey") as failed:
        await run_with_retry(operation, policy=DEFAULT_RETRY, log=log)
    assert calls == 1 and failed.value.attempts == 1
    assert isinstance(failed.value.__cause__, asyncpg.UniqueViolationError)
    assert not [entry for entry in logs if entry["event"] == "storage.retrying"]

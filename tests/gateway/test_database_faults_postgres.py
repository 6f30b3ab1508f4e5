"""The gateway's fault sorting on the PostgreSQL engine: a server that went away is a transient fault (the turn
waits and tries again, /health says the server cannot be reached), not a bug and not a damaged database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from gateway.operations.database_health import DatabaseHealth
from storage import Fault, PostgresStore, ReadFailedError, RetryPolicy, fault_of
from tests.fakes.postgres_server import PostgresServer

QUICK_OUTAGE = RetryPolicy(first_delay=0.01, max_delay=0.05, outage=0.3)
"""Gives up on a server that is away after 0.3 s, so the failure reaches the caller."""


@pytest_asyncio.fixture
async def store(postgres: PostgresServer, postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    opened = await PostgresStore.open(postgres_dsn, retry=QUICK_OUTAGE)
    try:
        yield opened
    finally:
        await opened.close()


async def test_a_stopped_server_is_unreachable_and_health_says_so(store: PostgresStore, postgres: PostgresServer) -> None:
    health = DatabaseHealth(store.where)
    postgres.pause()
    try:
        with pytest.raises(ReadFailedError) as failed:
            await store.probe()
    finally:
        postgres.resume()
    shown = health.to_dict(failed.value)
    assert shown["ok"] is False and "cannot be reached" in shown["reason"], shown
    assert "pg_isready" in shown["hint"] and "restore" not in shown["hint"], shown
    fault = fault_of(failed.value)
    assert fault is not None and fault.transient  # the turn retrier waits for it instead of counting a crash
    assert fault is Fault.UNREACHABLE
    await store.probe()  # back: the same store reads again


async def test_a_server_side_failure_that_is_our_own_is_no_fault(store: PostgresStore) -> None:
    async def bad_sql(conn):  # type: ignore[no-untyped-def]
        await conn.execute("SELECT * FROM no_such_table")

    with pytest.raises(ReadFailedError) as failed:
        await store._read(bad_sql)  # noqa: SLF001  (the store's own plumbing, as every member uses it)
    assert fault_of(failed.value) is None

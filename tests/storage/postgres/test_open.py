"""Opening a PostgreSQL store while the server is not answering yet: the gateway waits for it, a command does not.

A gateway started before its database (a reboot where the database comes up second, a container started
first) must wait and say so, as a running gateway waits for a server that went away, rather than exit with
a status systemd does not restart on. A CLI command asks once and fails at once, naming the database.
"""

from __future__ import annotations

import asyncio
import os

import pytest
from structlog.testing import capture_logs

from storage import DatabaseInUseError, PostgresStore, ReadFailedError
from tests.fakes.postgres_server import PostgresServer
from tests.waiting import eventually


async def test_the_gateway_waits_for_a_server_that_is_not_up_yet(postgres: PostgresServer, postgres_dsn: str) -> None:
    await asyncio.to_thread(postgres.pause)
    try:
        with pytest.raises(ReadFailedError):
            await PostgresStore.open(postgres_dsn)  # a command: asks once
        with capture_logs() as logs:
            opening = asyncio.create_task(PostgresStore.open(postgres_dsn, wait_for_server=True))
            await eventually(lambda: sum(e["event"] == "storage.retrying" for e in logs) >= 2, "the wait to be logged")
            assert not opening.done()
            await asyncio.to_thread(postgres.resume)
            store = await opening
    finally:
        if not (postgres.base / "data" / "postmaster.pid").exists():  # type: ignore[operator]
            await asyncio.to_thread(postgres.resume)
    try:
        session = await store.create_session(session_key="telegram:1", platform="telegram", chat_id="1")
        assert await store.get_session(session.id) == session
    finally:
        await store.close()
    waits = [e for e in logs if e["event"] == "storage.retrying"]
    # Unreachable while paused; and, the moment it is resumed, perhaps still starting up.
    assert all(e["what"] == "connect" and ("reach" in str(e["reason"]) or "starting up" in str(e["reason"]))
               for e in waits)  # fmt: skip
    assert [e["event"] for e in logs if e["event"] == "storage.reconnected"] == ["storage.reconnected"]


async def test_an_unknown_database_is_not_waited_for(postgres_dsn: str) -> None:
    with pytest.raises(ReadFailedError, match="does not exist"):
        await PostgresStore.open(postgres_dsn.rsplit("/", 1)[0] + "/no_such_database", wait_for_server=True)


async def test_a_second_gateway_on_the_database_is_refused_until_the_first_stops(postgres_dsn: str) -> None:
    first = await PostgresStore.open(postgres_dsn, exclusive=True)
    try:
        with pytest.raises(DatabaseInUseError, match=rf"switchboard gateway pid {os.getpid()} on .*Stop it first"):
            await PostgresStore.open(postgres_dsn, exclusive=True)
        command = await PostgresStore.open(postgres_dsn)  # the CLI beside a running gateway: no lock asked
        await command.close()
    finally:
        await first.close()
    second = await PostgresStore.open(postgres_dsn, exclusive=True)
    await second.close()

"""A PostgreSQL server that goes away in the middle of a burst: the real gateway process waits, loses nothing.

The gateway runs as ``switchboard run`` does, on a PostgreSQL server of its own (started for this test, so
stopping it disturbs no other test), with the relay platform of the crash test in the test process. The
crash test's burst (200 messages over 20 chats, in rounds) arrives; once replies naming 40 of them were
delivered, the server is stopped while the burst keeps arriving, stays away a few seconds, and starts again
on the same port with everything it held. The gateway must wait for it (``storage.retrying``, then
``storage.reconnected`` in gateway.log) and carry on: every message named by exactly one reply, in order per
chat, no reply delivered twice, nothing unfinished in the inbox or the outbox. Nothing is timed: the waits
only stop a hang.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from tests.fakes.model_server import ModelServer, Text
from tests.fakes.fixtures import own_postgres
from tests.fakes.postgres_server import PostgresServer
from tests.fakes.relay_platform import RelayPlatform
from tests.gateway.conftest import write_config
from tests.gateway.engines import storage_config
from tests.gateway.processes import terminate
from tests.gateway.test_crash import (
    CHATS,
    HANG_GUARD,
    KILL_AFTER_ANSWERED,
    burst,
    check_database,
    check_replies,
    launch,
    named,
    until,
)

pytestmark = pytest.mark.timeout(300)  # the real gateway process and a PostgreSQL server of its own

AWAY_SECONDS = 30.0
"""How long the server stays away: the issue's 30 s, part of the scenario (inside the retry policy's two minutes)."""


@pytest.fixture
def own_server() -> Iterator[PostgresServer]:
    """A PostgreSQL server for this test alone: stopping it disturbs no other test's database."""
    yield from own_postgres()


async def test_a_server_restart_mid_burst_loses_nothing(
    tmp_path, model_server: ModelServer, relay: RelayPlatform, own_server: PostgresServer
) -> None:  # type: ignore[no-untyped-def]
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    model_server.latency = 0.1
    home = tmp_path / "home"
    config = write_config(home, model_server, storage_config(own_server.dsn))
    log_path = home / "logs" / "gateway.log"
    messages = burst()
    texts = {text for _, text in messages}

    async def feed() -> None:
        for index, (chat, text) in enumerate(messages, 1):
            await relay.post(chat, text)
            if index % CHATS == 0:
                await asyncio.sleep(0.1)  # pacing, part of the scenario: users write over time, not all at once

    feeder: asyncio.Task[None] | None = None
    gateway = launch(home, config, relay.base_url)
    try:
        await until(lambda: log_path.exists() and "gateway.started" in log_path.read_text("utf-8"), gateway, "start")
        feeder = asyncio.create_task(feed())
        await until(lambda: len(named(relay.sent)) >= KILL_AFTER_ANSWERED, gateway, "the first answers")
        await asyncio.to_thread(own_server.pause)
        try:
            answered_while_away = len(named(relay.sent))
            await asyncio.sleep(AWAY_SECONDS)  # the server is away; the burst keeps arriving
        finally:
            await asyncio.to_thread(own_server.resume)
        await feeder
        await until(lambda: texts <= set(named(relay.sent)), gateway, "a reply naming every message")
    finally:
        if feeder is not None:
            feeder.cancel()
        code = await terminate(gateway, limit=HANG_GUARD)
    assert code == 0, (home / "stderr.txt").read_text("utf-8")[-3000:]
    assert answered_while_away < len(messages), "the server went away after the burst, not in the middle of it"

    check_replies(relay, texts)
    assert relay.repeats == []  # one run, no crash: nothing was ever sent twice, not even dropped by its nonce
    await check_database(own_server.dsn, relay, len(messages))
    log = log_path.read_text("utf-8")
    assert "storage.retrying" in log and "storage.reconnected" in log
    assert not [event for event in ("turn.failed", "turn.crashed", "turn.abandoned", "delivery.failed") if event in log]

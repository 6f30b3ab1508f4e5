"""The short turn id gateway.log shows: stable across versions, so old and new log lines of a turn match,
and the same on every line of a turn, from the message accepted to the reply sent (after a restart too)."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest

from adapters.contract import RecipientUnavailable
from gateway.operations.logs import configure_logging, short_turn_id
from tests.fakes.model_server import ModelServer, Text
from tests.gateway.conftest import GatewayFactory
from tests.gateway.engines import open_database
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL


@pytest.mark.parametrize("turn_id", ["telegram:1234", "slack:C1:1700000000.000100", "discord:99", "webchat:ünï"])
def test_short_turn_id_is_the_start_of_the_uuid5(turn_id: str) -> None:
    assert short_turn_id(turn_id) == uuid.uuid5(uuid.NAMESPACE_URL, turn_id).hex[:8]
    assert short_turn_id(turn_id) != short_turn_id(turn_id + "x")


@pytest.fixture
def log(tmp_path: Path) -> Path:
    """gateway.log of the gateways a test starts, at info."""
    path = tmp_path / "gateway.log"
    configure_logging(level="info", file=path, console=False)
    return path


def turns_of(log: Path, event: str) -> list[str]:
    """The ``turn=`` value of every ``event`` line in gateway.log."""
    found = []
    for line in log.read_text(encoding="utf-8").splitlines():
        if f" {event} " in line:
            match = re.search(r" turn=(\S+)", line)
            found.append(match.group(1) if match else "")
    return found


async def test_one_turn_id_from_the_message_to_its_reply(
    start_gateway: GatewayFactory, model_server: ModelServer, log: Path
) -> None:
    running = await start_gateway()
    model_server.script(Text("first"), Text("second"))
    message = await running.adapter.inject("hello", chat_id="c1")
    await running.adapter.wait_sent(1)
    await running.adapter.inject("and again", chat_id="c1")
    await running.adapter.wait_sent(2)
    await running.gateway.shutdown()
    mine = short_turn_id(f"loopback:{message.event_id}")
    for event in ("inbound.accepted", "turn.started", "turn.done", "delivery.sent"):
        turns = turns_of(log, event)
        assert len(turns) == 2 and turns[0] == mine and turns[1] not in ("", mine), (event, turns)


async def test_chunks_sent_after_a_restart_are_logged_under_their_turn(
    start_gateway: GatewayFactory, tmp_path: Path, log: Path, storage_url: str | None
) -> None:
    home = tmp_path / "home"
    (home / "logs").mkdir(parents=True)
    store = await open_database(home, storage_url)
    try:
        await store.outbox_add("loopback:41", "loopback", "c1", None, ["a reply queued before the restart"])
        await store.outbox_add("progress:loopback:42", "loopback", "c2", None, ["Working on it: reading files"])
    finally:
        await store.close()
    running = await start_gateway(home=home)
    await running.adapter.wait_sent(2)
    await running.gateway.shutdown()
    assert sorted(turns_of(log, "delivery.sent")) == sorted([short_turn_id("loopback:41"), short_turn_id("loopback:42")])


async def test_a_chunk_given_up_is_logged_under_the_short_turn_id(
    start_gateway: GatewayFactory, model_server: ModelServer, log: Path
) -> None:
    running = await start_gateway()
    running.adapter.failures = [RecipientUnavailable("the bot was removed from the chat")]
    model_server.script(Text("nobody will see this"))
    message = await running.adapter.inject("hello", chat_id="c1")
    mine = short_turn_id(f"loopback:{message.event_id}")
    await eventually(lambda: turns_of(log, "delivery.failed"), "the chunk to be given up")
    assert turns_of(log, "delivery.failed") == [mine]

"""Catching up at start, end to end: what Alice sends on Discord while the gateway is stopped is answered
once after it starts again (Discord never redelivers it: the new connection identifies afresh, which is no
gap). The real Gateway and the real Discord adapter (discord.py) against the emulator, started, stopped
and started again on the same home.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml
from structlog.testing import capture_logs

from config import load_config
from gateway.adapter_loader import load_adapter
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.inbound.catch_up import missed_note
from gateway.runner import search_function
from storage import Store
from tests.adapters.discord.conftest import ALICE, discord_section
from tests.fakes.discord_api import DiscordEmulator, SentMessage
from tests.fakes.model_server import ModelServer
from tests.gateway.conftest import settled
from tests.waiting import eventually

Run = Callable[[], Awaitable[tuple[Gateway, Store]]]


@pytest_asyncio.fixture
async def run_gateway(model_server: ModelServer, emulator: DiscordEmulator, tmp_path: Path) -> AsyncIterator[Run]:
    """Start a gateway with Discord on the same home each time (the test shuts each down); any left running
    is shut down at the end."""
    home = tmp_path / "home"
    home.mkdir(parents=True, exist_ok=True)
    config = {
        "model": {"api_key": "test", "base_url": model_server.base_url},
        "platforms": {"discord": discord_section(emulator)},
        "catch_up": {"answer_within_minutes": 30, "old_messages": "note"},
        "sessions": {"debounce_ms": 0}, "health": {"port": 0}, "logging": {"console": False},
        "gateway": {"drain_timeout": 2},
    }  # fmt: skip
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    started: list[Gateway] = []

    async def start() -> tuple[Gateway, Store]:
        loaded = load_config(path, {"SWITCHBOARD_HOME": str(home)}, create_home=True)
        store = await Store.open(loaded.db_path)
        gateway = Gateway(loaded, store, [load_adapter("discord", loaded)], build_agent(loaded, search=search_function(store)))
        started.append(gateway)
        assert await gateway.start() == 1
        return gateway, store

    yield start
    for gateway in started:
        await gateway.shutdown()  # a second shutdown of one the test stopped does nothing


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


def in_dm(emulator: DiscordEmulator) -> list[SentMessage]:
    channel = emulator.world.dm_channel_for(ALICE)
    return [sent for sent in emulator.world.sent if sent.channel_id == channel]


def answering(emulator: DiscordEmulator, message: dict[str, Any]) -> list[SentMessage]:
    return [sent for sent in in_dm(emulator)
            if sent.reference is not None and str(sent.reference.get("message_id")) == message["id"]]  # fmt: skip


def asked(server: ModelServer, text: str) -> int:
    return sum(text in str(request.body["messages"][-1]["content"]) for request in server.requests)


async def caught_up_at_start(logs: list[dict[str, Any]]) -> dict[str, Any]:
    lines = await eventually(lambda: [line for line in events(logs, "adapter.catchup") if line["reason"] == "the gateway started"],
                             "the catch-up at start to be logged")  # fmt: skip
    (line,) = lines
    return line


async def test_what_was_sent_while_stopped_is_answered_once_after_the_start_and_too_old_gets_one_note(
    run_gateway: Run, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    now = time.time()
    gateway, store = await run_gateway()
    # Alice's conversation began two hours ago (its first message is dated back, so an hour-old one is newer).
    first = await emulator.dm(ALICE, "good morning", at=now - 2 * 3600)
    await eventually(lambda: answering(emulator, first), "the first message to be answered")
    await settled(store)
    await gateway.shutdown()

    old = await emulator.dm(ALICE, "what was the weather an hour ago?", at=now - 3600)  # past answer_within_minutes
    # A minute apart (two messages of one millisecond would leave the catch-up's mark on either of them).
    fresh = [await emulator.dm(ALICE, "are you back?", at=now - 120), await emulator.dm(ALICE, "tell me when you are", at=now - 60)]
    with capture_logs() as logs:
        gateway, store = await run_gateway()
        logged = await caught_up_at_start(logs)
        for message in fresh:
            await eventually(lambda m=message: answering(emulator, m), "a message sent while stopped to be answered")
        await settled(store)
    assert (logged["platform"], logged["found"], logged["new"], logged["old"]) == ("discord", 3, 3, 1)
    for message in (first, *fresh):
        assert len(answering(emulator, message)) == 1 and asked(model_server, message["content"]) == 1, message["content"]
    assert asked(model_server, old["content"]) == 0  # too old: stored, not answered
    notes = [sent for sent in in_dm(emulator) if sent.content == missed_note(1)]
    assert len(notes) == 1 and len(in_dm(emulator)) == 4  # three answers and the one note
    assert not events(logs, "adapter.gap")  # a first IDENTIFY is no gap: the start itself caught up
    await gateway.shutdown()

    with capture_logs() as logs:  # a second restart: everything was handled; nothing is answered again
        gateway, store = await run_gateway()
        logged = await caught_up_at_start(logs)
        await settled(store)
    assert (logged["found"], logged["new"], logged["old"]) == (0, 0, 0)
    assert len(in_dm(emulator)) == 4
    assert len(model_server.requests) == 3

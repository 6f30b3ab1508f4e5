"""The real gateway with the real Discord adapter (real discord.py) against the in-repo Discord emulator."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest_asyncio
import yaml

from adapters.contract import AccessPolicy, Adapter, InboundMessage
from config import load_config
from adapters.discord import DiscordAdapter
from adapters.discord.adapter import DiscordSettings
from gateway.adapter_loader import load_adapter
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.runner import search_function
from storage import Store
from tests.fakes.adapter import LoopbackAdapter
from tests.fakes.discord_api import DiscordEmulator
from tests.fakes.model_server import ModelServer
from tests.waiting import eventually

ALICE = "300000000000000001"
BOB = "300000000000000002"


@dataclass
class DiscordRun:
    gateway: Gateway
    discord: Adapter
    emulator: DiscordEmulator
    store: Store
    loopback: LoopbackAdapter | None = None


StartGateway = Callable[..., Awaitable[DiscordRun]]


@pytest_asyncio.fixture
async def emulator() -> AsyncIterator[DiscordEmulator]:
    fake = DiscordEmulator()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


def discord_section(emulator: DiscordEmulator, **overrides: Any) -> dict[str, Any]:
    section = {
        "enabled": True, "token": emulator.token, "api_base_url": emulator.api_base_url,
        "gateway_url": emulator.gateway_url, "allowed_users": [ALICE], "require_mention": True,
    }  # fmt: skip
    section.update(overrides)
    return section


@pytest_asyncio.fixture
async def start_gateway(
    model_server: ModelServer, emulator: DiscordEmulator, tmp_path: Path
) -> AsyncIterator[StartGateway]:
    """Start a gateway whose ``platforms.discord`` points at the emulator; shut down at the end."""
    started: list[DiscordRun] = []

    async def start(*, with_loopback: bool = False, **discord_overrides: Any) -> DiscordRun:
        home = tmp_path / "home"
        home.mkdir(parents=True, exist_ok=True)
        config = {
            "model": {"provider": "anthropic", "name": "claude-sonnet-4-6", "api_key": "test",
                      "base_url": model_server.base_url},
            "platforms": {"discord": discord_section(emulator, **discord_overrides)},
            "sessions": {"debounce_ms": 0}, "health": {"port": 0}, "logging": {"console": False},
            "gateway": {"drain_timeout": 2},
        }  # fmt: skip
        path = home / "config.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        loaded = load_config(path, {"SWITCHBOARD_HOME": str(home)}, create_home=True)
        store = await Store.open(loaded.db_path)
        discord = load_adapter("discord", loaded)
        loopback = LoopbackAdapter() if with_loopback else None
        adapters = [discord] if loopback is None else [loopback, discord]
        agent = build_agent(loaded, search=search_function(store))
        gateway = Gateway(loaded, store, adapters, agent, extra_access={"loopback": AccessPolicy(allow_all=True)})
        run = DiscordRun(gateway, discord, emulator, store, loopback)
        started.append(run)
        await gateway.start()
        return run

    yield start
    for run in started:
        await run.gateway.shutdown()


class Collected:
    """An intake that keeps what the adapter hands over (for tests of the conversion itself)."""

    def __init__(self) -> None:
        self.messages: list[InboundMessage] = []

    async def __call__(self, message: InboundMessage) -> None:
        self.messages.append(message)

    async def wait(self, count: int) -> list[InboundMessage]:
        await eventually(lambda: len(self.messages) >= count)
        return list(self.messages)


@pytest_asyncio.fixture
async def adapter(emulator: DiscordEmulator) -> AsyncIterator[DiscordAdapter]:
    """The adapter alone (no gateway), connected to the emulator; what it receives is kept, not answered."""
    settings = DiscordSettings(token=emulator.token, api_base_url=emulator.api_base_url,
                               gateway_url=emulator.gateway_url)  # fmt: skip
    running = DiscordAdapter(settings)
    await running.start(Collected())
    try:
        yield running
    finally:
        await running.close()


async def started(emulator: DiscordEmulator, *, allow_bots: bool = False) -> tuple[DiscordAdapter, Collected]:
    """The adapter alone, connected to the emulator, and the intake that keeps what it hands over."""
    settings = DiscordSettings(token=emulator.token, api_base_url=emulator.api_base_url,
                               gateway_url=emulator.gateway_url, allow_bots=allow_bots)  # fmt: skip
    adapter, intake = DiscordAdapter(settings), Collected()
    await adapter.start(intake)
    return adapter, intake


@pytest_asyncio.fixture
async def listening(emulator: DiscordEmulator) -> AsyncIterator[tuple[DiscordAdapter, Collected]]:
    """:func:`started` with the default settings, closed at the end."""
    running = await started(emulator)
    try:
        yield running
    finally:
        await running[0].close()

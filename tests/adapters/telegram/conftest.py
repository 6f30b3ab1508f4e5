"""The real gateway with the real Telegram adapter (aiogram) against the local Bot API emulator.

``start_telegram`` writes a config.yaml whose ``platforms.telegram`` points at
the emulator, and builds the adapter the way ``switchboard run`` does (plan,
then ``TelegramAdapter.from_config``), so the config model, the access policy
and the adapter loader all run. The model is the fake model server behind the
real anthropic SDK.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest_asyncio

from adapters.contract import InboundMessage
from adapters.telegram import TelegramAdapter, TelegramSettings
from adapters.telegram.polling import PollingSettings
from config import load_config
from config.loader import LoadedConfig
from config.plan import build_plan
from gateway.adapter_loader import load_adapters
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.runner import search_function
from storage import Store
from tests.fakes.model_server import ModelServer
from tests.fakes.telegram_api import Chat, TelegramAPI, User
from tests.gateway.conftest import write_config
from tests.waiting import eventually

ALICE = User(id=1001, first_name="Alice", username="alice")
BOB = User(id=1002, first_name="Bob")


@dataclass
class TelegramRun:
    gateway: Gateway
    adapter: TelegramAdapter
    store: Store
    home: Path
    loaded: LoadedConfig

    async def health(self) -> dict[str, Any]:
        assert self.gateway.health_url
        async with aiohttp.ClientSession() as session, session.get(self.gateway.health_url) as response:
            return json.loads(await response.text())


StartTelegram = Callable[..., Awaitable[TelegramRun]]


def telegram_section(api: TelegramAPI, **overrides: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "token": api.token, "api_base_url": api.base_url, "allowed_users": [str(ALICE.id), str(BOB.id)],
        "poll_timeout": 1, "stall_timeout": 30,
    }  # fmt: skip
    section.update(overrides)
    return {"platforms": {"telegram": section}}


@pytest_asyncio.fixture
async def start_telegram(
    model_server: ModelServer, telegram_api: TelegramAPI, tmp_path: Path
) -> AsyncIterator[StartTelegram]:
    """Start gateways on demand (``start_telegram(telegram={...}, sessions={...})``); all are shut down at the end.

    ``tune`` may change the adapter's timings before it starts (settings config.yaml does not offer).
    """
    started: list[TelegramRun] = []

    async def start(
        *,
        telegram: dict[str, Any] | None = None,
        tune: Callable[[TelegramAdapter], None] | None = None,
        **sections: dict[str, Any],
    ) -> TelegramRun:
        home = tmp_path / "home"
        overrides = {**telegram_section(telegram_api, **(telegram or {})), **sections}
        loaded = load_config(write_config(home, model_server, overrides), {"SWITCHBOARD_HOME": str(home)},
                             create_home=True)  # fmt: skip
        plan = build_plan(loaded)
        assert plan.ready, plan.blockers
        adapters = load_adapters(plan.enabled, loaded)
        assert [type(a) for a in adapters] == [TelegramAdapter]
        if tune is not None:
            tune(adapters[0])  # type: ignore[arg-type]
        store = await Store.open(loaded.db_path)
        gateway = Gateway(loaded, store, adapters, build_agent(loaded, search=search_function(store)))
        await gateway.start()
        run = TelegramRun(gateway, adapters[0], store, home, loaded)  # type: ignore[arg-type]
        started.append(run)
        return run

    yield start
    for run in started:
        await run.gateway.shutdown()


async def _ignore(message: InboundMessage) -> None:
    pass


@pytest_asyncio.fixture
async def adapter(telegram_api: TelegramAPI) -> AsyncIterator[TelegramAdapter]:
    """The adapter alone (no gateway), connected to the emulator, with Bob's private chat known."""
    telegram_api.add_chat(Chat.private(BOB))
    running = TelegramAdapter(TelegramSettings(token=telegram_api.token, api_base_url=telegram_api.base_url))
    await running.start(_ignore)
    try:
        yield running
    finally:
        await running.close()


@dataclass
class Listening:
    """The adapter alone, long polling the emulator, keeping every inbound message it hands the gateway."""

    adapter: TelegramAdapter
    received: list[InboundMessage]

    async def next(self, count: int = 1) -> list[InboundMessage]:
        """Wait for ``count`` more messages than were taken so far; returns them (and takes them)."""
        await eventually(lambda: len(self.received) >= count, f"{count} inbound message(s)")
        taken, self.received[:] = self.received[:count], self.received[count:]
        return taken


@pytest_asyncio.fixture
async def listening(telegram_api: TelegramAPI) -> AsyncIterator[Listening]:
    received: list[InboundMessage] = []

    async def keep(message: InboundMessage) -> None:
        received.append(message)

    settings = TelegramSettings(token=telegram_api.token, api_base_url=telegram_api.base_url,
                                polling=PollingSettings(poll_timeout=1))  # fmt: skip
    running = TelegramAdapter(settings)
    await running.start(keep)
    try:
        yield Listening(running, received)
    finally:
        await running.close()

"""The real gateway with the real SlackAdapter (slack-bolt) against the in-repo fake Slack.

``platforms.slack`` is written into config.yaml, so the config loader, the
run plan, ``SlackAdapter.from_config`` and the gateway's access policy all run
as they do in production.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import InboundMessage
from adapters.slack import SlackAdapter
from adapters.slack.adapter import SlackSettings
from config import load_config
from config.plan import build_plan
from gateway.adapter_loader import load_adapters
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.runner import search_function
from storage import Store
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack
from tests.gateway.conftest import spoken, write_config

SIGNING_SECRET = "test-signing-secret"
ALICE = "U0ALICE"
BOB = "U0BOB"
STRANGER = "U0STRANGER"
CHANNEL = "C0GENERAL"
DM = "D0ALICE"


@dataclass
class RunningSlack:
    gateway: Gateway
    adapter: Any
    store: Store
    api: FakeSlack

    @property
    def url(self) -> str:
        url = self.adapter.http_url
        assert url, "the adapter is not in HTTP mode or not listening"
        return url


SlackFactory = Callable[..., Awaitable[RunningSlack]]


def counter(slack: RunningSlack, name: str, **labels: str) -> float:
    """A gateway metric's current value (0 when never incremented)."""
    return slack.gateway.metrics.registry.get_sample_value(name, labels) or 0.0


def slack_section(api: FakeSlack, mode: str, **overrides: Any) -> dict[str, Any]:
    section: dict[str, Any] = {
        "enabled": True,
        "bot_token": BOT_TOKEN,
        "app_token": APP_TOKEN,
        "signing_secret": SIGNING_SECRET,
        "mode": mode,
        "api_base_url": api.api_url,
        "http_listen": {"host": "127.0.0.1", "port": 0, "path": "/slack/events"},
        "allowed_users": [ALICE, BOB],
    }
    section.update(overrides)
    return section


@pytest.fixture
def slack_home(tmp_path: Path) -> Iterator[Path]:
    yield tmp_path / "home"


@pytest_asyncio.fixture
async def start_slack(model_server: ModelServer, fake_slack: FakeSlack, slack_home: Path) -> AsyncIterator[SlackFactory]:
    """Start a gateway whose only platform is Slack; every one started is shut down at the end.

    The model answers ``ok: <what the user said>``: without the gateway's notes and, in shared
    threads, without the ``NAME: `` the gateway puts before each message (tests may replace it).
    """
    started: list[RunningSlack] = []
    model_server.responder = lambda record: Text(f"ok: {spoken(record.last_user_text)[:40]}")

    async def start(mode: str = "http", **section: Any) -> RunningSlack:
        path = write_config(slack_home, model_server, {"platforms": {"slack": slack_section(fake_slack, mode, **section)}})
        loaded = load_config(path, {"SWITCHBOARD_HOME": str(slack_home)}, create_home=True)
        plan = build_plan(loaded)
        assert plan.ready, plan.blockers
        adapters = load_adapters(plan.enabled, loaded)
        store = await Store.open(loaded.db_path)
        gateway = Gateway(loaded, store, adapters, build_agent(loaded, search=search_function(store)))
        running = RunningSlack(gateway, adapters[0], store, fake_slack)
        started.append(running)
        assert await gateway.start() == 1, adapters[0].status()
        return running

    yield start
    for running in started:
        await running.gateway.shutdown()


class Clock:
    """A clock the test moves by hand (``clock.now += 61``)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest_asyncio.fixture
async def client(fake_slack: FakeSlack) -> AsyncIterator[AsyncWebClient]:
    """A bare Web API client on the fake, for testing adapter parts without a gateway."""
    yield AsyncWebClient(token=BOT_TOKEN, base_url=fake_slack.api_url)


_sequence = itertools.count(1)


def ago(seconds: float) -> str:
    """A message ts sent ``seconds`` ago (unique in the run)."""
    return f"{int(time.time() - seconds)}.{next(_sequence):06d}"


class Running:
    """One started adapter, what its intake received and the gaps it reported."""

    def __init__(self, adapter: SlackAdapter, api: FakeSlack) -> None:
        self.adapter = adapter
        self.api = api
        self.received: list[InboundMessage] = []
        self.gaps: list[str] = []

    async def deliver(self, payload: dict[str, Any]) -> None:
        """A person posts and the live event is acknowledged (so it reached intake)."""
        await self.api.wait_acked(await self.api.say(payload))


Start = Callable[..., Awaitable[Running]]


@pytest_asyncio.fixture
async def start_adapter(fake_slack: FakeSlack) -> AsyncIterator[Start]:
    """Start the real SlackAdapter alone (no gateway): intake and the gap listener only record."""
    started: list[Running] = []

    async def start(mode: str = "socket", **settings: Any) -> Running:
        adapter = SlackAdapter(SlackSettings(
            bot_token=BOT_TOKEN, app_token=APP_TOKEN, signing_secret=SIGNING_SECRET, mode=mode,  # type: ignore[arg-type]
            api_base_url=fake_slack.api_url, listen_port=0, allowed_users=(ALICE,), **settings,
        ))  # fmt: skip
        running = Running(adapter, fake_slack)
        adapter.on_gap = running.gaps.append

        async def intake(inbound: InboundMessage) -> None:
            running.received.append(inbound)

        started.append(running)
        await adapter.start(intake)
        if mode == "socket":
            await fake_slack.wait_connections(1)
        return running

    yield start
    for running in started:
        await running.adapter.close()

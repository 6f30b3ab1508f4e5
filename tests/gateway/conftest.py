"""A real in-process gateway: real storage, the real agent through the anthropic SDK against the
fake model server, and the loopback adapter in place of a platform."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
import yaml

from adapters.contract import AccessPolicy
from agent import Agent
from config import load_config
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.runner import search_function
from gateway.store_setup import open_configured_store
from storage import RetryPolicy, StorageEngine
from tests.fakes.adapter import LoopbackAdapter
from tests.fakes.model_server import ModelServer
from tests.gateway.engines import database_of, parametrize_engines, storage_config
from tests.waiting import eventually


@dataclass
class Running:
    gateway: Gateway
    adapter: LoopbackAdapter
    store: StorageEngine
    home: Path
    database: str
    """The store's database: the PostgreSQL URL, or the SQLite file's path."""
    agent: Agent | None = None
    """The gateway's agent (its ``tools`` registry is where a test adds the tools a tool server would)."""


GatewayFactory = Callable[..., Awaitable[Running]]


def write_config(home: Path, server: ModelServer, overrides: dict | None = None) -> Path:
    config: dict = {
        "model": {"provider": "anthropic", "name": "claude-sonnet-4-6", "api_key": "test", "base_url": server.base_url},
        "sessions": {"debounce_ms": 0},
        "health": {"port": 0},
        "logging": {"console": False},
        "gateway": {"drain_timeout": 2},
    }
    for section, values in (overrides or {}).items():
        config.setdefault(section, {}).update(values)
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.yaml"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """A module marked ``both_engines`` runs its gateway tests on SQLite and on PostgreSQL (``tests/gateway/engines.py``)."""
    parametrize_engines(metafunc)


@pytest.fixture
def engine_name(request: pytest.FixtureRequest) -> str:
    """The engine the gateways of this test store into: SQLite unless the module runs on both engines."""
    return getattr(request, "param", "sqlite")


@pytest.fixture
def storage_url(engine_name: str, request: pytest.FixtureRequest) -> str | None:
    """``storage.url`` for this test's gateways: None (SQLite, ``state.db`` in the home), or a new empty database on
    the session's PostgreSQL server, the same one for every gateway the test starts."""
    if engine_name == "postgresql":
        return str(request.getfixturevalue("postgres_dsn"))
    return None


@pytest_asyncio.fixture
async def start_gateway(
    model_server: ModelServer, tmp_path: Path, storage_url: str | None, request: pytest.FixtureRequest
) -> AsyncIterator[GatewayFactory]:
    """Start gateways on demand, on the engine of ``storage_url``; every one started is shut down at the end.
    On PostgreSQL each home has a database of its own, as each has its own ``state.db`` on SQLite: the default
    home (``tmp_path / "home"``) the one of ``storage_url``, any other a new one, dropped after the test."""
    started: list[Running] = []
    urls: dict[Path, str | None] = {tmp_path / "home": storage_url}
    created: list[str] = []

    def url_for(home: Path) -> str | None:
        if storage_url is None or home in urls:
            return urls.get(home)
        created.append(f"{storage_url.rsplit('/', 1)[-1]}_{len(created) + 1}")
        urls[home] = request.getfixturevalue("postgres").create_database(created[-1])
        return urls[home]

    async def start(
        overrides: dict | None = None,
        *,
        policy: AccessPolicy = AccessPolicy(allow_all=True),
        adapter: LoopbackAdapter | None = None,
        home: Path | None = None,
        store_clock: Callable[[], float] | None = None,
        clock: Callable[[], float] | None = None,
        store_retry: RetryPolicy | None = None,
    ) -> Running:
        """``store_clock``: the store's clock, which dates sessions and messages (the wall clock by default).
        ``clock``: one clock for the store and the gateway's session policies both. ``store_retry``: how long
        the store's writer waits out a lock held by another process (its default is about 9 s)."""
        home = home or tmp_path / "home"
        url = url_for(home)
        settings = storage_config(url)
        for section, values in (overrides or {}).items():
            settings.setdefault(section, {}).update(values)
        path = write_config(home, model_server, settings)
        loaded = load_config(path, {"SWITCHBOARD_HOME": str(home)}, create_home=True)
        store_clock = store_clock or clock
        options = {"clock": store_clock} if store_clock else {}
        store = await open_configured_store(loaded, **options, **({"retry": store_retry} if store_retry else {}))
        agent = build_agent(loaded, search=search_function(store))
        adapter = adapter or LoopbackAdapter()
        gateway = Gateway(
            loaded, store, [adapter], agent, extra_access={"loopback": policy}, **({"clock": clock} if clock else {})
        )
        await gateway.start()
        running = Running(gateway, adapter, store, home, database_of(home, url), agent)
        started.append(running)
        return running

    yield start
    for running in started:
        await running.gateway.shutdown()
    for name in created:
        request.getfixturevalue("postgres").drop_database(name)


GATEWAY_NOTE = re.compile(r"\[(?:This message comes from|Several people talk)[^\]]*\]")
SENDER = re.compile(r"^[^:\n]{1,40}: ")


def spoken(user_text: str) -> str:
    """The user's own words in a model request: the gateway's call-time note and, in a shared
    thread, the ``NAME: `` before the message taken off."""
    return SENDER.sub("", GATEWAY_NOTE.sub("", user_text).strip())


async def handled(store: StorageEngine) -> None:
    """Wait until every accepted message is handled: answered, ignored, or given up."""

    async def none_unfinished() -> bool:
        return not await store.inbox_unfinished()

    await eventually(none_unfinished, "every accepted message to be handled")


async def delivered(store: StorageEngine) -> None:
    """Wait until every reply chunk is delivered or given up (the mark lands just after the adapter returns)."""

    async def none_pending() -> bool:
        return not await store.outbox_pending()

    await eventually(none_pending, "every reply chunk to be delivered or given up")


async def settled(store: StorageEngine) -> None:
    """Wait until every accepted message is answered and every reply chunk delivered or given up."""

    async def nothing_left() -> bool:
        return not (await store.inbox_unfinished() or await store.outbox_pending())

    await eventually(nothing_left, "every message handled and every reply chunk delivered")

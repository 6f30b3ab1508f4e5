"""The adapter contract is complete: a platform defined only here (its adapter and its config model,
nothing in gateway/) is built by the real loader from its config section, gets its access settings,
bot name, message limit and platform hint through the real Gateway, and its user gets a reply."""

from __future__ import annotations

import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from adapters.contract import (
    Adapter,
    AdapterState,
    Capabilities,
    ChatType,
    InboundMessage,
    Intake,
    Markup,
    OutboundMessage,
)
from config import load_config
from config.loader import LoadedConfig
from config.models import IdList, PlatformsConfig, Section, Settings
from gateway.adapter_loader import load_adapters
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.runner import search_function
from storage import Store
from tests.fakes.model_server import ModelServer, Text
from tests.gateway.conftest import settled, write_config
from tests.waiting import eventually

HINT = "You are answering on Echo: plain text only, at most 120 characters a message."


class EchoConfig(Section):
    """``platforms.echo``: what a new platform's config model declares."""

    enabled: bool = True
    name: str = "echobot"
    allowed_users: IdList = []
    allowed_rooms: IdList = []
    allow_all: bool = False
    require_mention: bool = True


class EchoAdapter(Adapter):
    """A whole platform in a few lines: messages are handed in by the test, replies collected."""

    platform = "echo"
    capabilities = Capabilities(max_message_length=120, length_unit="chars", can_edit=False, markup=Markup.PLAIN)
    platform_hint = HINT
    chats_setting = "allowed_rooms"

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name
        self.sent: list[OutboundMessage] = []
        self._intake: Intake | None = None

    @classmethod
    def from_config(cls, section: EchoConfig) -> EchoAdapter:
        return cls(section.name)

    @property
    def bot_username(self) -> str | None:
        return self.name if self._intake is not None else None

    async def start(self, intake: Intake) -> None:
        self._intake = intake
        self._set_state(AdapterState.RUNNING, "echo")

    async def stop_intake(self) -> None:
        self._intake = None

    async def close(self) -> None:
        self._set_state(AdapterState.STOPPED)

    async def send(self, message: OutboundMessage) -> str:
        self.sent.append(message)
        return str(len(self.sent))

    async def say(self, event_id: str, text: str, *, user: str, chat_type: ChatType = ChatType.DM,
                  chat: str = "dm-1", mentioned: bool = False) -> None:  # fmt: skip
        assert self._intake is not None
        await self._intake(InboundMessage(platform="echo", event_id=event_id, chat_id=chat, chat_type=chat_type,
                                          user_id=user, text=text, mentioned=mentioned))  # fmt: skip


class EchoPlatforms(PlatformsConfig):
    """The one line a new platform adds to the configuration: its section."""

    echo: EchoConfig = EchoConfig()


class EchoSettings(Settings):
    platforms: EchoPlatforms = EchoPlatforms()


@pytest.fixture
def echo_package(monkeypatch: pytest.MonkeyPatch) -> None:
    """``adapters.echo`` as a package exporting its adapter, as adapters/echo/__init__.py would."""
    package = types.ModuleType("adapters.echo")
    package.EchoAdapter = EchoAdapter  # type: ignore[attr-defined]
    package.__all__ = ["EchoAdapter"]  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "adapters.echo", package)


@pytest_asyncio.fixture
async def echo_config(model_server: ModelServer, tmp_path: Path) -> LoadedConfig:
    home = tmp_path / "home"
    loaded = load_config(write_config(home, model_server), {"SWITCHBOARD_HOME": str(home)}, create_home=True)
    section = {"allowed_users": ["alice"], "allowed_rooms": ["room-1"]}
    settings = EchoSettings.model_validate({**loaded.settings.model_dump(), "platforms": {"echo": section}})
    return LoadedConfig(settings=settings, home=loaded.home, config_path=loaded.config_path)


@pytest_asyncio.fixture
async def echo_gateway(echo_package: None, echo_config: LoadedConfig) -> AsyncIterator[tuple[Gateway, EchoAdapter, Store]]:
    store = await Store.open(echo_config.db_path)
    (adapter,) = load_adapters(["echo"], echo_config)
    assert isinstance(adapter, EchoAdapter)
    gateway = Gateway(echo_config, store, [adapter], build_agent(echo_config, search=search_function(store)))
    await gateway.start()
    yield gateway, adapter, store
    await gateway.shutdown()


async def test_a_platform_defined_outside_gateway_is_loaded_and_answered_through_the_real_gateway(
    echo_gateway: tuple[Gateway, EchoAdapter, Store], model_server: ModelServer
) -> None:
    gateway, echo, store = echo_gateway
    assert echo.commands.private  # the loader handed it the gateway's commands
    model_server.script(Text("word " * 60))  # 300 characters: more than one Echo message
    await echo.say("1", "hello", user="alice")
    await eventually(lambda: len(echo.sent) >= 3)
    await settled(store)
    assert all(len(message.text) <= 120 and message.markup is Markup.PLAIN for message in echo.sent)
    assert " ".join(message.text for message in echo.sent).split() == ["word"] * 60
    system = "".join(block["text"] for block in model_server.requests[-1].body["system"])
    assert system.endswith(HINT)  # the adapter's hint reached the agent


async def test_the_new_platforms_access_settings_and_bot_name_come_from_its_adapter(
    echo_gateway: tuple[Gateway, EchoAdapter, Store], model_server: ModelServer
) -> None:
    gateway, echo, store = echo_gateway
    await echo.say("1", "hi", user="mallory", chat="room-1", chat_type=ChatType.GROUP, mentioned=True)
    await echo.say("2", "hi", user="alice", chat="room-2", chat_type=ChatType.GROUP, mentioned=True)
    await echo.say("3", "/help@otherbot", user="alice", chat="room-1", chat_type=ChatType.GROUP, mentioned=True)
    await settled(store)
    assert echo.sent == [] and model_server.requests == []  # not allowed, not an allowed room, not for us
    await echo.say("4", "/help@echobot", user="alice", chat="room-1", chat_type=ChatType.GROUP, mentioned=True)
    await eventually(lambda: len(echo.sent) >= 1)
    assert model_server.requests == []  # a command, answered by the gateway itself

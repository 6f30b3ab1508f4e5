"""The adapter contract is complete: a platform defined only here (its adapter and its config model,
nothing in gateway/ or config/) has its secret read from its variable by the real config loader and
its needs reported by the plan, is built by the real adapter loader from its config section, gets its
access settings, bot name, message limit and platform hint through the real Gateway, and its user
gets a reply."""

from __future__ import annotations

import sys
import types
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Annotated

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
from config.inline_secrets import mask_inline_secrets
from config.loader import LoadedConfig
from config.models import IdList, PlatformsConfig, PlatformSection, Secret, Settings, Toggle
from config.plan import PlatformPlan, build_plan
from config.secret_variables import SecretVariable
from gateway.adapter_loader import load_adapters
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.runner import search_function
from storage import Store
from tests.fakes.adapter import UNHURRIED
from tests.fakes.model_server import ModelServer, Text
from tests.gateway.conftest import settled, write_config
from tests.waiting import eventually

HINT = "You are answering on Echo: plain text only, at most 120 characters a message."


TOKEN = "echo-secret-token"


class EchoConfig(PlatformSection):
    """``platforms.echo``: what a new platform's config model declares."""

    enabled: Toggle = "auto"
    token: Annotated[Secret, SecretVariable("ECHO_TOKEN")] = None
    server: str | None = None
    name: str = "echobot"
    allowed_users: IdList = []
    allowed_rooms: IdList = []
    allow_all: bool = False
    require_mention: bool = True

    def required(self) -> tuple[str, ...]:
        return ("token", "server")

    def connection(self) -> str:
        return f"echo server {self.server}"


class EchoAdapter(Adapter):
    """A whole platform in a few lines: messages are handed in by the test, replies collected."""

    platform = "echo"
    capabilities = Capabilities(max_message_length=120, length_unit="chars", can_edit=False, markup=Markup.PLAIN,
                                rates=UNHURRIED)  # fmt: skip
    platform_hint = HINT
    chats_setting = "allowed_rooms"

    def __init__(self, name: str, token: str) -> None:
        super().__init__()
        self.name = name
        self.token = token
        self.sent: list[OutboundMessage] = []
        self._intake: Intake | None = None

    @classmethod
    def from_config(cls, section: EchoConfig) -> EchoAdapter:
        assert section.token is not None
        return cls(section.name, section.token)

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


ECHO = {"server": "ws://echo.example", "allowed_users": ["alice"], "allowed_rooms": ["room-1"]}


def load_echo(home: Path, model_server: ModelServer, section: dict, **env: str) -> LoadedConfig:
    """The configuration as ``switchboard run`` loads it, with the echo platform's section in the model."""
    path = write_config(home, model_server, {"platforms": {"echo": section}})
    return load_config(path, {"SWITCHBOARD_HOME": str(home), **env}, create_home=True, settings_model=EchoSettings)


@pytest_asyncio.fixture
async def echo_config(model_server: ModelServer, tmp_path: Path) -> LoadedConfig:
    return load_echo(tmp_path / "home", model_server, ECHO, ECHO_TOKEN=TOKEN)


@pytest_asyncio.fixture
async def echo_gateway(echo_package: None, echo_config: LoadedConfig) -> AsyncIterator[tuple[Gateway, EchoAdapter, Store]]:
    store = await Store.open(echo_config.db_path)
    (adapter,) = load_adapters(build_plan(echo_config).enabled, echo_config)
    assert isinstance(adapter, EchoAdapter)
    gateway = Gateway(echo_config, store, [adapter], build_agent(echo_config, search=search_function(store)))
    await gateway.start()
    yield gateway, adapter, store
    await gateway.shutdown()


def test_the_new_platforms_secret_is_read_from_its_variable_and_masked(echo_config: LoadedConfig) -> None:
    assert echo_config.settings.platforms.echo.token == TOKEN  # type: ignore[attr-defined]
    assert echo_config.variable_for("platforms.echo.token") == "ECHO_TOKEN"
    assert "platforms.echo.token" in echo_config.secret_paths() and TOKEN in echo_config.secrets()
    config = echo_config.config_path
    assert config is not None
    config.write_text(config.read_text(encoding="utf-8").replace("server:", f"token: {TOKEN}\n    server:"), encoding="utf-8")
    masked = mask_inline_secrets(load_config(config, {"SWITCHBOARD_HOME": str(echo_config.home)},
                                             settings_model=EchoSettings), {})  # fmt: skip
    assert masked.masked["platforms.echo.token"] == "ECHO_TOKEN" and TOKEN not in masked.text


def test_the_plan_reports_the_new_platform_and_what_it_needs(model_server: ModelServer, tmp_path: Path) -> None:
    home = tmp_path / "home"
    env_file, config = home / ".env", home / "config.yaml"
    *_, echo = build_plan(load_echo(home, model_server, ECHO, ECHO_TOKEN=TOKEN)).platforms
    assert echo == PlatformPlan("echo", True, "echo server ws://echo.example")

    plan = build_plan(load_echo(home, model_server, {"allowed_users": ["alice"]}, ECHO_TOKEN=TOKEN))
    assert plan.platforms[-1] == PlatformPlan("echo", False, "incomplete credentials", blocker=(
        f"echo has only part of its credentials: set platforms.echo.server (platforms.echo.server is not in {config})"
    ))  # fmt: skip

    plan = build_plan(load_echo(home, model_server, {"allowed_users": ["alice"]}))
    missing = "ECHO_TOKEN is set neither in the environment nor in " + str(env_file)
    assert plan.platforms[-1] == PlatformPlan("echo", False, f"no credentials ({missing})")
    assert plan.blockers[0].startswith(
        "no platform is enabled: set TELEGRAM_BOT_TOKEN, or DISCORD_BOT_TOKEN, or SLACK_BOT_TOKEN with SLACK_APP_TOKEN, "
        f"or ECHO_TOKEN with platforms.echo.server (in the environment or {env_file})"
    )
    assert plan.blockers[0].endswith(f"SLACK_APP_TOKEN and {missing.replace(' is ', ' are ')})")


async def test_a_platform_defined_outside_gateway_is_loaded_and_answered_through_the_real_gateway(
    echo_gateway: tuple[Gateway, EchoAdapter, Store], model_server: ModelServer
) -> None:
    gateway, echo, store = echo_gateway
    assert echo.token == TOKEN  # the plan turned it on, the loader built it from its section
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

"""The platforms ``bench.stream`` runs the gateway against: the Telegram, Discord and Slack emulators of
``tests/fakes``, each Web API behind a :class:`~bench.stream_watch.WatchProxy`, and the people writing to the bot.

Chats come in four kinds, each the way its platform streams a reply:

* ``telegram``: private chats (drafts, then the answer as a message);
* ``telegram_group``: groups (a message, then edits; ``require_mention`` off so every message counts);
* ``discord``: direct messages (a message, then edits);
* ``slack``: an @mention in a channel of its own, answered in the mention's thread (the native stream).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from bench.crash import Gateway
from bench.stream_watch import Screen, WatchProxy
from config.models import GatewayConfig
from tests.fakes.discord_api import DiscordEmulator
from tests.fakes.model_server import ModelServer
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, FakeSlack, mention
from tests.fakes.telegram_api import Chat, TelegramAPI, User

KINDS = ("telegram", "telegram_group", "discord", "slack")
PLATFORM = {"telegram": "telegram", "telegram_group": "telegram", "discord": "discord", "slack": "slack"}
HANG_GUARD_S = 120.0
WARM_UP = "warm up, say one word"
NUMBERS = itertools.count(1)
"""Chat numbers, unique over the whole run: the model tells chats apart by the number in the question."""


@dataclass
class BenchChat:
    kind: str
    number: int
    key: str
    """The chat as the :class:`Screen` names it: ``platform:chat id``."""
    asked_at: float | None = None
    """perf_counter() just before the user's message was handed to the emulator."""
    warm_up: bool = False
    """A chat that only wakes the gateway up (its first turn imports and caches what later turns reuse)."""

    @property
    def platform(self) -> str:
        return PLATFORM[self.kind]

    @property
    def question(self) -> str:
        return f"q{self.number:04d} {WARM_UP if self.warm_up else 'please explain it all, at length'}"


def streaming_configurable() -> bool:
    """Whether this gateway has ``gateway.streaming`` (issue 27); before it, every run is today's behaviour."""
    return "streaming" in GatewayConfig.model_fields


class Platforms:
    """The three emulators behind their proxies, the screen built from what the gateway called, and the users."""

    def __init__(self) -> None:
        self.telegram = TelegramAPI()
        self.discord = DiscordEmulator()
        self.slack = FakeSlack()
        self.screen = Screen()
        self.proxies: dict[str, WatchProxy] = {}
        self.rates_enforced: list[str] = []

    async def start(self) -> None:
        await self.telegram.start()
        await self.discord.start()
        await self.slack.start()
        upstreams = {"telegram": self.telegram.base_url, "discord": f"http://127.0.0.1:{self.discord.port}",
                     "slack": f"http://127.0.0.1:{self.slack.port}"}  # fmt: skip
        for platform, upstream in upstreams.items():
            proxy = self.proxies[platform] = WatchProxy(platform, upstream)
            await proxy.start()
            self.screen.watch(proxy)
        self.rates_enforced = self.enforce_rates()

    def enforce_rates(self) -> list[str]:
        """Turn on each emulator's published rate limits; the platforms whose emulator has them."""
        enforced = []
        for platform, emulator in (("telegram", self.telegram), ("discord", self.discord), ("slack", self.slack)):
            if hasattr(emulator, "enforce_rates"):  # Telegram's and Discord's, with their default grace
                emulator.enforce_rates()
            elif hasattr(getattr(emulator, "rates", None), "enabled"):  # Slack's
                emulator.rates.enabled = True
            else:
                continue
            enforced.append(platform)
        return enforced

    async def stop(self) -> None:
        for proxy in self.proxies.values():
            await proxy.stop()
        await self.slack.stop()
        await self.discord.stop()
        await self.telegram.stop()

    def sections(self) -> dict[str, Any]:
        """``platforms:`` of the gateway's config, every Web API through its proxy."""
        return {
            "telegram": {"token": self.telegram.token, "api_base_url": self.proxies["telegram"].base_url,
                         "allow_all": True, "require_mention": False, "poll_timeout": 10},
            "discord": {"enabled": True, "token": self.discord.token,
                        "api_base_url": self.proxies["discord"].base_url + "/api/v10",
                        "gateway_url": self.discord.gateway_url, "allow_all": True},
            "slack": {"enabled": True, "bot_token": BOT_TOKEN, "app_token": APP_TOKEN, "mode": "socket",
                      "api_base_url": self.proxies["slack"].base_url + "/api/", "allow_all": True},
        }  # fmt: skip

    # -- the gateway ------------------------------------------------------------------------------

    def write_config(self, home: Path, server: ModelServer, *, streaming: str, max_turns: int) -> Path:
        gateway: dict[str, Any] = {"drain_timeout": 5}
        if streaming_configurable():
            gateway["streaming"] = streaming
        config = {
            "model": {"provider": "anthropic", "name": "claude-sonnet-4-6", "api_key": "test",
                      "base_url": server.base_url},
            "platforms": self.sections(),
            "sessions": {"debounce_ms": 0, "max_concurrent_turns": max_turns},
            "health": {"port": 0}, "logging": {"console": False}, "gateway": gateway,
        }  # fmt: skip
        home.mkdir(parents=True, exist_ok=True)
        path = home / "config.yaml"
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    async def launch(self, home: Path, config: Path) -> Gateway:
        """Start ``switchboard run`` and wait until it is started and every platform is listening."""
        polls = len(self.telegram.calls_to("getUpdates"))
        identifies = len(self.discord.gateway.identifies) if self.discord.gateway else 0
        sockets = self.slack.connections
        gateway = Gateway(home, config)
        await gateway.wait_started()
        deadline = time.perf_counter() + HANG_GUARD_S
        while not (
            len(self.telegram.calls_to("getUpdates")) > polls
            and self.discord.gateway is not None and len(self.discord.gateway.identifies) > identifies
            and self.discord.gateway.current is not None and self.discord.gateway.current.socket is not None
            and self.slack.connections > sockets
        ):  # fmt: skip
            gateway.alive("the platforms to connect")
            if time.perf_counter() > deadline:
                raise RuntimeError("benchmark broken: the platforms did not all connect")
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.5)  # discord.py handles READY and GUILD_CREATE after identifying
        return gateway

    # -- the users --------------------------------------------------------------------------------

    def chats(self, counts: Mapping[str, int], *, warm_up: bool = False) -> list[BenchChat]:
        """New chats, ``counts[kind]`` of each kind, interleaved (one of each kind, then the next)."""
        made = []
        for round_ in range(max(counts.values(), default=0)):
            made += [self._chat(kind, next(NUMBERS)) for kind in KINDS if counts.get(kind, 0) > round_]
        for chat in made:
            chat.warm_up = warm_up
        return made

    def _chat(self, kind: str, number: int) -> BenchChat:
        if kind == "telegram":
            key = str(7000 + number)
        elif kind == "telegram_group":
            key = str(-100000 - number)
        elif kind == "discord":
            key = self.discord.world.dm_channel_for(str(400000000000000000 + number))
        else:
            key = f"C0BENCH{number:04d}"
        return BenchChat(kind, number, f"{PLATFORM[kind]}:{key}")

    async def ask(self, chat: BenchChat) -> None:
        """The chat's user writes the question; its time is taken just before the emulator gets it."""
        user_id = 7000 + chat.number
        chat.asked_at = time.perf_counter()
        if chat.kind == "telegram":
            await self.telegram.say(User(user_id, f"User {chat.number}"), chat.question)
        elif chat.kind == "telegram_group":
            group = Chat.group(-100000 - chat.number, f"Group {chat.number}")
            await self.telegram.say(User(user_id, f"User {chat.number}"), chat.question, chat=group)
        elif chat.kind == "discord":
            await self.discord.dm(str(400000000000000000 + chat.number), chat.question)
        else:
            payload = mention(chat.key.split(":", 1)[1], f"U0USER{chat.number:04d}", f"<@U0BOT> {chat.question}")
            self.slack.record(payload)
            await self._push_slack(chat, payload)

    async def _push_slack(self, chat: BenchChat, payload: dict[str, Any]) -> None:
        """Send the event once the app has a Socket Mode connection open (slack_sdk reconnects now and then)."""
        deadline = time.perf_counter() + HANG_GUARD_S
        while True:
            chat.asked_at = time.perf_counter()
            try:
                await self.slack.push_event(payload)
                return
            except RuntimeError:  # no connection open this moment
                if time.perf_counter() > deadline:
                    raise
                await asyncio.sleep(0.05)

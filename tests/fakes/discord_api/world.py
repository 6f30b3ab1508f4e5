"""What the emulated Discord knows: the bot, one server with a channel and a thread, DMs, and what the bot did."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.discord_api import payloads
from tests.fakes.discord_api.limits import ChannelLimits


@dataclass(frozen=True, slots=True)
class SentMessage:
    """A message the bot created through ``POST /channels/{id}/messages``."""

    id: str
    channel_id: str
    content: str
    nonce: str | None
    enforce_nonce: bool
    reference: dict[str, Any] | None
    """The ``message_reference`` the bot sent (``message_id``, ``fail_if_not_exists``, ...)."""
    at: float = 0.0
    """time.monotonic() when Discord created it."""
    components: tuple[dict[str, Any], ...] = ()
    """The action rows (of buttons) under it, as sent."""


@dataclass(frozen=True, slots=True)
class Edit:
    channel_id: str
    message_id: str
    content: str
    at: float = 0.0
    """time.monotonic() when Discord made the edit."""
    components: tuple[dict[str, Any], ...] | None = None
    """The action rows the edit set (``()``: it removed them); None: it left them as they were."""


@dataclass(frozen=True, slots=True)
class Interaction:
    """A press of a button the emulator dispatched (INTERACTION_CREATE), and what the bot answered."""

    id: str
    token: str
    channel_id: str
    message_id: str
    custom_id: str
    user_id: str
    callbacks: list[dict[str, Any]] = field(default_factory=list)
    """The bodies of ``POST /interactions/{id}/{token}/callback`` Discord accepted (the first is the
    acknowledgement; Discord refuses any later one)."""


@dataclass(frozen=True, slots=True)
class Failure:
    """A scripted answer for the next create-message calls: an HTTP status and JSON body, or a lost answer."""

    status: int
    body: dict[str, Any]
    headers: dict[str, str] = field(default_factory=dict)
    answer_lost: bool = False
    """Create the message as asked, then cut the connection instead of answering (status and body unused)."""


class World:
    def __init__(self, token: str) -> None:
        self.token = token
        self.bot = payloads.user("100000000000000001", "switchbot", bot=True)
        self.app_id = self.bot["id"]
        self.guild_id = "200000000000000001"
        self.channel_id = "200000000000000002"
        self.thread_id = "200000000000000003"
        self.users: dict[str, dict[str, Any]] = {self.bot["id"]: self.bot}
        self.dm_channels: dict[str, str] = {}
        """User id -> DM channel id."""
        self.messages: dict[str, dict[str, Any]] = {}
        """Every message by id (users' and the bot's), for replies and edits."""
        self.sent: list[SentMessage] = []
        self.repeats: list[SentMessage] = []
        """Creates answered from the nonce cache instead of creating a message again."""
        self.edits: list[Edit] = []
        self.typing: list[str] = []
        self.interactions: dict[str, Interaction] = {}
        """Button presses by interaction id (see :meth:`tests.fakes.discord_api.DiscordEmulator.press`)."""
        self.rest_calls: list[tuple[str, str]] = []
        """(method, path) of every REST request, in order."""
        self.failures: list[Failure] = []
        """Scripted answers for the next create-message calls."""
        self.limits: ChannelLimits | None = None
        """Per-channel rate limits on creates and edits, when enforced (see :mod:`.limits`)."""
        self.rate_limited = 0
        """How many 429 answers REST sent (the limits' and scripted ones)."""
        self.login_failures = 0
        """How many of the next ``GET /users/@me`` calls (discord.py's login) get 503."""
        self._by_nonce: dict[str, SentMessage] = {}
        """Discord returns the earlier message when the same author repeats a nonce with enforce_nonce."""
        self.changed = asyncio.Condition()

    # --- the server -----------------------------------------------------------------------
    def channels(self) -> list[dict[str, Any]]:
        return [payloads.text_channel(self.channel_id, self.guild_id, "general")]

    def threads(self) -> list[dict[str, Any]]:
        return [payloads.thread(self.thread_id, self.guild_id, self.channel_id, self.bot["id"], "a thread")]

    def guild(self) -> dict[str, Any]:
        return payloads.guild(self.guild_id, "Test server", self.bot["id"], self.channels(), self.threads())

    def channel(self, channel_id: str) -> dict[str, Any] | None:
        """The channel, thread or DM with this id, as ``GET /channels/{id}`` shows it; None: no such channel."""
        found = [item for item in [*self.channels(), *self.threads()] if item["id"] == channel_id]
        found += [payloads.dm_channel(dm, self.user(user)) for user, dm in self.dm_channels.items() if dm == channel_id]
        return found[0] if found else None

    def user(self, user_id: str, name: str | None = None, *, bot: bool = False) -> dict[str, Any]:
        if user_id not in self.users:
            self.users[user_id] = payloads.user(user_id, name or f"user{user_id[-4:]}", bot=bot)
        return self.users[user_id]

    def dm_channel_for(self, user_id: str) -> str:
        if user_id not in self.dm_channels:
            self.dm_channels[user_id] = payloads.snowflake()
        return self.dm_channels[user_id]

    # --- what the bot did -------------------------------------------------------------------
    def create(self, channel_id: str, body: dict[str, Any]) -> tuple[SentMessage, bool]:
        """Store the bot's message; returns it and whether it is new (False: same nonce seen before)."""
        nonce = body.get("nonce")
        nonce = None if nonce is None else str(nonce)
        enforce = bool(body.get("enforce_nonce"))
        if nonce is not None and enforce and nonce in self._by_nonce:
            first = self._by_nonce[nonce]
            self.repeats.append(first)
            return first, False
        reference = body.get("message_reference")
        sent = SentMessage(payloads.snowflake(), channel_id, body.get("content") or "", nonce, enforce, reference,
                           time.monotonic(), tuple(body.get("components") or ()))  # fmt: skip
        self.sent.append(sent)
        if nonce is not None and enforce:
            self._by_nonce[nonce] = sent
        referenced = None
        if reference and str(reference.get("message_id")) in self.messages:
            referenced = self.messages[str(reference["message_id"])]
        self.messages[sent.id] = payloads.message(
            message_id=sent.id, channel_id=channel_id, author=self.bot, content=sent.content, referenced=referenced,
            nonce=nonce, components=list(sent.components),
        )  # fmt: skip
        return sent, True

    def take_failure(self) -> Failure | None:
        return self.failures.pop(0) if self.failures else None

    async def notify(self, change: Callable[[], None]) -> None:
        async with self.changed:
            change()
            self.changed.notify_all()

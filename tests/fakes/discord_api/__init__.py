"""A local Discord for tests: REST and the gateway WebSocket on one 127.0.0.1 port.

Point the real discord.py at it (``platforms.discord.api_base_url`` =
:attr:`DiscordEmulator.api_base_url`, ``gateway_url`` = :attr:`DiscordEmulator.gateway_url`),
inject users' messages with :meth:`DiscordEmulator.dm` and
:meth:`DiscordEmulator.server_message`, and read what the bot did from
``emulator.world`` (``sent``, ``repeats``, ``edits`` with their times, ``typing``,
``rest_calls``) and ``emulator.gateway`` (``identifies``, ``resumes``, ``closes``, ``swallowed``).
Every message is kept in its channel's history, which ``GET /channels/{id}/messages`` reads; ids hold
their creation time as Discord's do.

Files users upload: :meth:`DiscordEmulator.attachment` registers bytes and returns the
attachment as MESSAGE_CREATE carries it, its ``url`` on the emulator's CDN path
(``/attachments/<channel>/<id>/<name>``, signed like Discord's, no token needed), which
``emulator.files`` (:class:`tests.fakes.served_files.ServedFiles`) serves; a test makes a download
of it fail there (404, hang, redirect, cut short) and reads ``emulator.files.downloads``.
:meth:`DiscordEmulator.voice_message` sends a voice message (the message flag, the recording's
duration and waveform).

Buttons: a message the bot sends keeps its ``components`` (``SentMessage.components``, ``Edit.components``;
what a message shows now is ``emulator.world.messages[id]["components"]``); :meth:`DiscordEmulator.press` is a
person clicking one of its buttons (INTERACTION_CREATE on the gateway WebSocket), and the bot's answer
(the interaction callback) lands in ``emulator.world.interactions[id].callbacks``.

Discord's per-channel rate limit on creates and edits (5 per 5 s, see
:mod:`.limits`) is off unless :meth:`DiscordEmulator.enforce_rates` (or
``DiscordEmulator(rates=True)``) turns it on: the existing tests send faster,
and without the limit's headers discord.py does not pace itself.
:attr:`DiscordEmulator.rate_limited` counts the 429 answers sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from aiohttp import web

from tests.fakes.discord_api import payloads
from tests.fakes.discord_api.gateway import MESSAGE_CONTENT_INTENT, GatewayServer
from tests.fakes.discord_api.limits import ChannelLimits
from tests.fakes.discord_api.rest import RestApi
from tests.fakes.discord_api.world import Edit, Failure, Interaction, SentMessage, World
from tests.fakes.served_files import ServedFiles

__all__ = ("MESSAGE_CONTENT_INTENT", "DiscordEmulator", "Edit", "Failure", "Interaction", "SentMessage", "World")

TOKEN = "emulator-bot-token"


class DiscordEmulator:
    def __init__(self, token: str = TOKEN, *, rates: bool = False) -> None:
        self.world = World(token)
        self.files = ServedFiles()
        """The bytes behind the attachments' URLs (see the module's docstring)."""
        self.enforce_rates(rates)
        self.port = 0
        self.gateway: GatewayServer | None = None
        self._runner: web.AppRunner | None = None

    @property
    def token(self) -> str:
        return self.world.token

    @property
    def api_base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/api/v10"

    @property
    def cdn_base_url(self) -> str:
        """Where attachments are served: the same site as the REST API, as the adapter derives it."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def gateway_url(self) -> str:
        return f"ws://127.0.0.1:{self.port}/gateway"

    async def start(self) -> None:
        app = web.Application()
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        # The port is known only after binding, and READY / GET /gateway must name it: bind first, route after.
        rest = RestApi(self.world, "")
        gateway = GatewayServer(self.world, "")
        rest.add_routes(app)
        gateway.add_routes(app)
        app.router.add_get("/attachments/{channel}/{attachment}/{name}", self._download)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])
        rest.gateway_url = gateway.url = self.gateway_url
        self.gateway = gateway

    async def stop(self) -> None:
        self.files.release()
        if self.gateway is not None:
            await self.gateway.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # --- users writing to the bot ---------------------------------------------------------
    async def dm(self, user_id: str, text: str, **fields: Any) -> dict[str, Any]:
        """The user sends the bot a direct message; returns the MESSAGE_CREATE data."""
        channel_id = self.world.dm_channel_for(user_id)
        return await self._post(channel_id, None, user_id, text, **fields)

    async def server_message(
        self,
        user_id: str,
        text: str,
        *,
        mention: bool = False,
        in_thread: bool = False,
        **fields: Any,
    ) -> dict[str, Any]:
        """A message in the server's channel (or its thread); ``mention`` @mentions the bot first."""
        if mention:
            text = f"<@{self.world.bot['id']}> {text}"
            fields["mentions"] = [*fields.get("mentions", []), self.world.bot]
        channel_id = self.world.thread_id if in_thread else self.world.channel_id
        return await self._post(channel_id, self.world.guild_id, user_id, text, **fields)

    async def voice_message(self, user_id: str, data: bytes, *, duration: float) -> dict[str, Any]:
        """The user sends the bot a voice message (a recording of ``duration`` seconds) in a DM."""
        channel_id = self.world.dm_channel_for(user_id)
        recording = self.attachment(data, "voice-message.ogg", content_type="audio/ogg", duration=duration,
                                    channel_id=channel_id)  # fmt: skip
        return await self._post(channel_id, None, user_id, "", attachments=[recording], flags=payloads.VOICE_MESSAGE)

    async def press(self, message_id: str, custom_id: str, user_id: str) -> Interaction:
        """The user clicks the button ``custom_id`` under the bot's message: INTERACTION_CREATE goes out on the
        gateway (a member's press in a server channel or thread, a user's in a DM). Only a button the message
        shows now can be pressed."""
        if self.gateway is None:
            raise RuntimeError("the emulator is not started")
        message = self.world.messages[message_id]
        if custom_id not in payloads.custom_ids(message):
            raise ValueError(f"message {message_id} shows no button {custom_id!r}")
        channel_id = message["channel_id"]
        channel = self.world.channel(channel_id)
        if channel is None:
            raise ValueError(f"no channel {channel_id}")
        guild_id = channel.get("guild_id")
        pressed = Interaction(payloads.snowflake(), f"interaction-token-{payloads.snowflake()}", channel_id,
                              message_id, custom_id, user_id)  # fmt: skip
        self.world.interactions[pressed.id] = pressed
        data = payloads.interaction(
            interaction_id=pressed.id, token=pressed.token, app_id=self.world.app_id, custom_id=custom_id,
            message={**message, **({"guild_id": guild_id} if guild_id else {})}, channel=channel,
            user=self.world.user(user_id), guild_id=guild_id,
        )  # fmt: skip
        await self.gateway.dispatch("INTERACTION_CREATE", data)
        return pressed

    async def wait_acknowledged(self, pressed: Interaction, *, timeout: float = 30.0) -> dict[str, Any]:
        """The bot's answer to the press (the body of its interaction callback)."""
        await self.wait_for(lambda: bool(pressed.callbacks), timeout=timeout)
        return pressed.callbacks[0]

    # --- files users upload ------------------------------------------------------------------
    def attachment(
        self,
        data: bytes,
        name: str,
        *,
        content_type: str | None = None,
        width: int | None = None,
        height: int | None = None,
        duration: float | None = None,
        size: int | None = None,
        channel_id: str | None = None,
    ) -> dict[str, Any]:
        """Register ``data`` as an uploaded file; returns the attachment for a message's ``attachments``.

        ``size`` overrides what Discord claims (default: the real length); the URL carries Discord's
        signature parameters (``ex``, ``is``, ``hm``), which the emulator does not check."""
        attachment_id = payloads.snowflake()
        self.files.add(attachment_id, data)
        channel = channel_id or self.world.channel_id
        url = f"{self.cdn_base_url}/attachments/{channel}/{attachment_id}/{name}?ex=6a000000&is=69f00000&hm=00ff"
        return payloads.attachment(
            name, size=len(data) if size is None else size, content_type=content_type, attachment_id=attachment_id,
            url=url, width=width, height=height, duration=duration,
        )  # fmt: skip

    async def _download(self, request: web.Request) -> web.StreamResponse:
        return await self.files.answer(request, request.match_info["attachment"])

    async def _post(
        self,
        channel_id: str,
        guild_id: str | None,
        user_id: str,
        text: str,
        *,
        bot_author: bool = False,
        reply_to: str | None = None,
        mentions: list[dict[str, Any]] | None = None,
        attachments: list[dict[str, Any]] | None = None,
        flags: int = 0,
        at: float | None = None,
    ) -> dict[str, Any]:
        """Store the message in its channel's history and dispatch its MESSAGE_CREATE; ``at`` (wall-clock time)
        dates it back (its id says when it was sent)."""
        if self.gateway is None:
            raise RuntimeError("the emulator is not started")
        author = self.world.user(user_id, bot=bot_author)
        referenced = self.world.messages[reply_to] if reply_to else None
        data = payloads.message(
            message_id=payloads.snowflake(at), channel_id=channel_id, author=author, content=text, guild_id=guild_id,
            mentions=mentions, attachments=attachments, referenced=referenced, flags=flags,
        )  # fmt: skip
        self.world.messages[data["id"]] = data
        await self.gateway.dispatch("MESSAGE_CREATE", data)
        return data

    # --- rate limits -----------------------------------------------------------------------
    def enforce_rates(self, on: bool = True, *, grace: float = 0.2) -> None:
        """Answer creates and edits beyond 5 per 5 s in a channel with 429, and send the limit's headers."""
        self.world.limits = ChannelLimits(grace=grace) if on else None

    @property
    def rate_limited(self) -> int:
        """How many 429 answers were sent (the limits' and scripted ones)."""
        return self.world.rate_limited

    # --- scripted trouble -----------------------------------------------------------------
    def rate_limit_next(self, retry_after: float, *, times: int = 1) -> None:
        """The next create-message calls get 429 with Discord's body and headers."""
        headers = {
            "Via": "1.1 google", "Retry-After": str(max(1, round(retry_after))), "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "0", "X-RateLimit-Reset-After": f"{retry_after:.3f}",
            "X-RateLimit-Bucket": "emulator-create-message", "X-RateLimit-Scope": "user",
        }  # fmt: skip
        body = {"message": "You are being rate limited.", "retry_after": retry_after, "global": False}
        self.world.failures += [Failure(429, body, headers)] * times

    def fail_next(self, status: int, message: str, *, code: int = 0, times: int = 1) -> None:
        self.world.failures += [Failure(status, {"message": message, "code": code})] * times

    def lose_next_answer(self, *, times: int = 1) -> None:
        """The next create-message calls create the message, then cut the connection before answering."""
        self.world.failures += [Failure(0, {}, answer_lost=True)] * times

    # --- waiting --------------------------------------------------------------------------
    async def wait_for(self, predicate: Callable[[], bool], *, timeout: float = 30.0) -> None:
        """Wait until ``predicate()`` holds after a change the bot made (the timeout only stops a hang)."""
        async with asyncio.timeout(timeout):
            async with self.world.changed:
                await self.world.changed.wait_for(predicate)

    async def wait_sent(self, count: int, *, timeout: float = 30.0) -> list[SentMessage]:
        await self.wait_for(lambda: len(self.world.sent) >= count, timeout=timeout)
        return list(self.world.sent)

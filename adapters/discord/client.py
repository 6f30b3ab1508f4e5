"""The discord.py client: its gateway events, handed to the supervisor and the adapter."""

from __future__ import annotations

from typing import Any, Protocol

import discord
import structlog

log = structlog.get_logger(__name__)


class ClientEvents(Protocol):
    """What the adapter wants to hear from a client (each call names the client, which may be a replaced one)."""

    def connected(self, client: discord.Client, *, resumed: bool) -> None: ...

    def disconnected(self, client: discord.Client) -> None: ...

    def message(self, client: discord.Client, message: discord.Message) -> None: ...


class GatewayClient(discord.Client):
    """A plain ``discord.Client`` whose events go to :class:`ClientEvents`; discord.py does the protocol."""

    def __init__(self, events: ClientEvents, *, intents: discord.Intents, max_ratelimit_timeout: float) -> None:
        super().__init__(
            intents=intents,
            max_ratelimit_timeout=max_ratelimit_timeout,
            chunk_guilds_at_startup=False,
            member_cache_flags=discord.MemberCacheFlags.none(),
        )
        self._events = events

    async def on_connect(self) -> None:
        # READY arrived: the session is up. (on_ready waits for every server's GUILD_CREATE first.)
        self._events.connected(self, resumed=False)

    async def on_resumed(self) -> None:
        self._events.connected(self, resumed=True)

    async def on_disconnect(self) -> None:
        self._events.disconnected(self)

    async def on_message(self, message: discord.Message) -> None:
        self._events.message(self, message)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("discord.handler_failed", handler=event_method)

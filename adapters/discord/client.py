"""The discord.py client: its gateway events, handed to the supervisor and the adapter.

discord.py parses each gateway event inside its receive loop, and an error
there (a MESSAGE_CREATE whose author is no object or whose id is no number)
ends the connection: the supervisor would rebuild the client, and whatever
arrived meanwhile would be lost, once per such event. So every event but
READY and RESUMED (without which the session itself is broken) is parsed
under a guard: one that fails is logged as ``discord.event.rejected`` with
its ids and the reason, never its content, and skipped.

Every MESSAGE_CREATE is noted as it arrives (its channel and id, before it is parsed), so the
liveness probe can tell a message the socket never brought from one that came but was skipped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol

import discord
import structlog

from adapters.contract import log_rejected

log = structlog.get_logger(__name__)

UNGUARDED: Final = frozenset({"READY", "RESUMED"})
"""Events whose failure must end the connection: a session that could not start is no session."""


class ClientEvents(Protocol):
    """What the adapter wants to hear from a client (each call names the client, which may be a replaced one)."""

    def connected(self, client: discord.Client, *, resumed: bool) -> None: ...

    def disconnected(self, client: discord.Client) -> None: ...

    def message(self, client: discord.Client, message: discord.Message) -> None: ...

    def arrived(self, channel_id: int, message_id: int) -> None: ...

    async def pressed(self, client: discord.Client, interaction: discord.Interaction) -> None: ...


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
        # discord.py builds its parser table once per client and hands the same dict to every connection.
        parsers = self._connection.parsers
        for name, parse in list(parsers.items()):
            if name not in UNGUARDED:
                parsers[name] = _guarded(name, parse)
        parsers["MESSAGE_CREATE"] = _noting_arrival(events, parsers["MESSAGE_CREATE"])

    async def on_connect(self) -> None:
        # READY arrived: the session is up. (on_ready waits for every server's GUILD_CREATE first.)
        self._events.connected(self, resumed=False)

    async def on_resumed(self) -> None:
        self._events.connected(self, resumed=True)

    async def on_disconnect(self) -> None:
        self._events.disconnected(self)

    async def on_message(self, message: discord.Message) -> None:
        self._events.message(self, message)

    async def on_interaction(self, interaction: discord.Interaction) -> None:
        # discord.py runs each event handler in a task of its own: awaiting the press here holds up nothing.
        await self._events.pressed(self, interaction)

    async def on_error(self, event_method: str, /, *args: Any, **kwargs: Any) -> None:
        log.exception("discord.handler_failed", handler=event_method)


def _guarded(name: str, parse: Callable[[Any], None]) -> Callable[[Any], None]:
    def parse_or_reject(data: Any) -> None:
        try:
            parse(data)
        except Exception as error:  # noqa: BLE001 - one unreadable event must not end the connection
            log_rejected(log, "discord.event.rejected", error, type=name, **_ids_of(name, data))

    return parse_or_reject


def _noting_arrival(events: ClientEvents, parse: Callable[[Any], None]) -> Callable[[Any], None]:
    def note_then_parse(data: Any) -> None:
        ids = (data.get("channel_id"), data.get("id")) if isinstance(data, dict) else ()
        if len(ids) == 2 and all(isinstance(one, str | int) and str(one).isdigit() for one in ids):
            events.arrived(int(ids[0]), int(ids[1]))
        parse(data)

    return note_then_parse


def _ids_of(name: str, data: Any) -> dict[str, object]:
    """The ids in an event's data that say which event it was (never its content)."""
    if not isinstance(data, dict):
        return {}
    author = data.get("author")
    found = {
        "message_id" if name.startswith("MESSAGE") else "id": data.get("id"),
        "channel": data.get("channel_id"),
        "guild": data.get("guild_id"),
        "user": author.get("id") if isinstance(author, dict) else None,
    }
    return {key: value for key, value in found.items() if isinstance(value, str | int)}

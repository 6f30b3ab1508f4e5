"""Reading a Discord channel's history: what a lost session missed, and what the liveness probe looks at.

The channel of a :class:`CatchUpPoint` is its thread (``thread_id``) or else its chat (a DM or a server
channel). Messages are read through discord.py's own ``history`` (``GET /channels/{id}/messages``, on the
configured REST base), newest first, so the newest ``per_chat`` of a long gap come back with as few
pages as the gap needs. A thread is taken from discord.py's cache (or fetched), so its messages carry
the server and the parent channel exactly as live ones do.

Catch-up reads DMs and threads only, as the issue asks: a server channel's history is mostly talk
among people, not to the bot (its sessions are not caught up; the liveness probe still looks there).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import discord
import structlog

from adapters.contract import Attempt, CatchUpPoint, CatchUpWindow, ChatType, InboundMessage, translated
from adapters.discord.sending import delivery_error

log = structlog.get_logger(__name__)

Convert = Callable[[discord.Message], InboundMessage | None]
"""A message as the adapter hands it over live; None for one the bot is not shown (its own, system messages)."""

SKIPPED_PER_CHAT = 200
"""How many messages of other kinds (the bot's own, other bots', system ones) one chat's catch-up reads past
besides the users' messages it returns: a thread flooded by a bot ends the reading there."""


def channel_id_of(point: CatchUpPoint) -> int:
    return int(point.thread_id or point.chat_id)


def is_caught_up(point: CatchUpPoint) -> bool:
    """Whether catch-up reads this point: a DM or a thread (see the module's docstring)."""
    return point.chat_type is ChatType.DM or point.thread_id is not None


async def channel_of(client: discord.Client, point: CatchUpPoint) -> discord.abc.Messageable:
    """The channel to read for ``point``: a DM needs no lookup, a thread or channel is cached or fetched (raises
    discord.py's errors, NotFound for one that is gone)."""
    channel_id = channel_id_of(point)
    if point.chat_type is ChatType.DM:
        return client.get_partial_messageable(channel_id)
    found = client.get_channel(channel_id) or await client.fetch_channel(channel_id)
    if not isinstance(found, discord.abc.Messageable):
        raise TypeError(f"channel {channel_id} holds no messages")
    return found


def start_after(point: CatchUpPoint, since: float) -> int:
    """The message id to read after: the point's last stored message, or the window's start if that is later."""
    from_since = discord.utils.time_snowflake(datetime.fromtimestamp(since, UTC)) - 1
    try:
        stored = int(point.after) if point.after is not None else 0
    except ValueError:
        log.warning("discord.catchup.bad_point", chat=point.chat_id, after=point.after,
                    reason="the stored message id is no Discord id; reading from the window's start")  # fmt: skip
        stored = 0
    return max(stored, from_since)


async def missed_at(
    client: discord.Client, point: CatchUpPoint, window: CatchUpWindow, convert: Convert
) -> list[InboundMessage]:
    """The users' messages sent at ``point`` after its ``after`` (and the window's start), at most the newest
    ``window.per_chat``, oldest first. A channel that is gone or closed to the bot gives none (logged);
    other failures raise the delivery errors of :mod:`adapters.discord.sending`."""
    channel_id = channel_id_of(point)
    found: list[InboundMessage] = []
    with translated(delivery_error, Attempt("read the history", str(channel_id))):
        try:
            channel = await channel_of(client, point)
            after = discord.Object(id=start_after(point, window.since))
            read = channel.history(limit=window.per_chat + SKIPPED_PER_CHAT, after=after, oldest_first=False)
            async for message in read:
                inbound = convert(message)
                if inbound is not None and not inbound.from_bot:
                    found.append(inbound)
                    if len(found) >= window.per_chat:
                        break
        except (discord.NotFound, discord.Forbidden) as error:
            log.warning("discord.catchup.unreadable", channel=str(channel_id), status=error.status, code=error.code,
                        hint="the channel or thread is gone, or the bot may no longer read it; nothing caught up "
                        "there")  # fmt: skip
            return []
    found.reverse()
    return found


async def catch_up(
    client: discord.Client, points: list[CatchUpPoint], window: CatchUpWindow, convert: Convert
) -> list[InboundMessage]:
    """What every DM and thread among ``points`` missed, at most ``window.total`` (the newest), oldest first."""
    found: list[InboundMessage] = []
    for point in points:
        if is_caught_up(point):
            found += await missed_at(client, point, window, convert)
    found.sort(key=lambda message: (message.timestamp or 0.0, int(message.event_id)))
    return found[-window.total :] if window.total > 0 else []


async def newest(client: discord.Client, point: CatchUpPoint, count: int) -> list[discord.Message]:
    """The ``count`` newest messages at ``point`` (raises discord.py's errors)."""
    channel = await channel_of(client, point)
    return [message async for message in channel.history(limit=count)]

"""The Discord liveness probe: does the gateway connection that claims to be up still bring the users' messages?

Three looks, each cheap:

1. the heartbeat, as discord.py keeps it: how long ago Discord last acknowledged one, and the round trip
   of that one (a connection whose acknowledgements stopped is dead even if the socket is open);
2. one REST round trip (``GET /users/@me``): Discord answers this bot at all, and how fast;
3. for each chat with an open session, its newest few messages (``GET /channels/{id}/messages``): a
   user's message newer than both the last one the gateway stored and the last that arrived on the socket
   there is one Discord holds but never sent: the connection is deaf (``missed=True``).

A message posted at the very moment of the probe may still be on its way over the socket, so a suspect
one is looked at again after a short grace before the connection is called deaf. The details name
channels and message ids, never what was written.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence

import aiohttp
import discord
from discord.http import Route

from adapters.contract import CatchUpPoint, Liveness
from adapters.discord.history import Convert, channel_id_of, newest

PROBE_DEPTH = 10
"""How many of a chat's newest messages are looked at: enough that the bot's own messages since (an alert,
a reply elsewhere in a thread) do not hide a user's message it never received."""
PROBE_GRACE = 2.0
"""Seconds a suspect message gets to arrive over the socket before the connection is called deaf."""
ACK_PATIENCE = 2
"""Heartbeat intervals without an acknowledgement after which the connection counts as dead."""
UNREACHABLE = (discord.HTTPException, discord.DiscordException, aiohttp.ClientError, OSError, TimeoutError)

Arrived = Callable[[int], int]
"""The id of the newest message that arrived on the socket in a channel (0: none)."""


async def probe(
    client: discord.Client | None,
    points: Sequence[CatchUpPoint],
    *,
    arrived: Arrived,
    convert: Convert,
    grace: float = PROBE_GRACE,
) -> Liveness:
    if client is None or client.is_closed() or client.user is None or client.ws is None:
        return Liveness(False, "no Discord gateway connection (discord.py is connecting or reconnecting)")
    heartbeat, alive = _heartbeat(client)
    if not alive:
        return Liveness(False, heartbeat)
    started = time.monotonic()
    try:
        await client.http.request(Route("GET", "/users/@me"))
    except UNREACHABLE as error:
        return Liveness(False, f"{heartbeat}; GET /users/@me failed: {_describe(error)}")
    latency = time.monotonic() - started
    facts = [heartbeat, f"GET /users/@me answered in {latency:.2f} s"]

    suspects: dict[int, list[int]] = {}
    for point in points:
        try:
            messages = await newest(client, point, PROBE_DEPTH)
        except (discord.NotFound, discord.Forbidden) as error:
            facts.append(f"channel {channel_id_of(point)} cannot be read ({_describe(error)})")
            continue
        except (*UNREACHABLE, TypeError) as error:
            return Liveness(False, f"{'; '.join(facts)}; reading channel {channel_id_of(point)} failed: "
                                   f"{_describe(error)}", latency)  # fmt: skip
        unheard = [one.id for one in messages if _users(one, convert) and one.id > _floor(point, arrived)]
        if unheard:
            suspects[channel_id_of(point)] = sorted(unheard)
    if suspects:
        await asyncio.sleep(grace)  # still on its way over the socket? (see the module's docstring)
        suspects = {channel: [one for one in ids if one > arrived(channel)] for channel, ids in suspects.items()}
        suspects = {channel: ids for channel, ids in suspects.items() if ids}
    if suspects:
        found = "; ".join(
            f"channel {channel}: {len(ids)} message(s) never received, the oldest {ids[0]}"
            for channel, ids in suspects.items()
        )
        return Liveness(False, f"{'; '.join(facts)}; {found}", latency, missed=True)
    facts.append(f"{len(points)} chat(s) checked, nothing missed" if points else "no chats to check")
    return Liveness(True, "; ".join(facts), latency)


def _heartbeat(client: discord.Client) -> tuple[str, bool]:
    """What discord.py knows of the heartbeat, and whether it is still acknowledged."""
    keep_alive = getattr(client.ws, "_keep_alive", None)  # discord.py keeps the last acknowledgement here only
    last_ack, interval = getattr(keep_alive, "_last_ack", None), getattr(keep_alive, "interval", None)
    if keep_alive is None or last_ack is None or not interval:
        return "no heartbeat yet", True
    age = time.perf_counter() - last_ack
    latency = client.latency
    round_trip = "no acknowledgement yet" if latency == float("inf") else f"round trip {latency:.2f} s"
    if age > ACK_PATIENCE * interval:
        return f"heartbeat not acknowledged for {age:.0f} s (every {interval:.0f} s expected)", False
    return f"heartbeat acknowledged {age:.1f} s ago ({round_trip})", True


def _users(message: discord.Message, convert: Convert) -> bool:
    """Whether ``message`` is one the bot would have been handed live (a person's, or a bot's with allow_bots)."""
    inbound = convert(message)
    return inbound is not None and not inbound.from_bot


def _floor(point: CatchUpPoint, arrived: Arrived) -> int:
    """The newest message known at ``point``: stored by the gateway, or arrived on the socket."""
    stored = int(point.after) if point.after is not None and point.after.isdigit() else 0
    return max(stored, arrived(channel_id_of(point)))


def _describe(error: BaseException) -> str:
    if isinstance(error, discord.HTTPException):
        return f"HTTP {error.status}, code {error.code}: {error.text}" if error.text else f"HTTP {error.status}"
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__

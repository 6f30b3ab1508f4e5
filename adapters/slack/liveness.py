"""The Slack adapter's liveness probe: does the connection that claims to be up still get the events?

The gateway asks (``SlackAdapter.probe_liveness``) when no event came for a while. In order:

1. ``auth.test``: the Web API answers and the token still works (its round trip is the probe's
   latency). No answer, or an error: the probe fails, naming what came back.
2. Socket Mode only: a session is open, and slack_sdk's last ping was answered less than
   :data:`STALE_PONG` seconds ago (the client sends one every few seconds and replaces a session
   whose pings go unanswered; an old answer means even that stopped).
3. For the conversations with an open session (the newest :data:`PROBE_POINTS` of them), the
   latest few messages after the last one the gateway stored (``conversations.history``, or
   ``conversations.replies`` for a thread). A message a live event would have handed over, that
   the adapter never received (:class:`RecentIds`), sent more than :data:`IN_FLIGHT` seconds ago,
   means Slack holds messages the socket never brought: the connection is deaf (``missed``).
   A conversation that cannot be read (a scope missing, rate limited) is named in the detail but
   fails nothing: it says nothing about the socket.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Final

from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import CatchUpPoint, ChatType, Liveness
from adapters.slack.history import HistoryReader
from adapters.slack.socket_mode import SocketReceiver

STALE_PONG: Final = 60.0
"""Seconds since slack_sdk's last answered ping (sent every 5 s) past which the session counts as dead."""
PROBE_POINTS: Final = 20
"""Conversations one probe looks into at most (those with the newest stored message first)."""
PROBE_MESSAGES: Final = 5
"""Messages one probe reads from each conversation."""
IN_FLIGHT: Final = 10.0
"""Seconds a message may be on its way over the socket before its absence counts as missed."""
RECENT_IDS: Final = 10_000
"""Event ids of received messages remembered, oldest forgotten first."""


class RecentIds:
    """The ids of the latest messages the adapter handed to the gateway (bounded)."""

    def __init__(self, size: int = RECENT_IDS) -> None:
        self._size = size
        self._ids: OrderedDict[str, None] = OrderedDict()

    def add(self, event_id: str) -> None:
        self._ids[event_id] = None
        self._ids.move_to_end(event_id)
        while len(self._ids) > self._size:
            self._ids.popitem(last=False)

    def __contains__(self, event_id: object) -> bool:
        return event_id in self._ids


async def probe(
    client: AsyncWebClient,
    socket: SocketReceiver | None,
    history: HistoryReader,
    received: RecentIds,
    points: Sequence[CatchUpPoint],
    *,
    clock: Callable[[], float] = time.time,
) -> Liveness:
    """What the three checks of this module's docstring found; never raises for Slack's failures."""
    started = time.monotonic()
    try:
        await client.auth_test()
    except Exception as error:  # noqa: BLE001 - any failure to get an answer is the probe's finding
        return Liveness(False, f"auth.test failed: {_describe(error)}")
    latency = time.monotonic() - started
    found = [f"auth.test answered in {latency:.2f} s"]
    if socket is not None:
        if not socket.looks_connected():
            return Liveness(False, "Socket Mode: no session open (slack_sdk is reconnecting)", latency)
        age = socket.pong_age()
        if age is not None and age > STALE_PONG:
            return Liveness(False, f"Socket Mode: the last ping was answered {age:.0f} s ago", latency)
        found.append("Socket Mode: no ping answered yet" if age is None
                     else f"Socket Mode ping answered {age:.1f} s ago")  # fmt: skip
    checked = 0
    for point in sorted((p for p in points if p.after), key=lambda p: p.after_time or 0.0, reverse=True)[:PROBE_POINTS]:
        where = _where(point)
        try:
            newer = await history.newer(point, point.after or "", keep=PROBE_MESSAGES, page=PROBE_MESSAGES, pages=1,
                                        named=False)  # fmt: skip
        except Exception as error:  # noqa: BLE001 - an unreadable conversation says nothing about the socket
            found.append(f"{where} not checked: {_describe(error)}")
            continue
        checked += 1
        missed = [m for m in newer if m.event_id not in received and (m.timestamp or 0.0) < clock() - IN_FLIGHT]
        if missed:
            return Liveness(
                False, f"{where}: {len(missed)} message(s) newer than the last received never arrived over "
                f"{'Socket Mode' if socket is not None else 'the events URL'}", latency, missed=True,
            )  # fmt: skip
    if checked:
        found.append(f"{checked} conversation(s) read: nothing missed")
    return Liveness(True, "; ".join(found), latency)


def _where(point: CatchUpPoint) -> str:
    kind = "DM" if point.chat_type is ChatType.DM else "channel"
    return f"{kind} {point.chat_id}" + (f" thread {point.thread_id}" if point.thread_id else "")


def _describe(error: Exception) -> str:
    return str(error) or type(error).__name__

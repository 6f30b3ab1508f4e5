"""Whether a connection that claims to be up still receives anything, and what it missed.

A platform connection can look healthy (its socket open, its heartbeats answered) while the
platform no longer sends it the users' messages. The gateway notices a quiet adapter and asks it
to *probe* (:meth:`Adapter.probe_liveness`): one or two cheap calls that show whether the platform
holds messages the connection never delivered. A failed probe makes the gateway ask the adapter
to :meth:`~Adapter.reconnect` through its own supervision.

After a connection was rebuilt without resuming (Discord identified afresh, Slack's Socket Mode
opened a new socket, a reconnect the gateway asked for), events sent in between are gone for
good on the socket. The adapter reports such a *gap* through :attr:`Adapter.on_gap`; the gateway
then hands it the chats with an open session (:class:`CatchUpPoint`) and feeds what
:meth:`Adapter.catch_up` returns through intake, whose inbox drops what it already has.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from adapters.contract.events import ChatType

GapListener = Callable[[str], None]
"""Called by an adapter (on the event loop) with the reason, when its connection was rebuilt in a way that
may have lost events: the gateway then catches up. It must not block; it schedules the work."""


@dataclass(frozen=True, slots=True)
class Liveness:
    """What one liveness probe found."""

    ok: bool
    detail: str
    """What was checked and what came back, for /health and the log, e.g. "getWebhookInfo: 0 pending",
    "heartbeat acknowledged 0.08 s ago; GET /users/@me answered", "D01: 2 messages newer than the last received"."""
    latency: float | None = None
    """Seconds the probe's round trip to the platform took, where one was made."""
    missed: bool = False
    """The platform holds messages the connection never delivered (the connection is deaf): catch up after
    reconnecting."""


@dataclass(frozen=True, slots=True)
class CatchUpPoint:
    """One chat (or thread) with an open session, and the last message the gateway stored from it."""

    chat_id: str
    chat_type: ChatType
    thread_id: str | None = None
    """The thread (Discord thread channel, Slack ``thread_ts``) the session lives in; None for the chat itself."""
    after: str | None = None
    """The platform's id of the last user message stored from there (Discord message id, Slack ``ts``);
    None: nothing is known, read from :attr:`CatchUpWindow.since`."""
    after_time: float | None = None
    """Wall-clock time of that message, where known."""


@dataclass(frozen=True, slots=True)
class CatchUpWindow:
    """How far a catch-up reads: nothing older than ``since``, at most ``per_chat`` messages from one point
    (the newest ones) and ``total`` in all."""

    since: float
    """Wall-clock time: messages sent before it are not fetched."""
    per_chat: int = 50
    total: int = 500

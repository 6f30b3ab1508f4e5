"""The boundary every platform adapter implements: the :class:`Adapter` base class.

An adapter owns one platform connection. The gateway starts it with an
*intake* callback, asks it to send, edit and show typing, reads its status for
/health, and stops it in two steps: first intake (no new messages), later the
connection itself (after queued replies were flushed).

A new platform is a package ``adapters/<platform>/`` (it imports nothing of
Switchboard but ``adapters.contract`` and ``adapters.http_listener``), a config
model for its section ``platforms.<platform>`` and a README section. Its
package exports (in ``__all__``) one subclass of :class:`Adapter` that provides:

* ``platform``: the name, the same as its config section's;
* ``capabilities``: its message limit and how the limit is counted, whether it
  can edit, and the markup dialect replies are written in (the only place a
  platform's limit is written down);
* ``platform_hint``: what the model is told about formatting and length there;
* ``from_config(section)``: the adapter built from its config section, raising
  :class:`AdapterError` (saying what to set) when the section cannot run;
* ``chats_setting`` / ``servers_setting``: which keys of the section list the
  chats and servers it answers in, when they are not ``allowed_chats`` and none
  (the section also has ``allowed_users``, ``allow_all`` and ``require_mention``);
* ``bot_username``: the bot's own name once connected, for ``/cmd@name``;
* ``start``, ``stop_intake``, ``close``, ``send`` (and ``edit``, ``typing`` where
  the platform has them; ``stream_modes`` with the streaming methods it offers,
  see :mod:`.streaming`; ``chat_rate`` where a kind of chat takes fewer sends), raising the delivery errors of :mod:`.errors`, with
  the platform library's exceptions translated by :func:`.errors.translated`;
* where receiving takes a connection only one process may hold (long polling, a
  WebSocket): ``receiving_lease`` naming it, ``start(intake, receive=False)`` that
  connects for sending only, and ``start_receiving`` / ``stop_receiving`` (see
  :mod:`.receiving`), so several gateways on one database share the bot;
* optionally a module ``adapters/<platform>/probe.py`` with
  ``async def probe(section, http, where) -> Probe``: the doctor's read-only
  credential check. It is kept apart from the adapter class, and the package's
  ``__init__`` imports the adapter lazily, so ``switchboard doctor`` checks a
  token without loading the platform's library (seconds);
* where it can: ``probe_liveness``, ``reconnect`` and ``catch_up`` (see
  :mod:`.liveness`), and a call to ``_report_gap`` when its connection was rebuilt
  in a way that may have lost events.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any, ClassVar, Literal, Self

from adapters.contract.buttons import Button, ButtonListener
from adapters.contract.errors import AdapterError, MediaUnavailable, StreamingUnsupported
from adapters.contract.events import Attachment, ChatType, CommandMenu, InboundMessage, Markup, OutboundMessage
from adapters.contract.liveness import CatchUpPoint, CatchUpWindow, GapListener, Liveness
from adapters.contract.receiving import Ownership
from adapters.contract.streaming import Rate, RateLimits, StreamMode

Intake = Callable[[InboundMessage], Awaitable[None]]
"""Hands one inbound message to the gateway; returns once the gateway has accepted (stored) it."""

Where = Callable[[str], str]
"""For a key of the adapter's config section (``token``), where the operator sets it (for messages)."""


class AdapterState(StrEnum):
    NEW = "new"
    STARTING = "starting"
    RUNNING = "running"
    DEGRADED = "degraded"
    """Connected but not healthy (e.g. polling stalled, reconnecting)."""
    STOPPING = "stopping"
    STOPPED = "stopped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class Capabilities:
    max_message_length: int
    length_unit: Literal["chars", "utf16"] = "chars"
    """How the limit is counted: Python characters, or UTF-16 code units (Telegram)."""
    can_edit: bool = True
    markup: Markup = Markup.PLAIN
    rates: RateLimits = RateLimits()
    """How many sends and edits the platform takes (per chat, overall) and how often a streamed
    message is updated by default."""


@dataclass(frozen=True, slots=True)
class AccessPolicy:
    """One platform's access settings (from ``platforms.<name>`` in config.yaml), read by the gateway."""

    allowed_users: frozenset[str] = frozenset()
    allow_all: bool = False
    require_mention: bool = True
    allowed_chats: frozenset[str] = frozenset()
    """Chats/channels where the bot answers in groups; empty means any."""
    allowed_servers: frozenset[str] = frozenset()
    """Discord servers (guilds) where the bot answers; empty means any."""


@dataclass(frozen=True, slots=True)
class Probe:
    """What the doctor's check of a platform's credentials found."""

    ok: bool
    detail: str
    fix: str = ""
    """When not ok: what the operator should do."""


@dataclass(frozen=True, slots=True)
class AdapterStatus:
    state: AdapterState
    detail: str = ""
    last_inbound_at: float | None = None
    """Wall-clock time of the last inbound message, or None."""

    def to_dict(self, now: float | None = None) -> dict[str, object]:
        now = time.time() if now is None else now
        since = None if self.last_inbound_at is None else round(now - self.last_inbound_at, 1)
        return {"state": self.state.value, "detail": self.detail, "seconds_since_inbound": since}


class Adapter(abc.ABC):
    """One platform connection (what a subclass provides: see this module's docstring)."""

    platform: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    supports_buttons: ClassVar[bool] = False
    """Whether :meth:`send_choice` and :meth:`close_choice` work here (buttons under a message, see :mod:`.buttons`)."""
    platform_hint: ClassVar[str] = ""
    """What the model is told about answering on this platform (formatting that renders, message length);
    the gateway hands it to the agent for each new session, unless ``agent.platform_hints`` replaces it."""
    chats_setting: ClassVar[str] = "allowed_chats"
    """The key of the config section that lists the chats (channels) the bot answers in."""
    servers_setting: ClassVar[str | None] = None
    """The key that lists the servers (Discord guilds) the bot answers in, where the platform has them."""
    bot_username: str | None = None
    """The bot's own name on the platform once connected (``/cmd@name`` for another bot is ignored)."""

    @classmethod
    def from_config(cls, section: Any) -> Self:
        """The adapter for ``platforms.<platform>`` (the platform's config model)."""
        raise AdapterError(f"the {cls.platform} adapter cannot be built from configuration")

    @classmethod
    def access_policy(cls, section: Any) -> AccessPolicy:
        """Who may talk to the bot and where, from the platform's config section."""
        servers = getattr(section, cls.servers_setting) if cls.servers_setting else ()
        return AccessPolicy(
            allowed_users=frozenset(section.allowed_users), allow_all=section.allow_all,
            require_mention=section.require_mention, allowed_chats=frozenset(getattr(section, cls.chats_setting)),
            allowed_servers=frozenset(servers),
        )  # fmt: skip


    def __init__(self) -> None:
        self.commands = CommandMenu()
        """The chat commands the gateway answers (set by ``gateway.adapter_loader`` before start). An
        adapter whose platform shows a menu of commands publishes them when it starts; others ignore it."""
        self.on_button: ButtonListener | None = None
        """Told when someone presses a button of a message sent with :meth:`send_choice` (set by the gateway
        before start; see :mod:`.buttons`)."""
        self.on_gap: GapListener | None = None
        """Told when the connection was rebuilt in a way that may have lost events (set by the gateway
        before start; see :mod:`.liveness`)."""
        self._state = AdapterState.NEW
        self._detail = ""
        self._last_inbound_at: float | None = None

    # --- lifecycle -------------------------------------------------------------------------
    @abc.abstractmethod
    async def start(self, intake: Intake, *, receive: bool = True) -> None:
        """Connect and begin delivering inbound messages to ``intake``. Returns once started.

        ``receive=False`` (only passed when :meth:`receiving_lease` names a connection): connect for sending
        only; the connection that receives is opened by :meth:`start_receiving` once this process holds it."""

    def receiving_lease(self) -> str | None:
        """The name of the receiving connection only one process may hold at a time in the configured mode
        (``telegram:poll:<bot id>``), known without asking the platform; None when receiving takes no such
        connection (HTTP ingress runs in every process). Default: None."""
        return None

    async def start_receiving(self, ownership: Ownership) -> None:
        """Open the receiving connection named by :meth:`receiving_lease` (after ``start(receive=False)``);
        hand events over only while ``ownership.held()`` (see :mod:`.receiving`). Returns without waiting
        for it to connect."""
        raise AdapterError(f"the {self.platform} adapter has no receiving connection of its own to start")

    async def stop_receiving(self) -> None:
        """Close the receiving connection opened by :meth:`start_receiving` at once; sending keeps working.
        Idempotent."""

    @abc.abstractmethod
    async def stop_intake(self) -> None:
        """Stop receiving new messages; sending keeps working. Idempotent."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Release the connection. Idempotent."""

    # --- outbound --------------------------------------------------------------------------
    @abc.abstractmethod
    async def send(self, message: OutboundMessage) -> str:
        """Send one chunk; returns the platform's id for the sent message.

        ``message.nonce`` is the same on every attempt at one chunk, also after a restart. Where the
        platform takes an idempotency key (Discord's ``nonce`` with ``enforce_nonce``), pass it, so a
        chunk sent again after a crash between sending and recording is not shown twice.
        """

    async def edit(self, chat_id: str, message_id: str, text: str, *, markup: Markup = Markup.PLAIN) -> None:
        """Replace the text of a message the bot sent."""
        raise AdapterError(f"{self.platform} messages cannot be edited")

    async def send_choice(
        self, chat_id: str, text: str, buttons: Sequence[Button], *, thread_id: str | None = None,
        reply_to: str | None = None,
    ) -> str:
        """Send plain ``text`` with ``buttons`` in one row under it; returns the message id. Presses come to
        ``on_button``. Only where :attr:`supports_buttons`; raises the delivery errors of :mod:`.errors`."""
        raise AdapterError(f"the {self.platform} adapter cannot show buttons")

    async def close_choice(self, chat_id: str, message_id: str, text: str) -> None:
        """Replace the text of a message sent with :meth:`send_choice` by ``text`` and remove its buttons
        (the question is answered or expired). Raises the delivery errors of :mod:`.errors`."""
        raise AdapterError(f"the {self.platform} adapter cannot show buttons")

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Show a typing indicator for a few seconds (the gateway refreshes it). Default: nothing."""

    def chat_rate(self, chat_id: str) -> Rate:
        """The rate of sends and edits one chat takes; a platform whose groups take fewer than its
        private chats (Telegram: 20 a minute) says so here. Default: ``capabilities.rates.per_chat``."""
        return self.capabilities.rates.per_chat

    # --- streaming (a reply shown while it is written) ------------------------------------------
    # Each method raises StreamingUnsupported where the platform (or this bot, or this kind of chat)
    # refuses it; other failures are the delivery errors ``send`` raises.
    def stream_modes(self, chat_type: ChatType, thread_id: str | None = None) -> tuple[StreamMode, ...]:
        """The ways a reply in such a chat can be shown as it is written, best first (none: not at all).
        Default: edit in place where the platform can edit."""
        return (StreamMode.EDIT,) if self.capabilities.can_edit else ()

    async def send_draft(
        self, chat_id: str, thread_id: str | None, draft_id: int, text: str, *, markup: Markup = Markup.PLAIN
    ) -> None:
        """Show (or replace) the ephemeral draft ``draft_id`` with ``text`` (:attr:`StreamMode.DRAFT`);
        empty text shows the platform's "thinking" placeholder."""
        raise StreamingUnsupported(f"{self.platform} has no drafts")

    async def start_stream(self, message: OutboundMessage, *, recipient_user_id: str | None = None) -> str:
        """Start a natively streamed message (:attr:`StreamMode.NATIVE`) with ``message.text`` (model
        Markdown, may be empty) in ``message.thread_id``; returns its message id. ``recipient_user_id``:
        the user the reply answers, for platforms that stream to one person in a channel."""
        raise StreamingUnsupported(f"{self.platform} has no streaming API")

    async def append_stream(self, chat_id: str, message_id: str, text: str) -> None:
        """Append ``text`` (model Markdown) to a streamed message started by :meth:`start_stream`."""
        raise StreamingUnsupported(f"{self.platform} has no streaming API")

    async def stop_stream(self, chat_id: str, message_id: str) -> None:
        """End a streamed message; it can then be edited like any other (:meth:`edit`). Idempotent:
        a stream that already ended (by a restart, or the platform's own timeout) is no error."""
        raise StreamingUnsupported(f"{self.platform} has no streaming API")

    async def set_status(self, chat_id: str, thread_id: str | None, status: str) -> None:
        """Show ``status`` ("is searching past conversations…") on the platform's own status line for the
        thread, where it has one (Slack's ``assistant.threads.setStatus``); empty text clears it."""
        raise StreamingUnsupported(f"{self.platform} has no status line")

    # --- files that came with a message ------------------------------------------------------
    async def fetch_media(self, attachment: Attachment, *, max_bytes: int, timeout: float) -> bytes:
        """The bytes of ``attachment`` (one of an inbound message's), downloaded through the
        platform's API on its configured base URL. Raises :class:`MediaUnavailable` with a reason:
        ``too_large`` as soon as the platform's claim or the bytes read pass ``max_bytes`` (nothing
        more is read), ``timeout`` after ``timeout`` seconds in all, ``redirect`` for a redirect
        to another host (never followed), ``gone``, ``refused`` or ``failed``.
        Default: this platform cannot download files."""
        raise MediaUnavailable("unsupported", f"files sent on {self.platform} cannot be read here")

    # --- liveness and catching up (see .liveness) -------------------------------------------
    async def probe_liveness(self, points: Sequence[CatchUpPoint]) -> Liveness:
        """Check, with the platform, that the connection still receives: asked by the gateway when no
        inbound event came for a while though the connection claims to be up. ``points`` are the chats with
        an open session (the last message stored from each), for a platform whose probe looks there for
        messages never delivered. Returns within a few seconds; a failure to reach the platform is a
        failed probe, not an exception. Default: ok while the adapter runs."""
        running = self._state is AdapterState.RUNNING
        return Liveness(running, f"{self._state.value}: {self._detail}" if self._detail else self._state.value)

    async def reconnect(self, reason: str) -> None:
        """Drop the platform connection and let the adapter's own supervision build a new one (state
        DEGRADED with ``reason`` until it is back); returns without waiting for it. A reconnect that cannot
        resume reports a gap (:meth:`_report_gap`). Default: the adapter cannot, which is logged by the caller."""
        raise AdapterError(f"the {self.platform} adapter cannot reconnect on request")

    async def catch_up(self, points: Sequence[CatchUpPoint], window: CatchUpWindow) -> list[InboundMessage]:
        """The user messages sent at ``points`` after their ``after`` id (and inside ``window``), oldest
        first, converted exactly as live events are (the same event ids, so the inbox drops those it has).
        Messages the bot would not have been sent live (its own, other bots') are left out. Raises the
        platform's errors translated (the gateway logs them and tries again after the next gap).
        Default: nothing to fetch (Telegram keeps undelivered updates itself)."""
        return []

    def _report_gap(self, reason: str) -> None:
        """Tell the gateway events may have been lost (a new session instead of a resumed one)."""
        if self.on_gap is not None:
            self.on_gap(reason)

    # --- status ----------------------------------------------------------------------------
    def status(self) -> AdapterStatus:
        return AdapterStatus(self._state, self._detail, self._last_inbound_at)

    def _set_state(self, state: AdapterState, detail: str = "") -> None:
        self._state = state
        self._detail = detail

    def _note_inbound(self) -> None:
        self._last_inbound_at = time.time()

    async def __aenter__(self) -> Adapter:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.close()

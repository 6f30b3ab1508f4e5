"""The boundary every platform adapter implements.

An adapter owns one platform connection. The gateway starts it with an
*intake* callback, asks it to send, edit and show typing, reads its status for
/health, and stops it in two steps: first intake (no new messages), later the
connection itself (after queued replies were flushed).

Adapters import only the types in ``gateway.events`` from the rest of
Switchboard.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from enum import StrEnum
from types import TracebackType
from typing import Any, ClassVar, Literal

from pydantic import ValidationError

from gateway.events import CommandMenu, InboundMessage, Markup, OutboundMessage

Intake = Callable[[InboundMessage], Awaitable[None]]
"""Hands one inbound message to the gateway; returns once the gateway has accepted (stored) it."""


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


def rejection_reason(error: BaseException, *, limit: int = 300) -> str:
    """Why an inbound event could not be read or stored, for a ``*.rejected`` log line: never its content.

    A validation error from pydantic (as aiogram raises) is reduced to where and
    what (its own text quotes the offending input, which may be the user's
    words); any other error is its type and message, cut to ``limit`` characters.
    """
    if isinstance(error, ValidationError):
        found = error.errors(include_input=False, include_url=False)
        return "; ".join(f"{'.'.join(str(part) for part in item['loc'])}: {item['msg']}" for item in found)[:limit]
    return f"{type(error).__name__}: {error}"[:limit]


def log_rejected(logger: Any, event: str, error: BaseException, **ids: object) -> None:
    """Log one skipped inbound event as ``event`` (``telegram.update.rejected`` ...): its ids and the reason.

    Bad data (a missing key, a wrong type or value) needs no traceback; anything
    else may be a bug in the adapter and gets one, which shows code, not the event.
    """
    if not isinstance(error, ValueError | TypeError | LookupError):
        ids["exc_info"] = error
    logger.warning(event, reason=rejection_reason(error), hint="skipped; the events after it are handled as usual",
                   **ids)  # fmt: skip


class AdapterError(Exception):
    """An adapter could not do what was asked; the message says what to do about it."""


class DeliveryError(AdapterError):
    """Sending failed. Adapters translate their platform's errors into these subclasses.

    ::

        DeliveryError
        ├── RateLimited            the platform asked us to wait ``retry_after`` seconds
        ├── MarkupRejected         the platform refused the formatting; plain text may pass
        ├── RecipientUnavailable   blocked, kicked, chat gone: retrying will not help
        └── TransientDeliveryError a network or server hiccup: try again shortly
    """

    retryable = False


class RateLimited(DeliveryError):
    retryable = True

    def __init__(self, retry_after: float, message: str = "") -> None:
        super().__init__(message or f"rate limited: retry after {retry_after:g} s")
        self.retry_after = retry_after


class MarkupRejected(DeliveryError):
    pass


class RecipientUnavailable(DeliveryError):
    pass


class TransientDeliveryError(DeliveryError):
    retryable = True


class Adapter(abc.ABC):
    """One platform connection. Subclasses set ``platform`` and ``capabilities``."""

    platform: ClassVar[str]
    capabilities: ClassVar[Capabilities]

    def __init__(self) -> None:
        self.commands = CommandMenu()
        """The chat commands the gateway answers (set by ``gateway.adapter_loader`` before start). An
        adapter whose platform shows a menu of commands publishes them when it starts; others ignore it."""
        self._state = AdapterState.NEW
        self._detail = ""
        self._last_inbound_at: float | None = None

    # --- lifecycle -------------------------------------------------------------------------
    @abc.abstractmethod
    async def start(self, intake: Intake) -> None:
        """Connect and begin delivering inbound messages to ``intake``. Returns once started."""

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

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        """Show a typing indicator for a few seconds (the gateway refreshes it). Default: nothing."""

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

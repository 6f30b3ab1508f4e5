"""An in-process adapter for driving the real gateway without any platform.

It implements the real :class:`adapters.contract.Adapter` interface, so every
gateway code path runs; tests inject messages and read what was sent.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from adapters.contract import (
    Adapter,
    AdapterState,
    Capabilities,
    ChatType,
    DeliveryError,
    InboundMessage,
    Intake,
    Markup,
    MarkupRejected,
    OutboundMessage,
    Rate,
    RateLimits,
    StreamMode,
)


UNHURRIED = RateLimits(per_chat=Rate(1000, 1.0))
"""Rates no test reaches, for the test adapters: tests of the rate budget give theirs the rates they test."""


@dataclass(frozen=True, slots=True)
class Edit:
    chat_id: str
    message_id: str
    text: str


class LoopbackAdapter(Adapter):
    platform = "loopback"
    capabilities = Capabilities(max_message_length=4096, length_unit="chars", can_edit=True, markup=Markup.PLAIN,
                                rates=UNHURRIED)  # fmt: skip

    def __init__(self) -> None:
        super().__init__()
        self._intake: Intake | None = None
        self._event_ids = itertools.count(1)
        self._message_ids = itertools.count(1)
        self.sent: list[OutboundMessage] = []
        self.edits: list[Edit] = []
        self.typing_chats: list[str] = []
        self.failures: list[DeliveryError] = []
        """Errors the next sends raise, one each, before sending works again."""
        self.reject_markup = False
        """Refuse every formatted chunk, as a platform does with markup it cannot parse."""
        self.reject_markup_if: Callable[[OutboundMessage], bool] | None = None
        """Refuse just the formatted chunks this picks (a platform choking on one chunk's markup)."""
        self.rejected: list[OutboundMessage] = []
        """Formatted chunks refused (by ``reject_markup`` or ``reject_markup_if``), in the order tried."""
        self.bot_username = "loopbot"
        self.streams: tuple[StreamMode, ...] = ()
        """The ways a reply may be streamed here (``stream_modes``); none by default, so a test opts in."""
        self._sent_changed = asyncio.Condition()

    async def start(self, intake: Intake) -> None:
        self._intake = intake
        self._set_state(AdapterState.RUNNING, "in-process test adapter")

    async def stop_intake(self) -> None:
        self._intake = None
        self._set_state(AdapterState.STOPPING, "intake stopped")

    async def close(self) -> None:
        self._intake = None
        self._set_state(AdapterState.STOPPED)

    async def send(self, message: OutboundMessage) -> str:
        if self.failures:
            raise self.failures.pop(0)
        if message.markup is not Markup.PLAIN and (
            self.reject_markup or (self.reject_markup_if is not None and self.reject_markup_if(message))
        ):
            self.rejected.append(message)
            raise MarkupRejected("can't parse entities")
        async with self._sent_changed:
            self.sent.append(message)
            self._sent_changed.notify_all()
        return f"m{next(self._message_ids)}"

    async def wait_sent(self, count: int, *, timeout: float = 30.0) -> list[OutboundMessage]:
        """Wait until ``count`` messages were sent in all (the timeout only stops a hang)."""
        async with self._sent_changed:
            await asyncio.wait_for(self._sent_changed.wait_for(lambda: len(self.sent) >= count), timeout)
        return list(self.sent)

    def texts(self, chat_id: str | None = None) -> list[str]:
        return [m.text for m in self.sent if chat_id is None or m.chat_id == chat_id]

    async def edit(self, chat_id: str, message_id: str, text: str, *, markup: Markup = Markup.PLAIN) -> None:
        self.edits.append(Edit(chat_id, message_id, text))

    async def typing(self, chat_id: str, thread_id: str | None = None) -> None:
        self.typing_chats.append(chat_id)

    def stream_modes(self, chat_type: ChatType, thread_id: str | None = None) -> tuple[StreamMode, ...]:
        return self.streams

    async def inject(
        self,
        text: str,
        *,
        chat_id: str = "chat-1",
        user_id: str = "user-1",
        chat_type: ChatType = ChatType.DM,
        **fields: Any,
    ) -> InboundMessage:
        """Deliver a user message to the gateway as a platform would; returns it once accepted."""
        if self._intake is None:
            raise RuntimeError("the loopback adapter is not accepting messages (not started, or intake stopped)")
        event_id = str(fields.pop("event_id", next(self._event_ids)))
        message = InboundMessage(
            platform=self.platform,
            event_id=event_id,
            chat_id=chat_id,
            chat_type=chat_type,
            user_id=user_id,
            text=text,
            **fields,
        )
        self._note_inbound()
        await self._intake(message)
        return message


class TelegramHtmlLoopbackAdapter(LoopbackAdapter):
    """The loopback adapter with Telegram's capabilities: replies are rendered as Telegram HTML,
    4096 UTF-16 code units a message. Set ``reject_markup`` or ``reject_markup_if`` to have it
    refuse formatted chunks the way the Bot API refuses HTML it cannot parse."""

    capabilities = Capabilities(
        max_message_length=4096, length_unit="utf16", can_edit=True, markup=Markup.TELEGRAM_HTML, rates=UNHURRIED
    )


class BrokenAdapter(LoopbackAdapter):
    """An adapter whose connection fails at start, like a platform with a revoked token."""

    platform = "broken"

    async def start(self, intake: Intake) -> None:
        self._set_state(AdapterState.FAILED, "token rejected")
        raise RuntimeError("401 Unauthorized: the token was rejected")

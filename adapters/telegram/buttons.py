"""Buttons under the bot's messages on Telegram: an inline keyboard out, a ``callback_query`` back.

A question goes out as a message with one row of inline buttons whose ``callback_data`` is the
button's id (:mod:`adapters.contract.buttons`); closing it edits the text and sends an empty
keyboard, which removes the buttons. A press arrives as a ``callback_query`` update, by long polling
or webhook alike: :class:`Presses` answers it at once (``answerCallbackQuery``, so the person's client
stops its spinner whatever happens next) and hands a :class:`ButtonPress` to the adapter's
``on_button``. Whether the press counts (who pressed, whether the question is still open) is the
gateway's decision. A press in a group the bot does not answer in (outside a non-empty
``allowed_chats``), or one that is no button of a message in a chat (an inline-mode message, a
game), is acknowledged and ignored here (``telegram.button.ignored``); one that cannot be read is
logged as ``telegram.update.rejected``. Nothing about a press is stored: it is an answer to a question that
lives only as long as the turn that asked it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, Final

import structlog
from aiogram import Bot
from aiogram.exceptions import ClientDecodeError, TelegramAPIError
from aiogram.methods import AnswerCallbackQuery
from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message

from adapters.contract import Button, ButtonListener, ButtonPress, log_rejected

from .convert import PLATFORM
from .updates import update_id_of

log = structlog.get_logger(__name__)

ACK_TIMEOUT: Final = 10
"""Seconds answerCallbackQuery may take (Telegram wants the answer within about 15 s of the press)."""


def keyboard(buttons: Sequence[Button]) -> InlineKeyboardMarkup:
    """One row of inline buttons, each sending its id back as ``callback_data``."""
    return InlineKeyboardMarkup(
        inline_keyboard=[[InlineKeyboardButton(text=button.label, callback_data=button.id) for button in buttons]]
    )


NO_KEYBOARD: Final = InlineKeyboardMarkup(inline_keyboard=[])
"""What an edit sends to take a message's buttons away."""


def is_press(raw: object) -> bool:
    """Whether a raw update is a ``callback_query`` (someone pressed a button)."""
    return isinstance(raw, dict) and "callback_query" in raw


def to_press(query: CallbackQuery) -> ButtonPress | None:
    """The press a callback query carries, or None when it is no button of a bot message in a chat."""
    message = query.message
    if message is None or query.data is None:
        return None
    topic = isinstance(message, Message) and message.is_topic_message and message.message_thread_id
    return ButtonPress(
        platform=PLATFORM, chat_id=str(message.chat.id), user_id=str(query.from_user.id), button_id=query.data,
        message_id=str(message.message_id), thread_id=str(topic) if topic else None,
        user_name=query.from_user.full_name or (query.from_user.username or ""),
    )  # fmt: skip


class Presses:
    """Handles the ``callback_query`` updates polling or the webhook receives."""

    def __init__(self, listener: Callable[[], ButtonListener | None], *, allowed_chats: Collection[str] = ()) -> None:
        """``listener``: the adapter's ``on_button`` as it is when a press arrives. ``allowed_chats``: the groups
        whose presses are taken (``platforms.telegram.allowed_chats``; empty: any); private chats always are."""
        self._listener = listener
        self._allowed_chats = frozenset(allowed_chats)

    async def handle(self, raw: Any, bot: Bot) -> None:
        """Acknowledge the press to Telegram, then hand it to ``on_button``; never raises."""
        update_id = update_id_of(raw)
        try:
            query = CallbackQuery.model_validate(raw["callback_query"], context={"bot": bot})
        except Exception as error:  # noqa: BLE001 - one unreadable update must not block the ones after it
            log_rejected(log, "telegram.update.rejected", error, update_id=update_id)
            return
        await self._acknowledge(bot, query.id, update_id)
        press = to_press(query)
        listener = self._listener()
        why = "not a button of a bot message in a chat" if press is None else self._refusal(query, press)
        if press is None or why is not None or listener is None:
            log.info("telegram.button.ignored", update_id=update_id, user=query.from_user.id,
                     chat=press.chat_id if press else None, reason=why or "nobody listens for presses")  # fmt: skip
            return
        try:
            await listener(press)
        except Exception as error:  # noqa: BLE001 - the gateway's trouble with a press must not stop receiving
            log.error("telegram.button.failed", update_id=update_id, error=f"{type(error).__name__}: {error}",
                      exc_info=error)  # fmt: skip

    def _refusal(self, query: CallbackQuery, press: ButtonPress) -> str | None:
        """Why presses in this chat are not taken (a group outside ``allowed_chats``), or None."""
        private = query.message is not None and query.message.chat.type == "private"
        if private or not self._allowed_chats or press.chat_id in self._allowed_chats:
            return None
        return f"chat {press.chat_id} is not in allowed_chats"

    @staticmethod
    async def _acknowledge(bot: Bot, query_id: str, update_id: int | None) -> None:
        try:
            await bot(AnswerCallbackQuery(callback_query_id=query_id), request_timeout=ACK_TIMEOUT)
        except (TelegramAPIError, ClientDecodeError) as error:
            # Too late (the press waited while the gateway was down) or Telegram unreachable: the person's
            # client stops its spinner by itself; the press still counts if the question is open.
            log.warning("telegram.button.ack_failed", update_id=update_id, error=str(error))

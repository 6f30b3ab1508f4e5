"""Sending, editing, drafts and "typing...", with Telegram's errors turned into the contract's delivery errors.

Every call is made exactly once: aiogram's session does not retry, and
retrying (after ``retry_after``, with backoff, as plain text) is the
gateway's decision, driven by the error class raised here.

A draft (``sendMessageDraft``) the Bot API refuses for good, because the
server predates drafts or the chat cannot have them, is
:class:`StreamingUnsupported`: the gateway then shows the reply by editing a
message instead. Its other failures are the usual delivery errors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TypeVar

import aiohttp
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.enums import ChatAction, ParseMode
from aiogram.exceptions import (
    ClientDecodeError,
    TelegramAPIError,
    TelegramBadRequest,
    TelegramEntityTooLarge,
    TelegramForbiddenError,
    TelegramMigrateToChat,
    TelegramNetworkError,
    TelegramNotFound,
    TelegramRetryAfter,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.methods import EditMessageText, SendChatAction, SendMessage, SendMessageDraft, TelegramMethod
from aiohttp import FormData
from aiogram.types import InlineKeyboardMarkup, ReplyParameters

from adapters.contract import (
    Attempt,
    Button,
    DeliveryError,
    Markup,
    MarkupRejected,
    OutboundMessage,
    RateLimited,
    RecipientUnavailable,
    StreamingUnsupported,
    TransientDeliveryError,
    translated,
)

from .buttons import NO_KEYBOARD, keyboard

T = TypeVar("T")

SEND_TIMEOUT = 30
"""Seconds one send may take before it counts as a network failure."""
GONE = ("chat not found", "user is deactivated", "group chat was deactivated", "message thread not found",
        "topic_closed", "topic_deleted", "not enough rights", "have no rights", "chat_write_forbidden")  # fmt: skip
DRAFTS_REFUSED = ("textdraft_peer_invalid", "drafts are not", "draft is not", "method is available only",
                  "forum topic mode")  # fmt: skip
"""How a 400 to ``sendMessageDraft`` says this chat or bot cannot have drafts (``TEXTDRAFT_PEER_INVALID``: not a
private chat), as opposed to a problem with this one draft."""


class SendingSession(AiohttpSession):
    """aiogram's HTTP session, except that a draft's empty text is sent.

    aiogram leaves out every empty parameter, but for ``sendMessageDraft`` the empty text is the request:
    it shows the user Telegram's "Thinking…" placeholder while the bot works (tools running)."""

    def build_form_data(self, bot: Bot, method: TelegramMethod[T]) -> FormData:
        form = super().build_form_data(bot, method)
        if isinstance(method, SendMessageDraft) and method.text == "":
            form.add_field("text", "")
        return form


class Sender:
    def __init__(self, bot: Bot) -> None:
        self._bot = bot

    async def send(self, message: OutboundMessage) -> str:
        return await self._send(message.chat_id, message.text, message.markup, message.thread_id, message.reply_to)

    async def send_choice(
        self, chat_id: str, text: str, buttons: Sequence[Button], thread_id: str | None, reply_to: str | None
    ) -> str:
        """Plain ``text`` with ``buttons`` in one row under it (an inline keyboard)."""
        return await self._send(chat_id, text, Markup.PLAIN, thread_id, reply_to, keyboard(buttons))

    async def _send(
        self, chat_id: str, text: str, markup: Markup, thread_id: str | None, reply_to: str | None,
        buttons: InlineKeyboardMarkup | None = None,
    ) -> str:  # fmt: skip
        method = SendMessage(
            chat_id=chat_ref(chat_id),
            text=text,
            parse_mode=_parse_mode(markup),
            message_thread_id=_thread(thread_id),
            reply_parameters=(
                ReplyParameters(message_id=int(reply_to), allow_sending_without_reply=True) if reply_to else None
            ),
            reply_markup=buttons,
        )  # fmt: skip
        sent = await self._call(method)
        return str(sent.message_id)

    async def edit(
        self, chat_id: str, message_id: str, text: str, markup: Markup, *, drop_buttons: bool = False
    ) -> None:
        """Replace a message's text; ``drop_buttons`` also takes its inline keyboard away."""
        method = EditMessageText(
            chat_id=chat_ref(chat_id), message_id=int(message_id), text=text, parse_mode=_parse_mode(markup),
            reply_markup=NO_KEYBOARD if drop_buttons else None,
        )  # fmt: skip
        try:
            await self._call(method)
        except DeliveryError as error:
            if "message is not modified" not in str(error):
                raise

    async def draft(self, chat_id: str, thread_id: str | None, draft_id: int, text: str, markup: Markup) -> None:
        chat = chat_ref(chat_id)
        if not isinstance(chat, int):
            raise StreamingUnsupported(f"Telegram drafts are for private chats, not {chat_id}")
        method = SendMessageDraft(chat_id=chat, draft_id=draft_id, text=text, parse_mode=_parse_mode(markup),
                                  message_thread_id=_thread(thread_id))  # fmt: skip
        try:
            await self._call(method)
        except DeliveryError as error:
            refusal = draft_refusal(error.__cause__)
            if refusal is None:
                raise
            raise refusal from error.__cause__

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        await self._call(
            SendChatAction(chat_id=chat_ref(chat_id), action=ChatAction.TYPING, message_thread_id=_thread(thread_id))
        )

    async def _call(self, method: TelegramMethod[T]) -> T:
        with translated(delivery_error, Attempt(method.__api_method__, str(getattr(method, "chat_id", "")))):
            return await self._bot(method, request_timeout=SEND_TIMEOUT)


def delivery_error(error: Exception, attempt: Attempt) -> DeliveryError | None:
    """The delivery error for one of aiogram's exceptions, keeping Telegram's own description; None for
    any other exception."""
    if not isinstance(error, TelegramAPIError | ClientDecodeError):
        return None
    if isinstance(error, ClientDecodeError):
        return TransientDeliveryError(f"Telegram answered something that is not the Bot API: {error}")
    if isinstance(error, TelegramRetryAfter):
        return RateLimited(float(error.retry_after), f"Telegram flood control: {error.message}")
    if isinstance(error, TelegramMigrateToChat):
        return RecipientUnavailable(
            f"the group became supergroup {error.migrate_to_chat_id}; messages to the old id are refused"
        )
    if isinstance(error, TelegramBadRequest):
        return _bad_request(error)
    if isinstance(error, TelegramForbiddenError):
        return RecipientUnavailable(f"Telegram refused: {error.message}")
    if isinstance(error, TelegramEntityTooLarge):
        return DeliveryError(f"Telegram refused the request as too large: {error.message}")
    if isinstance(error, TelegramNotFound | TelegramUnauthorizedError):
        return DeliveryError(f"Telegram refused the bot ({error.message}): check the token and api_base_url")
    if isinstance(error, TelegramNetworkError | TelegramServerError):
        # No connection made: the request never left. Anything later (a timeout, a cut connection, a 5xx
        # from a proxy) may follow a send Telegram carried out, and the Bot API has no idempotency key.
        never_left = isinstance(error.__cause__, aiohttp.ClientConnectorError)
        return TransientDeliveryError(f"Telegram unreachable or failing: {error.message}", unsent=never_left)
    return DeliveryError(f"Telegram refused the request: {error.message}")


def draft_refusal(error: BaseException | None) -> StreamingUnsupported | None:
    """:class:`StreamingUnsupported` when aiogram's ``error`` to a draft says drafts cannot work here at all;
    None for any other failure (which is then the usual delivery error)."""
    if isinstance(error, TelegramNotFound) and "method not found" in error.message.lower():
        return StreamingUnsupported(
            f"this Bot API server has no sendMessageDraft ({error.message}): an older or local server; "
            "replies are shown by editing a message instead"
        )
    if isinstance(error, TelegramBadRequest) and any(marker in error.message.lower() for marker in DRAFTS_REFUSED):
        return StreamingUnsupported(f"Telegram refused a draft in this chat ({error.message}); drafts work in "
                                    "private chats only, so replies there are shown by editing a message")  # fmt: skip
    return None


def _bad_request(error: TelegramBadRequest) -> DeliveryError:
    text = error.message.lower()
    if "can't parse entities" in text or "can't find end tag" in text or "unsupported start tag" in text:
        return MarkupRejected(f"Telegram could not parse the HTML: {error.message}")
    if any(marker in text for marker in GONE):
        return RecipientUnavailable(f"Telegram refused: {error.message}")
    return DeliveryError(f"Telegram refused the message: {error.message}")


def chat_ref(chat_id: str) -> int | str:
    """Numeric chat ids go as numbers; ``@channelname`` stays text."""
    return int(chat_id) if chat_id.lstrip("-").isdigit() else chat_id


def _thread(thread_id: str | None) -> int | None:
    return int(thread_id) if thread_id else None


def _parse_mode(markup: Markup) -> str | None:
    return ParseMode.HTML if markup is Markup.TELEGRAM_HTML else None


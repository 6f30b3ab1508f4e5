"""Inline keyboards in the fake Telegram: buttons under the bot's messages, and people pressing them.

``sendMessage`` and ``editMessageText`` take a ``reply_markup`` with an ``inline_keyboard`` (checked as
Telegram checks it: 1-64 bytes of ``callback_data``, a text on every button); an edit without one
removes the keyboard, as Telegram does. Test side:

* :meth:`KeyboardSide.press` - a person presses a button the message shows now: a ``callback_query``
  update is queued (long polling or webhook), unless the bot's ``allowed_updates`` (its last
  ``getUpdates`` or ``setWebhook``) leaves callback queries out, in which case Telegram never makes
  the update and neither does this emulator (it is kept in :attr:`KeyboardSide.unasked`).
* :meth:`KeyboardSide.inline_press` - a press under a message sent in inline mode (no chat).
* :attr:`KeyboardSide.callback_answers` - every ``answerCallbackQuery`` accepted, in order; an
  unknown query id is refused with Telegram's words.
"""

from __future__ import annotations

import itertools
from typing import Any, Protocol

from aiohttp import web

from .builders import Chat, User
from .users import UserSide
from .wire import as_json, error, ok

QUERY_INVALID = "Bad Request: query is too old and response timeout expired or query ID is invalid"
Keyboard = list[list[dict[str, Any]]]
"""Rows of inline buttons as the Bot API writes them (``text``, ``callback_data``)."""


class Keyed(Protocol):
    """A bot message as far as a press needs it (:class:`.server.BotMessage`)."""

    chat_id: int
    message_id: int
    visible: str
    thread_id: int | None
    keyboard: Keyboard | None


def read_keyboard(params: dict[str, Any]) -> tuple[Keyboard | None, web.Response | None]:
    """The inline keyboard a ``reply_markup`` parameter carries (None: none), or Telegram's refusal."""
    markup = as_json(params.get("reply_markup"))
    if markup is None:
        return None, None
    rows = markup.get("inline_keyboard") if isinstance(markup, dict) else None
    if not isinstance(rows, list) or not all(isinstance(row, list) for row in rows):
        return None, error(400, "Bad Request: can't parse reply keyboard markup JSON object")
    for button in (button for row in rows for button in row):
        if not isinstance(button, dict) or not str(button.get("text") or "").strip():
            return None, error(400, "Bad Request: text buttons are unallowed in the inline keyboard")
        data = button.get("callback_data")
        if data is not None and not 1 <= len(str(data).encode()) <= 64:
            return None, error(400, "Bad Request: BUTTON_DATA_INVALID")
    return (rows or None), None


class KeyboardSide(UserSide):
    def __init__(self) -> None:
        super().__init__()
        self.callback_answers: list[dict[str, Any]] = []
        """Every answerCallbackQuery accepted (``callback_query_id``, ``text``, ``show_alert``), in order."""
        self.allowed_updates: list[str] | None = None
        """The kinds of update the bot asked for last (None: Telegram's default, which has callback queries)."""
        self.unasked: list[dict[str, Any]] = []
        """Presses Telegram made no update of: the bot's ``allowed_updates`` leave callback queries out."""
        self._queries: dict[str, bool] = {}
        """Callback query id -> answered already."""
        self._query_ids = itertools.count(1)

    def note_allowed_updates(self, params: dict[str, Any]) -> None:
        """``getUpdates``/``setWebhook``: a given ``allowed_updates`` replaces the one before (an empty list: default)."""
        allowed = as_json(params.get("allowed_updates"))
        if isinstance(allowed, list):
            self.allowed_updates = [str(kind) for kind in allowed] or None

    async def press(self, user: User, message: Keyed, label: str) -> dict[str, Any]:
        """``user`` presses the button labelled ``label`` under the bot's ``message``; returns the callback_query
        update (queued, or in :attr:`unasked`). A button the message does not show now is a LookupError."""
        found = [b for row in message.keyboard or [] for b in row if b.get("text") == label]
        if not found or "callback_data" not in found[0]:
            shown = [b.get("text") for row in message.keyboard or [] for b in row]
            raise LookupError(f"message {message.message_id} shows no button {label!r} (it shows {shown})")
        chat = self.chats.get(message.chat_id) or Chat.private(user)
        shown_message: dict[str, Any] = {
            "message_id": message.message_id, "date": 0, "chat": chat.to_json(), "from": self.bot.to_json(),
            "text": message.visible, "reply_markup": {"inline_keyboard": message.keyboard},
        }  # fmt: skip
        if message.thread_id is not None:
            shown_message.update(message_thread_id=message.thread_id, is_topic_message=True)
        query_id = f"{next(self._query_ids)}{user.id}"
        query = {"id": query_id, "from": user.to_json(), "message": shown_message,
                 "chat_instance": f"ci{message.chat_id}", "data": found[0]["callback_data"]}  # fmt: skip
        if self.allowed_updates is not None and "callback_query" not in self.allowed_updates:
            self.unasked.append(query)
            return {"callback_query": query}
        self._queries[query_id] = False
        return await self.push_update(callback_query=query)

    async def inline_press(self, user: User, data: str) -> dict[str, Any]:
        """``user`` presses a button of a message sent in inline mode (no chat message: ``inline_message_id``)."""
        query_id = f"{next(self._query_ids)}{user.id}"
        self._queries[query_id] = False
        query = {"id": query_id, "from": user.to_json(), "chat_instance": "ci-inline", "inline_message_id": "im-1",
                 "data": data}  # fmt: skip
        return await self.push_update(callback_query=query)

    async def _api_answercallbackquery(self, params: dict[str, Any]) -> web.Response:
        query_id = str(params.get("callback_query_id") or "")
        if self._queries.get(query_id) is not False:
            return error(400, QUERY_INVALID)
        async with self.changed:
            self._queries[query_id] = True
            self.callback_answers.append({"callback_query_id": query_id, "text": params.get("text"),
                                          "show_alert": params.get("show_alert")})  # fmt: skip
            self.changed.notify_all()
        return ok(True)

"""The user side of the fake Telegram: people writing to the bot, in private chats, groups and topics.

Each ``say*`` call builds a real ``message`` update, queues it for the bot
(long polling or webhook) and returns the update. Update ids count up from
1; message ids count up per chat. The same operations are served over HTTP
under ``/_test/`` for a test that runs the emulator in another process.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from aiohttp import web

from .builders import Chat, User, message_json


class UserSide:
    def __init__(self) -> None:
        self.updates: list[dict[str, Any]] = []
        """Updates not yet confirmed by the bot, oldest first."""
        self.all_updates: list[dict[str, Any]] = []
        self.confirmed_below = 0
        self.chats: dict[int, Chat] = {}
        self.message_ids: set[tuple[int, int]] = set()
        self.changed = asyncio.Condition()
        self._update_ids = itertools.count(1)
        self._message_counters: dict[int, itertools.count[int]] = {}
        self.bot: User

    def next_message_id(self, chat_id: int) -> int:
        number = next(self._message_counters.setdefault(chat_id, itertools.count(1)))
        self.message_ids.add((chat_id, number))
        return number

    def acknowledge_below(self, offset: int) -> None:
        """``getUpdates(offset)``: every update below ``offset`` is confirmed and never served again."""
        self.confirmed_below = max(self.confirmed_below, offset)
        self.updates[:] = [update for update in self.updates if update["update_id"] >= offset]

    def add_chat(self, chat: Chat) -> Chat:
        self.chats[chat.id] = chat
        return chat

    async def say(self, user: User, text: str | None = None, **fields: Any) -> dict[str, Any]:
        """``user`` writes ``text`` (in a private chat unless ``chat`` is given); returns the update.
        ``fields``: those of :meth:`message`."""
        [update] = await self.queue(self.message(user, text, **fields))
        return update

    def message(
        self,
        user: User,
        text: str | None = None,
        *,
        chat: Chat | None = None,
        thread_id: int | None = None,
        reply_to_bot: int | None = None,
        **fields: Any,
    ) -> dict[str, Any]:
        """The message :meth:`say` sends, built but not queued (see :meth:`queue`).

        ``reply_to_bot`` is the id of a bot message this one replies to; ``fields`` go to
        :func:`.builders.message_json` (``caption``, ``entities``, ``extra`` for media).
        """
        chat = self.add_chat(chat or self.chats.get(user.id) or Chat.private(user))
        reply = None
        if reply_to_bot is not None:
            reply = {"message_id": reply_to_bot, "date": 0, "chat": chat.to_json(), "from": self.bot.to_json(), "text": "…"}
        return message_json(
            message_id=self.next_message_id(chat.id), chat=chat, sender=user, text=text, thread_id=thread_id,
            reply_to=reply, topic_creator=self.bot, **fields,
        )  # fmt: skip

    async def queue(self, *messages: dict[str, Any]) -> list[dict[str, Any]]:
        """Queue one ``message`` update per message, all at once (one getUpdates answer can bring them all)."""
        async with self.changed:
            updates = [{"update_id": next(self._update_ids), "message": message} for message in messages]
            self.updates.extend(updates)
            self.all_updates.extend(updates)
            self.changed.notify_all()
        return updates

    async def push_update(self, **fields: Any) -> dict[str, Any]:
        """Queue an update of any shape under the next update id: a kind of update this emulator does not
        build, or one whose fields Telegram might one day send differently. Returns the update."""
        async with self.changed:
            update = {"update_id": next(self._update_ids), **fields}
            self.updates.append(update)
            self.all_updates.append(update)
            self.changed.notify_all()
        return update

    async def edit_user_message(self, update: dict[str, Any], text: str) -> dict[str, Any]:
        """The user edits a message they sent: Telegram sends an ``edited_message`` update."""
        edited = {**update["message"], "text": text, "edit_date": update["message"]["date"] + 1}
        return await self.push_update(edited_message=edited)

    # --- the same over HTTP, for an emulator in another process ------------------------------
    def add_control_routes(self, app: web.Application) -> None:
        app.router.add_post("/_test/say", self._control_say)
        app.router.add_get("/_test/sent", self._control_sent)

    async def _control_say(self, request: web.Request) -> web.Response:
        body = await request.json()
        user = User(id=int(body["user_id"]), first_name=body.get("first_name", "User"), username=body.get("username"))
        return web.json_response(await self.say(user, body["text"]))

    async def _control_sent(self, request: web.Request) -> web.Response:
        sent = getattr(self, "sent", [])
        return web.json_response([
            {"chat_id": m.chat_id, "message_id": m.message_id, "text": m.text, "parse_mode": m.parse_mode,
             "thread_id": m.thread_id, "reply_to": m.reply_to}
            for m in sent
        ])  # fmt: skip

"""The JSON shapes of Telegram users, chats, messages and entities, as the Bot API sends them."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from typing import Any

from .html_check import utf16_length

MENTION = re.compile(r"(?<![\w@])@[A-Za-z][A-Za-z0-9_]{3,31}")
COMMAND = re.compile(r"(?<![\w/])/[A-Za-z0-9_]{1,32}(@[A-Za-z][A-Za-z0-9_]{3,31})?")


@dataclass(frozen=True, slots=True)
class User:
    id: int
    first_name: str
    username: str | None = None
    is_bot: bool = False

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "is_bot": self.is_bot, "first_name": self.first_name}
        if self.username:
            data["username"] = self.username
        return data


@dataclass(frozen=True, slots=True)
class Chat:
    id: int
    type: str
    """private, group, supergroup or channel."""
    title: str | None = None
    is_forum: bool = False
    topics: frozenset[int] = field(default_factory=frozenset)
    """Forum topic ids that exist (messages may be sent into them)."""

    @classmethod
    def private(cls, user: User) -> Chat:
        return cls(id=user.id, type="private")

    @classmethod
    def group(cls, chat_id: int, title: str = "Test group") -> Chat:
        return cls(id=chat_id, type="group", title=title)

    @classmethod
    def supergroup(cls, chat_id: int, title: str = "Test supergroup", topics: tuple[int, ...] = ()) -> Chat:
        return cls(id=chat_id, type="supergroup", title=title, is_forum=bool(topics), topics=frozenset(topics))

    def to_json(self, user: User | None = None) -> dict[str, Any]:
        data: dict[str, Any] = {"id": self.id, "type": self.type}
        if self.type == "private" and user is not None:
            data["first_name"] = user.first_name
            if user.username:
                data["username"] = user.username
        if self.title:
            data["title"] = self.title
        if self.is_forum:
            data["is_forum"] = True
        return data


def auto_entities(text: str) -> list[dict[str, Any]]:
    """The entities Telegram's servers find in plain text by themselves: @mentions and /commands."""
    found = [(m.start(), m.end(), "mention") for m in MENTION.finditer(text)]
    found += [(m.start(), m.end(), "bot_command") for m in COMMAND.finditer(text) if m.start() == 0 or text[m.start() - 1].isspace()]
    return [
        {"type": kind, "offset": utf16_length(text[:start]), "length": utf16_length(text[start:end])}
        for start, end, kind in sorted(found)
    ]


def text_mention(text: str, word: str, user: User) -> dict[str, Any]:
    """A mention of a user without a username (the client links the name to the user)."""
    start = text.index(word)
    return {
        "type": "text_mention", "offset": utf16_length(text[:start]), "length": utf16_length(word),
        "user": user.to_json(),
    }  # fmt: skip


def message_json(
    *,
    message_id: int,
    chat: Chat,
    sender: User,
    text: str | None = None,
    caption: str | None = None,
    entities: list[dict[str, Any]] | None = None,
    thread_id: int | None = None,
    reply_to: dict[str, Any] | None = None,
    topic_creator: User | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One message; ``extra`` adds media fields (``photo``, ``document``, ``voice`` ...).

    In a forum topic, a message that replies to nothing carries the topic's creation message as
    ``reply_to_message``, as Telegram does (``topic_creator`` made the topic).
    """
    data: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": chat.to_json(sender if not sender.is_bot else None),
        "from": sender.to_json(),
    }
    if text is not None:
        data["text"] = text
        data["entities"] = entities if entities is not None else auto_entities(text)
        if not data["entities"]:
            del data["entities"]
    if caption is not None:
        data["caption"] = caption
        data["caption_entities"] = entities if entities is not None else auto_entities(caption)
        if not data["caption_entities"]:
            del data["caption_entities"]
    if thread_id is not None:
        data["message_thread_id"] = thread_id
        if chat.is_forum:
            data["is_topic_message"] = True
    if reply_to is None and chat.is_forum and thread_id is not None and topic_creator is not None:
        reply_to = {
            "message_id": thread_id, "date": int(time.time()), "chat": chat.to_json(), "from": topic_creator.to_json(),
            "message_thread_id": thread_id, "is_topic_message": True,
            "forum_topic_created": {"name": f"Topic {thread_id}", "icon_color": 7322096},
        }  # fmt: skip
    if reply_to is not None:
        data["reply_to_message"] = reply_to
    data.update(extra or {})
    return data

"""The load the cluster tests and ``bench.cluster`` put on the gateways, and the count of what came back.

``chats`` people write ``per_chat`` messages each to the bot in private Telegram chats, each chat's
messages numbered in the order sent (``c07-m03``: chat 7's fourth message). They arrive round robin (one
message of every chat, then a short pause, as people write over time), so at any moment most chats have
a message waiting behind a running turn. The fake model answers ``"re: " + the turn's user text``, and
messages that arrived during a turn are answered together by the next one, so a reply names one or more
messages: every message must be named by exactly one reply, each chat's in the order sent, and each
reply must answer (``reply_to``) the last message it names.
"""

from __future__ import annotations

import asyncio
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import TelegramAPI, User

TAG = re.compile(r"c(\d\d)-m(\d\d)")
FIRST_USER = 5001
PAUSE = 0.1
"""Seconds between two rounds of messages: people write over time, not all at once."""


def echo(server: ModelServer) -> None:
    """Make the fake model answer each turn with its user text, so a reply names the messages it answers."""
    server.responder = lambda record: Text("re: " + record.last_user_text)


@dataclass
class Load:
    chats: int
    per_chat: int
    sent: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Each message's update as the emulator queued it, by its tag."""

    def user(self, chat: int) -> User:
        return User(FIRST_USER + chat, f"User {chat:02d}")

    def messages(self) -> list[tuple[int, str]]:
        """``(chat, tag)`` in the order they are sent: round robin over the chats."""
        return [(c, f"c{c:02d}-m{m:02d}") for m in range(self.per_chat) for c in range(self.chats)]

    @property
    def total(self) -> int:
        return self.chats * self.per_chat

    async def feed(self, telegram: TelegramAPI, *, pause: float = PAUSE) -> None:
        """Send every message, a round at a time."""
        for index, (chat, tag) in enumerate(self.messages(), 1):
            self.sent[tag] = await telegram.say(self.user(chat), tag)
            if index % self.chats == 0 and pause:
                await asyncio.sleep(pause)  # pacing, part of the scenario (see the module docstring)

    def answered(self, telegram: TelegramAPI) -> int:
        """How many distinct messages the bot's replies name so far."""
        return len(named(telegram))

    def all_answered(self, telegram: TelegramAPI) -> bool:
        return self.answered(telegram) >= self.total


def named(telegram: TelegramAPI, leave_out: frozenset[tuple[int, int]] = frozenset()) -> Counter[str]:
    """How many of the bot's messages (but those left out) name each user message."""
    return Counter(match.group(0) for message in telegram.sent for match in TAG.finditer(message.text)
                   if (message.chat_id, message.message_id) not in leave_out)  # fmt: skip


@dataclass(frozen=True)
class Tally:
    """What the replies say about the messages (the figures ``bench.cluster`` reports)."""

    lost: list[str]
    """Messages no reply names."""
    duplicated: list[str]
    """Messages two or more replies name (answered twice, or one reply delivered twice)."""
    out_of_order: dict[int, list[int]]
    """Chats whose replies name their messages in another order than sent: chat -> the numbers as named."""
    misdirected: list[str]
    """Replies that do not answer (``reply_to``) the last message they name, or went to another chat."""


def tally(load: Load, telegram: TelegramAPI, *, leave_out: frozenset[tuple[int, int]] = frozenset()) -> Tally:
    """``leave_out``: bot messages (chat id, message id) not counted (see ``settled.sent_again_after_the_kill``)."""
    counts = named(telegram, leave_out)
    tags = {tag for _, tag in load.messages()}
    out_of_order: dict[int, list[int]] = {}
    misdirected: list[str] = []
    for chat in range(load.chats):
        user = load.user(chat).id
        replies = [reply for reply in telegram.sent_to(user) if (reply.chat_id, reply.message_id) not in leave_out]
        numbers = [int(m.group(2)) for reply in replies for m in TAG.finditer(reply.text)]
        if numbers != sorted(numbers):
            out_of_order[chat] = numbers
        for reply in replies:
            tags_named = [m.group(0) for m in TAG.finditer(reply.text)]
            if not tags_named:
                continue
            update = load.sent.get(tags_named[-1])
            if (update is None or update["message"]["chat"]["id"] != user
                    or reply.reply_to != update["message"]["message_id"]):  # fmt: skip
                misdirected.append(f"chat {chat}: {reply.text!r} replying to {reply.reply_to}")
    return Tally(
        lost=sorted(tags - set(counts)),
        duplicated=sorted(tag for tag, n in counts.items() if n > 1),
        out_of_order=out_of_order,
        misdirected=misdirected,
    )

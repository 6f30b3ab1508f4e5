"""The normalized messages that cross the adapter boundary.

Adapters turn platform updates into :class:`InboundMessage` and send
:class:`OutboundMessage`; nothing above the adapters sees a platform
library's types. These are plain values: frozen, comparable, and convertible
to and from JSON (the gateway's durable inbox stores them).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any


class ChatType(StrEnum):
    DM = "dm"
    GROUP = "group"
    CHANNEL = "channel"


class Markup(StrEnum):
    """The text dialect of an outbound message."""

    PLAIN = "plain"
    TELEGRAM_HTML = "telegram_html"
    DISCORD_MARKDOWN = "discord_markdown"
    SLACK_MRKDWN = "slack_mrkdwn"


@dataclass(frozen=True, slots=True, kw_only=True)
class Attachment:
    """A file that came with a message, described, not downloaded."""

    kind: str
    """photo, document, voice, audio, video, sticker or file."""
    name: str | None = None
    mime_type: str | None = None
    size: int | None = None
    ref: str | None = None
    """Where the platform keeps it (a file id or URL)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class InboundMessage:
    """One message a user sent to the bot, as every platform looks to the gateway."""

    platform: str
    event_id: str
    """Unique per platform for one user message, the same on every redelivery of it (Telegram
    update_id, Slack ``<channel>:<ts>``, Discord message id): the inbox drops a repeat."""
    chat_id: str
    chat_type: ChatType
    user_id: str
    text: str = ""
    message_id: str | None = None
    """The message's id in its chat, for replies and references."""
    thread_id: str | None = None
    """Forum topic, Discord thread or Slack thread; None outside threads."""
    server_id: str | None = None
    """The Discord server (guild) or Slack team the chat belongs to; None where there is none."""
    user_name: str = ""
    attachments: tuple[Attachment, ...] = ()
    mentioned: bool = False
    """The bot was @mentioned or the message replies to the bot."""
    from_bot: bool = False
    timestamp: float = field(default_factory=time.time)

    def to_dict(self) -> dict[str, Any]:
        # Field by field: dataclasses.asdict deep-copies every value, and this runs per message.
        data = {name: getattr(self, name) for name in _INBOUND_FIELDS}
        data["chat_type"] = self.chat_type.value
        data["attachments"] = [asdict(item) for item in self.attachments]
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> InboundMessage:
        values = dict(data)
        values["chat_type"] = ChatType(values["chat_type"])
        values["attachments"] = tuple(Attachment(**item) for item in values.get("attachments") or ())
        return cls(**values)


_INBOUND_FIELDS = tuple(f.name for f in fields(InboundMessage))


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboundMessage:
    """One message the bot sends: a single chunk that already fits the platform's limit."""

    chat_id: str
    text: str
    thread_id: str | None = None
    reply_to: str | None = None
    """The message id this one answers, where the platform shows replies."""
    markup: Markup = Markup.PLAIN
    nonce: str | None = None
    """Stable for one outbox chunk, also when it is sent again after a restart. An adapter passes it
    to a platform that accepts an idempotency key (Discord's ``nonce``), so a chunk the platform
    accepted just before a crash is not shown twice when the outbox sends it again."""
    maybe_sent: bool = False
    """True when an earlier attempt at this chunk may have reached the platform without its answer
    reaching us: a retry after a network error or server failure, or a send by ``Delivery.resume``
    after a restart (the outbox does not record that an attempt started, so a resumed chunk may have
    been accepted just before the crash). A platform without idempotency keys (Slack) can first look
    for the chunk by its ``nonce``; adapters that ignore this field still work, at the risk of a
    duplicate."""

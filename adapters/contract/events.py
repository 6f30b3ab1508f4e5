"""The normalized messages that cross the adapter boundary (part of :mod:`adapters.contract`).

Adapters turn platform updates into :class:`InboundMessage` and send
:class:`OutboundMessage`; nothing above the adapters sees a platform
library's types. These are plain values: frozen, comparable, and convertible
to and from JSON (the gateway's durable inbox stores them).

An inbound message is storable by construction: every text field of it and of
its attachments goes through :func:`storable_text` (half of a UTF-16 pair
becomes U+FFFD), and a field of the wrong type is refused with a ``TypeError``
naming it. So no adapter can hand the inbox a message that fails to encode,
whichever field of a platform's event the bad text came from.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import asdict, dataclass, field, fields
from enum import StrEnum
from typing import Any, Final

import structlog

log = structlog.get_logger(__name__)

_LONE_SURROGATE: Final = re.compile("[\ud800-\udfff]")


def storable_text(value: object, name: str) -> str:
    """``value`` as text every store can encode: a ``str`` with any half of a UTF-16 pair replaced by U+FFFD.

    Such a half cannot be written as UTF-8, so SQLite (and any JSON written with
    ``ensure_ascii=False``) refuses the whole record. Platforms send valid UTF-8,
    but a JSON ``\\ud83d`` escape (a bridge, a client cutting an emoji in two) decodes
    to one. Anything that is not text raises ``TypeError`` naming the field ``name``.
    """
    if not isinstance(value, str):
        raise TypeError(f"{name} must be text, not {type(value).__name__}")
    return value if value.isascii() else _LONE_SURROGATE.sub("\ufffd", value)


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
    """Where the platform keeps it: the id the adapter downloads it by (Telegram file id, Discord
    attachment id, Slack file id)."""
    url: str | None = None
    """Where it is downloaded from, when the platform gives a URL (Discord CDN, Slack
    ``url_private_download``); None where the adapter asks for one (Telegram ``getFile``)."""
    width: int | None = None
    height: int | None = None
    duration: float | None = None
    """Seconds of audio or video, as the platform claims it (checked again from the bytes)."""
    smaller: tuple[Attachment, ...] = ()
    """Smaller renditions of the same picture, largest first (Telegram sends a photo in several
    sizes): the gateway takes the largest one within its limit."""

    def __post_init__(self) -> None:
        _make_storable(self, "Attachment", _ATTACHMENT_TEXT)
        _check_type(self, "Attachment", "size", int, optional=True)
        _check_type(self, "Attachment", "width", int, optional=True)
        _check_type(self, "Attachment", "height", int, optional=True)
        if self.duration is not None and (isinstance(self.duration, bool) or not isinstance(self.duration, int | float)):
            raise TypeError(f"Attachment.duration must be a number of seconds, not {type(self.duration).__name__}")
        if self.smaller.__class__ is not tuple or not all(isinstance(item, Attachment) for item in self.smaller):
            raise TypeError("Attachment.smaller must be a tuple of Attachment values")

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Attachment:
        values = dict(data)
        values["smaller"] = tuple(cls.from_dict(item) for item in values.get("smaller") or ())
        return cls(**values)


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
    group_id: str | None = None
    """Messages sent together as one album (Telegram ``media_group_id``) share this id: the gateway
    waits briefly for the rest of the album so that it becomes one turn."""
    mentioned: bool = False
    """The bot was @mentioned or the message replies to the bot."""
    from_bot: bool = False
    timestamp: float = field(default_factory=time.time)

    def __post_init__(self) -> None:
        _make_storable(self, "InboundMessage", _INBOUND_TEXT)
        _check_type(self, "InboundMessage", "chat_type", ChatType)
        _check_type(self, "InboundMessage", "mentioned", bool)
        _check_type(self, "InboundMessage", "from_bot", bool)
        if self.attachments.__class__ is not tuple:
            raise TypeError(f"InboundMessage.attachments must be a tuple, not {type(self.attachments).__name__}")
        for item in self.attachments:
            if not isinstance(item, Attachment):
                raise TypeError(f"InboundMessage.attachments must hold Attachment values, not {type(item).__name__}")
        stamp = self.timestamp
        if isinstance(stamp, bool) or not isinstance(stamp, int | float):
            raise TypeError(f"InboundMessage.timestamp must be a number of seconds, not {type(stamp).__name__}")
        if not math.isfinite(stamp):
            raise ValueError(f"InboundMessage.timestamp must be a finite number of seconds, not {stamp}")

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
        values["attachments"] = tuple(Attachment.from_dict(item) for item in values.get("attachments") or ())
        return cls(**values)


_INBOUND_FIELDS = tuple(f.name for f in fields(InboundMessage))
_INBOUND_TEXT: Final = (
    ("platform", False), ("event_id", False), ("chat_id", False), ("user_id", False), ("text", False),
    ("user_name", False), ("message_id", True), ("thread_id", True), ("server_id", True), ("group_id", True),
)  # fmt: skip
"""Every text field of an inbound message, and whether it may be None."""
_ATTACHMENT_TEXT: Final = (("kind", False), ("name", True), ("mime_type", True), ("ref", True), ("url", True))


def _make_storable(value: object, kind: str, text_fields: tuple[tuple[str, bool], ...]) -> None:
    """Pass every text field of a frozen ``value`` through :func:`storable_text`; log the fields it repaired."""
    repaired: list[str] = []
    for name, optional in text_fields:
        text = getattr(value, name)
        if text.__class__ is str and text.isascii():
            continue  # the common case (ids, most names and texts): one check, nothing allocated
        if text is None and optional:
            continue
        fixed = storable_text(text, f"{kind}.{name}")
        if fixed != text:
            repaired.append(name)
        object.__setattr__(value, name, fixed)
    if repaired:
        log.warning("inbound.repaired_text", kind=kind, fields=",".join(repaired),
                    event_id=getattr(value, "event_id", None), reason="lone UTF-16 surrogate replaced with U+FFFD")  # fmt: skip


def _check_type(value: object, kind: str, name: str, expected: type, *, optional: bool = False) -> None:
    found = getattr(value, name)
    if optional and found is None:
        return
    # bool is an int subclass; a flag is no size and a size no flag.
    if not isinstance(found, expected) or (expected is int and isinstance(found, bool)):
        raise TypeError(f"{kind}.{name} must be {expected.__name__}, not {type(found).__name__}")


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


@dataclass(frozen=True, slots=True)
class MenuCommand:
    """A chat command as a platform's command menu lists it (Telegram's list behind "/")."""

    name: str
    """Without the slash, lower-case."""
    description: str


@dataclass(frozen=True, slots=True)
class CommandMenu:
    """The chat commands the gateway answers, per kind of chat, for platforms that show a menu of them.

    Built from the gateway's command table (``gateway.commands.parsing``) and handed to each adapter
    before it starts; an adapter whose platform has no such menu ignores it.
    """

    private: tuple[MenuCommand, ...] = ()
    """Offered in direct messages."""
    groups: tuple[MenuCommand, ...] = ()
    """Offered in group chats."""

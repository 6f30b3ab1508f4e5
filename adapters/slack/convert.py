"""Slack Events API payloads -> :class:`InboundMessage`, or a reason to skip them.

Which events start a turn:

* ``app_mention`` in a channel (public, private or group DM). A channel message
  that mentions the bot also arrives as a ``message`` event when the app
  subscribes to ``message.channels``; those channel ``message`` events are
  skipped, so one mention gives exactly one turn.
* ``message`` in a direct message (``channel_type: im``), threaded or not.

A channel conversation lives in a thread: a mention inside a thread belongs to
that thread (``thread_ts``), and a top-level mention becomes the root of a new
thread (its own ``ts``), so the reply opens the thread under it and later
mentions in that thread continue the same session. In a DM, top-level messages
share the DM's session and a DM thread is a session of its own.

Edits, deletions, joins and other message subtypes are skipped; the bot's own
messages are skipped; other bots' messages are passed on with ``from_bot`` so
the gateway's access rules log and count them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from adapters.slack.identity import BotIdentity
from gateway.events import Attachment, ChatType, InboundMessage

PLATFORM: Final = "slack"

_TURN_SUBTYPES: Final = frozenset({None, "file_share", "thread_broadcast", "bot_message"})
"""Message subtypes that carry something a person (or bot) said; every other subtype is skipped."""

_ENTITIES: Final = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))


@dataclass(frozen=True, slots=True)
class Skip:
    """An event that starts no turn, and why (for the log)."""

    reason: str


def to_inbound(body: Mapping[str, Any], bot: BotIdentity) -> InboundMessage | Skip:
    """Convert one ``event_callback`` body (HTTP or Socket Mode) for the gateway."""
    event = body.get("event")
    if not isinstance(event, Mapping):
        return Skip("no event in the payload")
    kind = event.get("type")
    if kind == "app_mention":
        return _mention(body, event, bot)
    if kind == "message":
        return _direct_message(body, event, bot)
    return Skip(f"event type {kind} does not start a turn")


def _mention(body: Mapping[str, Any], event: Mapping[str, Any], bot: BotIdentity) -> InboundMessage | Skip:
    channel = str(event.get("channel") or "")
    if channel.startswith("D"):
        return Skip("mention in a direct message: the message.im event carries it")
    return _message(body, event, bot, chat_type=ChatType.GROUP, thread_id=event.get("thread_ts") or event.get("ts"))


def _direct_message(body: Mapping[str, Any], event: Mapping[str, Any], bot: BotIdentity) -> InboundMessage | Skip:
    channel_type = event.get("channel_type")
    if channel_type != "im":
        return Skip(f"{channel_type} message: in channels only app_mention events start turns")
    subtype = event.get("subtype")
    if subtype not in _TURN_SUBTYPES:
        return Skip(f"message subtype {subtype}")
    return _message(body, event, bot, chat_type=ChatType.DM, thread_id=event.get("thread_ts"))


def _message(
    body: Mapping[str, Any],
    event: Mapping[str, Any],
    bot: BotIdentity,
    *,
    chat_type: ChatType,
    thread_id: str | None,
) -> InboundMessage | Skip:
    if _is_own(event, bot):
        return Skip("the bot's own message")
    ts = str(event.get("ts") or "")
    channel = str(event.get("channel") or "")
    if not ts or not channel:
        return Skip("event without channel or ts")
    raw_text = str(event.get("text") or "")
    mention = _mention_pattern(bot.user_id)
    return InboundMessage(
        platform=PLATFORM,
        event_id=str(body.get("event_id") or f"{channel}:{ts}"),
        chat_id=channel,
        chat_type=chat_type,
        user_id=str(event.get("user") or event.get("bot_id") or ""),
        text=clean_text(raw_text, mention),
        message_id=ts,
        thread_id=str(thread_id) if thread_id else None,
        server_id=body.get("team_id") or event.get("team"),
        attachments=tuple(_attachment(item) for item in event.get("files") or () if isinstance(item, Mapping)),
        mentioned=event.get("type") == "app_mention" or bool(mention.search(raw_text)),
        from_bot=bool(event.get("bot_id")) or event.get("subtype") == "bot_message",
        timestamp=float(ts),
    )


def _is_own(event: Mapping[str, Any], bot: BotIdentity) -> bool:
    if event.get("user") == bot.user_id:
        return True
    return bot.bot_id is not None and event.get("bot_id") == bot.bot_id


def _mention_pattern(user_id: str) -> re.Pattern[str]:
    return re.compile(rf"<@{re.escape(user_id)}(?:\|[^>]*)?>")


def clean_text(text: str, mention: re.Pattern[str]) -> str:
    """Drop the bot's own mention, tidy the spaces it leaves, and undo Slack's three escapes."""
    text = mention.sub("", text)
    text = re.sub(r"[ \t]{2,}", " ", text).strip()
    for escaped, plain in _ENTITIES:
        text = text.replace(escaped, plain)
    return text


def _attachment(item: Mapping[str, Any]) -> Attachment:
    mime = item.get("mimetype")
    size = item.get("size")
    return Attachment(
        kind=_kind(mime),
        name=item.get("name") or item.get("title"),
        mime_type=mime,
        size=int(size) if isinstance(size, int | float) else None,
        ref=item.get("id"),
    )


def _kind(mime: str | None) -> str:
    major = (mime or "").partition("/")[0]
    return {"image": "photo", "audio": "audio", "video": "video"}.get(major, "document")

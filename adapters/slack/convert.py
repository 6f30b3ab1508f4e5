"""Slack Events API payloads -> :class:`InboundMessage`, or a reason to skip them.

Which events start a turn:

* ``app_mention`` in a channel (public, private or group DM).
* ``message`` in a direct message (``channel_type: im``), threaded or not.
* ``message`` in a channel thread (``message.channels`` / ``message.groups``)
  the bot takes part in, without a mention: :func:`to_inbound` returns it as
  a :class:`ThreadReply` and the event sink asks the adapter's thread memory
  (:mod:`adapters.slack.threads`) whether the bot is in that thread. Top-level
  channel messages without ``app_mention`` start nothing.
* With ``every_message`` (``platforms.slack.require_mention: false``): every
  channel message a person sends, top-level (its reply opens a thread under
  it, as for a mention) or in any thread.

A channel conversation lives in a thread: a mention inside a thread belongs to
that thread (``thread_ts``), and a top-level mention becomes the root of a new
thread (its own ``ts``), so the reply opens the thread under it and later
messages in that thread continue the same session. In a DM, top-level
messages share the DM's session and a DM thread is a session of its own.

One message, one event id: a mention in a thread arrives twice (as
``message`` and as ``app_mention``, with different envelope ``event_id`` s),
so every inbound message is identified by ``{channel}:{ts}`` and the gateway
inbox keeps the first copy and recognises the other, and any redelivery, as
a duplicate.

Edits, deletions, joins and other message subtypes are skipped (a thread
reply also sent to the channel, ``thread_broadcast``, is a thread reply); the
bot's own messages are skipped; other bots' DMs and mentions are passed on
with ``from_bot`` so the gateway's access rules log and count them, while
other bots' chatter in channel threads is skipped here.

Files (``files`` of a ``file_share`` message or of an ``app_mention``) become
:class:`Attachment` s with what Slack says of them: the file id (``ref``), ``url_private_download``
(``url``, downloaded by :mod:`.files` with the bot token), name, MIME type and size as claimed, an
image's ``original_w`` / ``original_h`` and a clip's ``duration_ms``; a voice clip recorded in
Slack (``subtype: slack_audio``) is ``kind="voice"``. A file with no MIME type (a Slack Connect
file named by id alone) is ``kind="file"``.

An event Slack would not send this way (no ``channel`` or ``ts``, a ``ts`` that
is not a Slack timestamp, no ``user`` or ``bot_id``, a field that should be text
and is not, ``files`` that is not a list) raises :class:`Malformed`; the event
sink logs it and acknowledges it, since Slack sending it again would not help.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final

from adapters.contract import Attachment, ChatType, InboundMessage
from adapters.slack.identity import BotIdentity

PLATFORM: Final = "slack"

_TURN_SUBTYPES: Final = frozenset({None, "file_share", "thread_broadcast", "bot_message"})
"""Message subtypes that carry something a person (or bot) said; every other subtype is skipped."""

_THREAD_SUBTYPES: Final = frozenset({None, "file_share", "thread_broadcast"})
"""Channel message subtypes that can continue a thread conversation."""

_ENTITIES: Final = (("&lt;", "<"), ("&gt;", ">"), ("&amp;", "&"))

_TS: Final = re.compile(r"[0-9]{1,12}(?:\.[0-9]{1,9})?")
"""A message ts: Unix seconds, a dot, a sequence number (``1700000000.000100``)."""


class Malformed(ValueError):
    """An event with a field missing or of the wrong type; the message says which (never its content)."""


@dataclass(frozen=True, slots=True)
class Skip:
    """An event that starts no turn, and why (for the log)."""

    reason: str


@dataclass(frozen=True, slots=True)
class ThreadReply:
    """A channel thread message without a new mention: a turn only if the bot takes part in the thread."""

    message: InboundMessage
    """Already marked ``mentioned``, for the case that it is accepted."""
    mentions_bot: bool
    """The text mentions the bot, so an ``app_mention`` copy of it arrives too."""

    @property
    def thread(self) -> tuple[str, str]:
        return self.message.chat_id, self.message.thread_id or ""


def to_inbound(
    body: Mapping[str, Any], bot: BotIdentity, *, every_message: bool = False
) -> InboundMessage | ThreadReply | Skip:
    """Convert one ``event_callback`` body (HTTP or Socket Mode) for the gateway."""
    event = body.get("event")
    if not isinstance(event, Mapping):
        return Skip("no event in the payload")
    kind = event.get("type")
    if kind == "app_mention":
        return _mention(body, event, bot)
    if kind == "message":
        if event.get("channel_type") == "im":
            return _direct_message(body, event, bot)
        return _channel_message(body, event, bot, every_message=every_message)
    return Skip(f"event type {kind} does not start a turn")


def _mention(body: Mapping[str, Any], event: Mapping[str, Any], bot: BotIdentity) -> InboundMessage | Skip:
    channel = str(event.get("channel") or "")
    if channel.startswith("D"):
        return Skip("mention in a direct message: the message.im event carries it")
    return _message(body, event, bot, chat_type=ChatType.GROUP, thread_id=event.get("thread_ts") or event.get("ts"))


def _direct_message(body: Mapping[str, Any], event: Mapping[str, Any], bot: BotIdentity) -> InboundMessage | Skip:
    subtype = event.get("subtype")
    if subtype not in _TURN_SUBTYPES:
        return Skip(f"message subtype {subtype}")
    return _message(body, event, bot, chat_type=ChatType.DM, thread_id=event.get("thread_ts"))


def _channel_message(
    body: Mapping[str, Any], event: Mapping[str, Any], bot: BotIdentity, *, every_message: bool
) -> InboundMessage | ThreadReply | Skip:
    subtype = event.get("subtype")
    if subtype not in _THREAD_SUBTYPES:
        return Skip(f"channel message subtype {subtype}")
    thread_ts = event.get("thread_ts")
    top_level = not thread_ts or thread_ts == event.get("ts")
    if top_level and not every_message:
        return Skip("top-level channel message: only an app_mention starts a turn there")
    if event.get("bot_id"):
        return Skip("a bot's message in a channel" + ("" if top_level else " thread"))
    result = _message(body, event, bot, chat_type=ChatType.GROUP, thread_id=str(thread_ts or event.get("ts")))
    if isinstance(result, Skip) or every_message:
        return result  # a mention among them also arrives as app_mention: same id, so the inbox keeps one
    mentions_bot = result.mentioned
    return ThreadReply(replace(result, mentioned=True), mentions_bot=mentions_bot)


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
    ts, channel = _text(event, "ts"), _text(event, "channel")
    _text(event, "thread_ts")  # the thread's id when there is one: text too
    if not ts or not channel:
        raise Malformed("the event has no channel or no ts")
    if not _TS.fullmatch(ts):
        raise Malformed("ts is not a Slack timestamp")
    user_id = _text(event, "user") or _text(event, "bot_id")
    if not user_id:
        raise Malformed("the event has no user and no bot_id")
    files = event.get("files") or ()
    if not isinstance(files, list | tuple):
        raise Malformed(f"files is {type(files).__name__}, not a list")
    raw_text = _text(event, "text") or ""
    mention = _mention_pattern(bot.user_id)
    return InboundMessage(
        platform=PLATFORM,
        event_id=f"{channel}:{ts}",
        chat_id=channel,
        chat_type=chat_type,
        user_id=user_id,
        text=clean_text(raw_text, mention),
        message_id=ts,
        thread_id=str(thread_id) if thread_id else None,
        server_id=body.get("team_id") or event.get("team"),
        attachments=tuple(_attachment(item) for item in files if isinstance(item, Mapping)),
        mentioned=event.get("type") == "app_mention" or bool(mention.search(raw_text)),
        from_bot=bool(event.get("bot_id")) or event.get("subtype") == "bot_message",
        timestamp=float(ts),
    )


def _text(event: Mapping[str, Any], key: str) -> str | None:
    """A field that is text when present; anything else there makes the event :class:`Malformed`."""
    value = event.get(key)
    if value is None or isinstance(value, str):
        return value
    raise Malformed(f"{key} is {type(value).__name__}, not text")


def _is_own(event: Mapping[str, Any], bot: BotIdentity) -> bool:
    if event.get("user") == bot.user_id:
        return True
    return bot.bot_id is not None and event.get("bot_id") == bot.bot_id


def mentions_bot(event: Mapping[str, Any], bot: BotIdentity) -> bool:
    """Whether the text of an event (or a message from the history) mentions the bot."""
    text = event.get("text")
    return isinstance(text, str) and bool(_mention_pattern(bot.user_id).search(text))


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
    duration_ms = _whole(item, "duration_ms")
    return Attachment(
        kind=_kind(mime, item.get("subtype")),
        name=item.get("name") or item.get("title"),
        mime_type=mime,
        size=int(size) if isinstance(size, int | float) and not isinstance(size, bool) else None,
        ref=item.get("id"),
        url=item.get("url_private_download"),
        width=_whole(item, "original_w"),
        height=_whole(item, "original_h"),
        duration=None if duration_ms is None else duration_ms / 1000,
    )


def _whole(item: Mapping[str, Any], key: str) -> int | None:
    """A number Slack gives about a file (pixels, milliseconds), or None where it gives none or no number."""
    value = item.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0 else None


def _kind(mime: str | None, subtype: object) -> str:
    if subtype == "slack_audio":
        return "voice"
    if not mime:
        return "file"
    major = mime.partition("/")[0] if isinstance(mime, str) else ""  # not text: Attachment refuses it
    return {"image": "photo", "audio": "audio", "video": "video"}.get(major, "document")

"""Turning a discord.py ``Message`` into the gateway's :class:`InboundMessage`.

Where a message lands:

* a DM: ``chat_type=DM``, ``chat_id`` = the DM channel;
* a server channel: ``chat_type=GROUP``, ``chat_id`` = the channel, ``server_id`` = the guild;
* a thread: ``chat_id`` = the thread's parent channel and ``thread_id`` = the thread, so the
  channel allowlist covers its threads while every thread is its own session
  (``discord:group:<channel>:thread:<thread>``). Replies are sent to the thread id.

The bot's own messages are never converted; other bots' messages are marked
``from_bot`` (the gateway ignores them) unless ``allow_bots`` is on.

Each attachment becomes an :class:`Attachment` with what Discord says of it: its id (``ref``),
its CDN ``url`` (downloaded by :mod:`.media`), file name, content type and size as claimed,
an image's or video's width and height, and for the recording of a voice message (the message
flag, or the attachment's waveform and ``duration_secs``) ``kind="voice"`` and its duration.
"""

from __future__ import annotations

import re

import discord

from adapters.contract import Attachment, ChatType, InboundMessage

CONVERSATION_TYPES = frozenset({discord.MessageType.default, discord.MessageType.reply})
"""Joins, pins, thread-created notices and other system messages are not conversation."""


def to_inbound(message: discord.Message, me: discord.abc.User, *, allow_bots: bool) -> InboundMessage | None:
    """The gateway's view of ``message``, or None when the bot must not see it at all.

    Raises ``ValueError`` or ``TypeError`` for a message that cannot be turned into one (no
    author, a field of the wrong type); the adapter logs and skips it.
    """
    if getattr(message, "author", None) is None:  # discord.py leaves it unset when the event had none
        raise ValueError("the message has no author")
    if message.author.id == me.id or message.type not in CONVERSATION_TYPES:
        return None
    guild_id = message.guild.id if message.guild is not None else getattr(message.channel, "guild_id", None)
    chat_id, thread_id = _place(message.channel)
    return InboundMessage(
        platform="discord",
        event_id=str(message.id),
        chat_id=chat_id,
        chat_type=ChatType.DM if guild_id is None else ChatType.GROUP,
        user_id=str(message.author.id),
        user_name=message.author.display_name,
        text=strip_mention(message.content, me.id),
        message_id=str(message.id),
        thread_id=thread_id,
        server_id=None if guild_id is None else str(guild_id),
        attachments=tuple(_attachment(item, voice_message=message.flags.voice) for item in message.attachments),
        mentioned=addresses(message, me),
        from_bot=message.author.bot and not allow_bots,
        timestamp=message.created_at.timestamp(),
    )


def addresses(message: discord.Message, me: discord.abc.User) -> bool:
    """Whether the message is meant for the bot: an @mention of it or its role, or a reply to its message."""
    if any(user.id == me.id for user in message.mentions):
        return True
    if any(role.tags is not None and role.tags.bot_id == me.id for role in message.role_mentions):
        return True
    replied = message.reference.resolved if message.reference is not None else None
    return isinstance(replied, discord.Message) and replied.author.id == me.id


def strip_mention(text: str, bot_id: int) -> str:
    """The text without ``<@bot>`` / ``<@!bot>`` mentions, whitespace tidied."""
    without = re.sub(rf"<@!?{bot_id}>", " ", text)
    return re.sub(r"[ \t]{2,}", " ", without).strip()


def _place(channel: discord.abc.Messageable | discord.abc.GuildChannel | object) -> tuple[str, str | None]:
    if isinstance(channel, discord.Thread):
        return str(channel.parent_id or channel.id), str(channel.id)
    # A channel discord.py has not cached arrives as a PartialMessageable; it is treated as a channel.
    return str(getattr(channel, "id")), None


def _attachment(item: discord.Attachment, *, voice_message: bool) -> Attachment:
    return Attachment(
        kind=_kind(item.content_type, item, voice_message),
        name=item.filename,
        mime_type=item.content_type,
        size=item.size,
        ref=str(item.id),
        url=item.url,
        width=item.width,
        height=item.height,
        duration=item.duration,
    )


def _kind(content_type: str | None, item: discord.Attachment, voice_message: bool) -> str:
    if item.is_voice_message() or (voice_message and item.duration is not None):
        return "voice"
    major = content_type.partition("/")[0] if isinstance(content_type, str) else ""  # not text: Attachment refuses it
    return {"image": "photo", "audio": "audio", "video": "video"}.get(major, "document" if content_type else "file")

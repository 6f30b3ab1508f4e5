"""From a Telegram update to the gateway's :class:`InboundMessage`.

Only new messages become inbound events: edits, service messages (members
joining, pins, topic changes) and other update kinds are skipped. A caption is
the message's text; files are described (:func:`attachments_of`), not
downloaded, and the messages of an album share ``group_id`` (Telegram's
``media_group_id``). Whether the bot is addressed is read from the message
itself: a reply to one of the bot's messages, an ``@botname`` mention or
``/command@botname`` entity, or a text mention of the bot's user id. Access
rules are the gateway's business.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from aiogram.enums import ChatType as TgChatType
from aiogram.enums import MessageEntityType
from aiogram.types import Message, MessageEntity, PhotoSize, Update

from adapters.contract import Attachment, ChatType, InboundMessage

PLATFORM = "telegram"

CHAT_TYPES = {
    TgChatType.PRIVATE: ChatType.DM,
    TgChatType.GROUP: ChatType.GROUP,
    TgChatType.SUPERGROUP: ChatType.GROUP,
    TgChatType.CHANNEL: ChatType.CHANNEL,
}


@dataclass(frozen=True, slots=True)
class BotIdentity:
    """Who the bot is, from getMe: how it recognises being addressed."""

    id: int
    username: str

    def named(self, handle: str) -> bool:
        return handle.lstrip("@").lower() == self.username.lower()


def to_inbound(update: Update, bot: BotIdentity) -> InboundMessage | None:
    """The inbound message an update carries, or None for updates the gateway does not answer."""
    message = update.message
    if message is None:
        return None
    text = message.text or message.caption or ""
    attachments = attachments_of(message)
    if not text and not attachments:
        return None
    sender = message.from_user
    user_id = sender.id if sender is not None else (message.sender_chat.id if message.sender_chat else message.chat.id)
    return InboundMessage(
        platform=PLATFORM,
        event_id=str(update.update_id),
        chat_id=str(message.chat.id),
        chat_type=CHAT_TYPES.get(message.chat.type, ChatType.GROUP),
        user_id=str(user_id),
        text=text,
        message_id=str(message.message_id),
        thread_id=str(message.message_thread_id) if message.is_topic_message and message.message_thread_id else None,
        user_name=_display_name(message),
        attachments=attachments,
        group_id=message.media_group_id,
        mentioned=addresses_bot(message, bot),
        from_bot=bool(sender and sender.is_bot),
        timestamp=message.date.timestamp(),
    )


def addresses_bot(message: Message, bot: BotIdentity) -> bool:
    """A reply to the bot, or an entity naming it (@mention, /command@bot, or a text mention)."""
    replied = message.reply_to_message
    # In a forum topic every message "replies" to the topic's creation message; that is not a reply.
    if replied is not None and replied.forum_topic_created is None and replied.from_user is not None:
        if replied.from_user.id == bot.id:
            return True
    text = message.text or message.caption or ""
    entities = message.entities or message.caption_entities or []
    return any(_names_bot(entity, text, bot) for entity in entities)


def _names_bot(entity: MessageEntity, text: str, bot: BotIdentity) -> bool:
    if entity.type == MessageEntityType.TEXT_MENTION:
        return entity.user is not None and entity.user.id == bot.id
    if entity.type == MessageEntityType.MENTION:
        return bot.named(entity.extract_from(text))
    if entity.type == MessageEntityType.BOT_COMMAND:
        _, _, handle = entity.extract_from(text).partition("@")
        return bool(handle) and bot.named(handle)
    return False


def attachments_of(message: Message) -> tuple[Attachment, ...]:
    """File metadata (never the content) for every kind of media a message can carry, as fully as Telegram
    describes it: sizes, dimensions, durations. Videos, video notes, animations and stickers are described
    (kind ``video`` or ``sticker``) but the gateway does not read them."""
    found: list[Attachment] = []
    if message.photo:
        found.append(_photo(message.photo))
    # An animation (a GIF) also comes as a document, for old clients: it is a video, not a document to read.
    if message.document and not message.animation:
        d = message.document
        found.append(Attachment(kind="document", name=d.file_name, mime_type=d.mime_type, size=d.file_size, ref=d.file_id))
    if message.voice:
        v = message.voice
        found.append(Attachment(kind="voice", mime_type=v.mime_type, size=v.file_size, ref=v.file_id, duration=v.duration))
    if message.audio:
        a = message.audio
        found.append(Attachment(kind="audio", name=a.file_name or a.title, mime_type=a.mime_type, size=a.file_size,
                                ref=a.file_id, duration=a.duration))  # fmt: skip
    for v2 in (message.video, message.animation):
        if v2 is not None:
            found.append(Attachment(kind="video", name=v2.file_name, mime_type=v2.mime_type, size=v2.file_size,
                                    ref=v2.file_id, width=v2.width, height=v2.height, duration=v2.duration))  # fmt: skip
    if message.video_note:
        n = message.video_note
        found.append(Attachment(kind="video", name="video note", size=n.file_size, ref=n.file_id, width=n.length,
                                height=n.length, duration=n.duration))  # fmt: skip
    if message.sticker:
        s = message.sticker
        found.append(Attachment(kind="sticker", name=s.emoji, size=s.file_size, ref=s.file_id, width=s.width, height=s.height))
    return tuple(found)


def _photo(sizes: list[PhotoSize]) -> Attachment:
    """A photo: its largest size, with the other sizes Telegram made of it in ``smaller``, largest first."""
    renditions = [
        Attachment(kind="photo", mime_type="image/jpeg", size=size.file_size, ref=size.file_id, width=size.width,
                   height=size.height)
        for size in sorted(sizes, key=lambda size: (size.width * size.height, size.file_size or 0), reverse=True)
    ]  # fmt: skip
    return replace(renditions[0], smaller=tuple(renditions[1:]))


def _display_name(message: Message) -> str:
    sender = message.from_user
    if sender is not None:
        return sender.full_name or (sender.username or "")
    return message.sender_chat.title or "" if message.sender_chat else ""

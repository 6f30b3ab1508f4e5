"""What a turn hands the model from the user's side, and how a stored turn is recognised again.

* :func:`compose`: the messages of a batch as one user message: their words, the files read from them
  (pictures and documents as media parts, voice notes as transcripts, a line for each file that could not
  be used), senders named in a shared thread;
* :func:`event_tag` / :func:`covered_events`: the inbound events a stored user message answers, so a
  turn run again (after a restart, or a try the database failed) finds its own message;
* :func:`overlay`: the call-time notes the frozen prompt must not hold (who speaks, why the session is new).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from adapters.contract import ChatType, InboundMessage
from agent import ChatMessage, MediaPart, combine_ephemeral
from gateway.turn.conversations import Conversation

if TYPE_CHECKING:
    from gateway.media.pipeline import Prepared

EVENT_TAG_PREFIX = "events:"


def compose(batch: Sequence[InboundMessage], prepared: Mapping[str, Prepared], *, named: bool = False) -> ChatMessage:
    """The user's turn: the messages' texts in order, with what became of their files.

    ``prepared``: the files of the messages that had any, as the media pipeline read them, by event
    id. Pictures and documents become the message's media parts (sent to the model beside the text),
    transcripts its words, and a file that could not be used a short line saying so. ``named``: the
    session is shared by several people, so each message starts with its sender's name
    (``Alice: ...``); the stored history then keeps who said what.
    """
    parts: list[str] = []
    media: list[MediaPart] = []
    for message in batch:
        read = prepared.get(message.event_id)
        lines = [message.text.strip()]
        if read is not None:
            media += read.parts
            lines += [_attached(read.parts)] if read.parts else []
            lines += [f"[{_heard(t.origin, t.name)}, transcribed]: {t.text.strip()}" for t in read.transcripts]
            lines += [f"[{p.what} could not be used: {as_sentence(p.user_text)} The user was told.]"
                      for p in read.problems]  # fmt: skip
        part = "\n".join(line for line in lines if line)
        if part and named:
            part = f"{sender(message)}: {part}"
        parts.append(part)
    text = "\n\n".join(p for p in parts if p) or "(an empty message)"
    return ChatMessage(role="user", content=text, media=tuple(media))


def as_sentence(text: str) -> str:
    """``text`` ending with a full stop (a reason from the media pipeline, shown to the user or the model)."""
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _attached(parts: Sequence[MediaPart]) -> str:
    """The files that go to the model with a message, named in its text (which picture came with which words)."""
    return "[attached: " + "; ".join(part.name or part.origin for part in parts) + "]"


def _heard(origin: str, name: str | None) -> str:
    return "voice note" if origin == "voice" else f"audio{' ' + name if name else ''}"


def sender(message: InboundMessage) -> str:
    """The sender's name on one line (their id when the platform gave no name)."""
    return " ".join((message.user_name or message.user_id).split()) or message.user_id


def event_tag(batch: Sequence[InboundMessage]) -> str:
    """Stored on the user message: the inbound events it answers (how a replay finds its turn)."""
    return EVENT_TAG_PREFIX + ",".join(m.event_id for m in batch)


def covered_events(conversation: Conversation) -> list[str]:
    """The events answered by the session's last user message, in the order they were tagged."""
    for record in reversed(conversation.records):
        if record.role == "user":
            tag = record.platform_message_id or ""
            return tag[len(EVENT_TAG_PREFIX):].split(",") if tag.startswith(EVENT_TAG_PREFIX) else []
    return []


def overlay(batch: Sequence[InboundMessage], conversation: Conversation, *, shared: bool = False) -> str | None:
    """Call-time context the frozen prompt must not hold: who is speaking, why the session is new."""
    notes = []
    first = batch[0]
    if shared:
        notes.append("[Several people talk in this thread; each of their messages starts with the sender's name.]")
    elif first.chat_type is not ChatType.DM:
        notes.append(f"[This message comes from {sender(first)} in a group chat.]")
    if any(a.kind in ("voice", "audio") for m in batch for a in m.attachments):
        notes.append("[Voice notes reach you as automatic transcripts (marked \"transcribed\"); where one reads "
                     "oddly, say in a few words what you understood rather than guessing silently.]")
    if conversation.reset_reason == "idle":
        notes.append("[The previous conversation ended after a long pause; this one starts without its history.]")
    elif conversation.reset_reason == "daily":
        notes.append("[Conversations start afresh every day; this one starts without yesterday's history.]")
    elif conversation.reset_reason == "forgotten":
        notes.append("[What you had saved about this person or conversation was deleted on request (/forget); "
                     "this conversation starts afresh.]")
    elif conversation.reset_reason == "memory_scope":
        notes.append("[Saved memory is now kept per person; this conversation starts afresh without the earlier "
                     "history.]")
    return combine_ephemeral(*notes)


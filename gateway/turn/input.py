"""What a turn hands the model from the user's side, and how a stored turn is recognised again.

* :func:`compose`: the messages of a batch as one user message (files noted, senders named in a shared thread);
* :func:`event_tag` / :func:`covered_events`: the inbound events a stored user message answers, so a
  turn run again (after a restart, or a try the database failed) finds its own message;
* :func:`overlay`: the call-time notes the frozen prompt must not hold (who speaks, why the session is new).
"""

from __future__ import annotations

from collections.abc import Sequence

from adapters.contract import ChatType, InboundMessage
from agent import combine_ephemeral
from gateway.turn.conversations import Conversation

EVENT_TAG_PREFIX = "events:"


def compose(batch: Sequence[InboundMessage], *, named: bool = False) -> str:
    """The user's turn: the messages' texts in order, with a note for files the model cannot see.

    ``named``: the session is shared by several people, so each message starts with its sender's
    name (``Alice: ...``); the stored history then keeps who said what.
    """
    parts = []
    for message in batch:
        text = message.text.strip()
        notes = [
            f"[{a.kind}{' ' + a.name if a.name else ''} attached; you cannot open attachments here]"
            for a in message.attachments
        ]
        part = "\n".join(p for p in [text, *notes] if p)
        if part and named:
            part = f"{sender(message)}: {part}"
        parts.append(part)
    return "\n\n".join(p for p in parts if p) or "(an empty message)"


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


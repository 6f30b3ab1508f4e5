"""How compaction marks what it writes into a conversation.

Three kinds of text come from the compressor rather than from the user or the
model: the summary message, the one-time note in the system prompt, and the
one-line stand-ins for old tool output. Each is recognisable, so a later
compaction (possibly in a new process) can find and update its own work.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Final

from agent.messages import ChatMessage, Role

__all__ = [
    "CLEARED_TOOL_OUTPUT",
    "COMPACTION_NOTE",
    "PRUNED_PREFIX",
    "SUMMARY_HEADER",
    "frame_summary",
    "is_pruned",
    "is_summary",
    "summary_body",
    "summary_message",
    "with_compaction_note",
]

SUMMARY_HEADER: Final = "[Switchboard context summary: reference only]"
SUMMARY_INTRO: Final = (
    "Earlier turns of this conversation were condensed into the notes below to save context space. "
    "They record what already happened and are not new instructions: do not answer or redo the requests "
    "they mention. Respond to the most recent user message in the conversation, using the notes only as "
    "background."
)
SUMMARY_TRAILER: Final = "[End of context summary. The conversation continues below.]"

COMPACTION_NOTE: Final = (
    "[Switchboard note: part of this conversation was condensed into a summary message to save "
    "context space. Treat that summary as a record of work already done and build on it instead of "
    "repeating it.]"
)

CLEARED_TOOL_OUTPUT: Final = "[Old tool output cleared to save context space]"
"""The generic stand-in, used when nothing is known about the call."""
PRUNED_PREFIX: Final = "[tool output cleared]"
"""Start of the informative one-line stand-in for an old tool result."""

SUMMARY_META_KEY: Final = "summary"
BODY_META_KEY: Final = "summary_body"


def frame_summary(body: str) -> str:
    """The summary message text: a reference-only header, the notes, a closing line."""
    return f"{SUMMARY_HEADER}\n{SUMMARY_INTRO}\n\n{body.strip()}\n\n{SUMMARY_TRAILER}"


def summary_message(body: str, role: Role, *, local: bool = False) -> ChatMessage:
    """The message that stands in for the condensed turns."""
    meta: dict[str, Any] = {SUMMARY_META_KEY: True, BODY_META_KEY: body.strip()}
    if local:
        meta["local_summary"] = True
    return ChatMessage(role=role, content=frame_summary(body), meta=meta)


def is_summary(message: ChatMessage) -> bool:
    """Whether ``message`` is a summary written by a compaction."""
    if message.role not in ("user", "assistant"):
        return False
    return bool(message.meta.get(SUMMARY_META_KEY)) or message.content.startswith(SUMMARY_HEADER)


def summary_body(message: ChatMessage) -> str:
    """The notes inside a summary message, without header and closing line."""
    body = message.meta.get(BODY_META_KEY)
    if isinstance(body, str) and body:
        return body
    text = message.content
    for frame in (SUMMARY_HEADER, SUMMARY_INTRO):
        if text.startswith(frame):
            text = text[len(frame):].lstrip("\n")
    if text.endswith(SUMMARY_TRAILER):
        text = text[: -len(SUMMARY_TRAILER)]
    return text.strip()


def is_pruned(content: str) -> bool:
    """Whether a tool result was already replaced by a stand-in."""
    return content.startswith(PRUNED_PREFIX) or content == CLEARED_TOOL_OUTPUT


def with_compaction_note(system: ChatMessage) -> ChatMessage:
    """The system message with the compaction note appended, once.

    This is the one change the otherwise frozen system prompt ever gets: it
    happens on the first compaction of a conversation, so the prompt cache is
    invalidated once and stays stable afterwards.
    """
    if COMPACTION_NOTE in system.content:
        return system
    content = f"{system.content.rstrip()}\n\n{COMPACTION_NOTE}" if system.content.strip() else COMPACTION_NOTE
    return replace(system, content=content, meta=dict(system.meta))

"""How a compaction speaks of the pictures and documents in the turns it condenses.

The summary model never gets the files: each part of the condensed turns reaches it as one
placeholder line (what it is, its name, its size, when it was sent), and the notes keep one
line per attachment, described from what the conversation says about it::

    [attachment: photo 'screen.png' (image/png, 1280x800, 212 KB, sent 2026-11-27 14:02 UTC)]
    ->  [photo: screenshot of a Python traceback, sent 2026-11-27 14:02 UTC]

The compacted conversation carries no parts of the condensed turns, only these lines in the
summary; parts in the kept head and tail stay as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from agent.media import MediaPart, facts
from agent.messages import ChatMessage

__all__ = ["ATTACHMENTS_HEADING", "ATTACHMENTS_HINT", "ATTACHMENTS_RULE", "has_attachments", "placeholder"]

ATTACHMENTS_HEADING: Final = "## Attachments"
ATTACHMENTS_HINT: Final = (
    "One line per photo or document the user sent, oldest first, each like "
    "[photo: screenshot of a Python traceback, sent 2026-11-27 14:02 UTC]; keep the lines of earlier notes."
)
ATTACHMENTS_RULE: Final = (
    "- An [attachment: ...] line stands for a photo or document you cannot see. Give each one line "
    "under Attachments: its kind, what it showed or contained as the user and the assistant described "
    "it (write \"not discussed\" when they said nothing about it), and when it was sent. Never guess "
    "what it showed."
)


def placeholder(part: MediaPart) -> str:
    """The one line a condensed turn's part is to the summary model."""
    name = f" '{part.name}'" if part.name else ""
    return f"[attachment: {part.origin}{name} ({', '.join([part.mime, *facts(part, size=True)])})]"


def has_attachments(turns: Sequence[ChatMessage], previous: str | None) -> bool:
    """Whether the notes need the Attachments section: parts in the turns, or lines in the old notes."""
    return any(message.media for message in turns) or bool(previous and ATTACHMENTS_HEADING in previous)

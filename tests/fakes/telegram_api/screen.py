"""What a user of the fake Telegram saw, and when: every message, edit and draft the bot showed.

:class:`Screen` keeps one :class:`Shown` per accepted ``sendMessage``,
``editMessageText`` and ``sendMessageDraft``, in the order accepted, with its
``time.monotonic()`` arrival. Tests and the benchmark read from it the first
text a chat showed (how long the user waited) and whether a draft is still on
screen (Telegram shows a draft for about 30 seconds, until the bot sends a
message to the chat or a newer draft replaces it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

DRAFT_LIFETIME = 30.0
"""Seconds a draft stays on screen when nothing replaces it (Telegram's documented preview time)."""


@dataclass(frozen=True, slots=True)
class Shown:
    chat_id: int
    kind: Literal["message", "edit", "draft"]
    text: str
    """The text as the bot sent it (markup included)."""
    parse_mode: str | None
    visible: str
    """What the user sees: the text with the markup applied; empty for a draft's "Thinking…" placeholder."""
    at: float
    """time.monotonic() when the call was accepted."""
    message_id: int | None = None
    draft_id: int | None = None
    thread_id: int | None = None


class Screen:
    def __init__(self) -> None:
        self.shown: list[Shown] = []

    def record(self, shown: Shown) -> None:
        self.shown.append(shown)

    @property
    def drafts(self) -> list[Shown]:
        return [entry for entry in self.shown if entry.kind == "draft"]

    def in_chat(self, chat_id: int) -> list[Shown]:
        return [entry for entry in self.shown if entry.chat_id == chat_id]

    def first_visible(self, chat_id: int) -> Shown | None:
        """The first message, edit or draft that showed the chat some text (a placeholder does not count)."""
        return next((entry for entry in self.in_chat(chat_id) if entry.visible.strip()), None)

    def draft_on_screen(self, chat_id: int, now: float) -> Shown | None:
        """The draft the chat shows at ``now``: the latest, unless a message came after it or it expired."""
        latest = None
        for entry in self.in_chat(chat_id):
            if entry.kind == "draft":
                latest = entry
            elif entry.kind == "message":
                latest = None
        if latest is None or now - latest.at > DRAFT_LIFETIME:
            return None
        return latest

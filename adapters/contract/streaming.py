"""How a platform shows a reply while the model is still writing it, and how fast it may be written to.

* :class:`StreamMode`: the ways a platform can show text as it grows. An adapter says which it
  offers for a chat (:meth:`Adapter.stream_modes`), best first; the gateway uses the first that
  works and remembers a refusal (:class:`~adapters.contract.errors.StreamingUnsupported`).
* :class:`Rate` and :class:`RateLimits`: how many sends and edits a platform takes, per chat and
  overall. They are written here once per platform (in its :class:`Capabilities`) and the
  gateway's one per-chat budget keeps every send, edit and streamed update inside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class StreamMode(StrEnum):
    DRAFT = "draft"
    """An ephemeral preview that is not a message (Telegram's ``sendMessageDraft`` in private chats):
    nothing is left behind, and the final answer is then sent as a normal message."""
    EDIT = "edit"
    """A message sent once there is enough text, then edited in place as the text grows."""
    NATIVE = "native"
    """The platform's own streaming API (Slack's ``chat.startStream`` / ``appendStream`` / ``stopStream``):
    text is appended, and the message is edited to the final text once the stream is stopped."""


@dataclass(frozen=True, slots=True)
class Rate:
    """At most ``count`` calls in any ``per`` seconds."""

    count: int
    per: float

    def __post_init__(self) -> None:
        if self.count < 1 or self.per <= 0:
            raise ValueError(f"a rate needs a positive count and period, not {self.count} per {self.per} s")

    @property
    def interval(self) -> float:
        """The spacing that keeps a steady flow inside the rate."""
        return self.per / self.count


@dataclass(frozen=True, slots=True)
class RateLimits:
    """What a platform takes before it answers 429: the only place a platform's rates are written."""

    per_chat: Rate = Rate(1, 1.0)
    """Sends and edits to one chat (for chats :meth:`Adapter.chat_rate` does not treat otherwise)."""
    overall: Rate | None = None
    """Sends and edits across every chat of the bot, where the platform has such a limit."""
    stream_interval: float = 1.0
    """The default least number of seconds between two updates of one streamed message
    (``platforms.<name>.stream_edit_interval`` overrides it)."""

"""How a streamed message the answer will not reach is ended: what it showed, then a clear mark."""

from __future__ import annotations

from typing import Final

from adapters.contract import Capabilities
from gateway.delivery.formatting import measure

STOPPED_MARK: Final = "— stopped"
"""``/stop``, or a newer message that interrupted the turn (``busy: interrupt``)."""
INTERRUPTED_MARK: Final = "— interrupted (the gateway restarted before this answer was finished)"
"""A restart found the message half written and its turn will not run again."""

_GAP: Final = "\n\n"


def marked(text: str, plain: str | None, mark: str, capabilities: Capabilities) -> tuple[str, str]:
    """``(text, plain)`` of a message that showed ``text`` (rendered; ``plain`` without markup), ended with
    ``mark`` and still one message. When the mark does not fit, the plain text is cut to make room
    (rendered text cannot be cut safely), so both are plain then."""
    limit, unit = capabilities.max_message_length, capabilities.length_unit
    shown_plain = plain if plain is not None else text
    if not text.strip():
        return mark, mark
    full = f"{text}{_GAP}{mark}"
    if measure(full, unit) <= limit:
        return full, f"{shown_plain}{_GAP}{mark}"
    room = limit - measure(f"…{_GAP}{mark}", unit)
    cut = shown_plain
    while cut and measure(cut, unit) > room:
        cut = cut[: max(0, len(cut) - max(1, measure(cut, unit) - room))]
    ended = f"{cut.rstrip()}…{_GAP}{mark}"
    return ended, ended

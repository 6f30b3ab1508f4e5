"""How a reply's text is cut into streamed deltas, and how far apart they go out.

Unpaced (today's fake): 16-character pieces, sent at once. Paced: one piece per word, a word
counting as one token (its leading whitespace goes with it, any trailing whitespace with the
last word), so the pieces join back into the exact text; the first goes out at once and each
next one ``1 / pace`` seconds after the one before, as a model writing ``pace`` tokens per
second would send them.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"\s*\S+")


def chunk_text(text: str, size: int = 16) -> list[str]:
    """Split ``text`` into deterministic streaming pieces of ``size`` chars."""
    return [text[start : start + size] for start in range(0, len(text), size)]


def word_pieces(text: str) -> list[str]:
    """``text`` cut before each word; the pieces join back into ``text``."""
    pieces = _WORD.findall(text)
    rest = text[sum(map(len, pieces)) :]
    if not pieces:
        return [rest] if rest else []
    pieces[-1] += rest
    return pieces


def paced_pieces(text: str, pace: float | None) -> list[tuple[str, float]]:
    """``(piece, seconds to wait before sending it)`` for each delta of ``text``."""
    if pace is None:
        return [(piece, 0.0) for piece in chunk_text(text)]
    gap = 1.0 / pace
    return [(piece, gap if index else 0.0) for index, piece in enumerate(word_pieces(text))]


def writing_seconds(text: str | None, pace: float | None) -> float:
    """How long the paced text takes to write (what a request that did not stream waits for it)."""
    return sum(wait for _, wait in paced_pieces(text or "", pace))

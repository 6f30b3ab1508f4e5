"""Measuring text the way each platform counts it, and finding safe places to cut it.

Telegram counts message length in UTF-16 code units, so a character outside the
Basic Multilingual Plane (most emoji, rare CJK) counts twice. Discord and Slack
count characters. Python strings hold code points, so slicing one never splits
a surrogate pair; :func:`is_boundary` adds the user-visible rule on top: do not
separate a base character from the marks, joiners and modifiers that belong to it.
"""

from __future__ import annotations

import unicodedata
from functools import lru_cache
from typing import Final, Literal

LengthUnit = Literal["chars", "utf16"]

_ZWJ: Final = "\u200d"


def utf16_len(text: str) -> int:
    """Length of ``text`` in UTF-16 code units (astral characters count 2)."""
    if text.isascii():
        return len(text)
    return len(text.encode("utf-16-le")) // 2


def measure(text: str, unit: str) -> int:
    """Length of ``text`` in ``unit``: ``"utf16"`` code units or ``"chars"`` (code points)."""
    if unit == "utf16":
        return utf16_len(text)
    if unit == "chars":
        return len(text)
    raise ValueError(f"unknown length unit {unit!r}; expected 'chars' or 'utf16'")


@lru_cache(maxsize=4096)
def _clings(char: str) -> bool:
    """True for code points that attach to the character before them."""
    code = ord(char)
    if char == _ZWJ or 0xFE00 <= code <= 0xFE0F or 0x1F3FB <= code <= 0x1F3FF or 0xE0020 <= code <= 0xE007F:
        return True
    return unicodedata.category(char) in ("Mn", "Mc", "Me")


def _is_regional(char: str) -> bool:
    return 0x1F1E6 <= ord(char) <= 0x1F1FF


def is_boundary(text: str, index: int) -> bool:
    """Whether ``text`` may be cut before ``text[index]`` without breaking a visible character.

    Refuses cuts before combining marks, variation selectors, skin-tone modifiers and
    emoji tag characters, around a zero-width joiner, inside a flag (a pair of regional
    indicators), and between ``\\r`` and ``\\n``.
    """
    if index <= 0 or index >= len(text):
        return True
    before, after = text[index - 1], text[index]
    if before == _ZWJ or _clings(after) or (before == "\r" and after == "\n"):
        return False
    if _is_regional(after) and _is_regional(before):
        run = 0
        while index - run - 1 >= 0 and _is_regional(text[index - run - 1]):
            run += 1
        return run % 2 == 0
    return True


@lru_cache(maxsize=4096)
def _char_width(char: str) -> int:
    if _clings(char) or char in "\u200b\u200c\u2060":
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def display_width(text: str) -> int:
    """Approximate monospace width: wide (CJK, emoji) characters take two columns, marks none."""
    return sum(_char_width(char) for char in text)

"""Session titles: cleaning what people type, and numbering a lineage ("notes", "notes #2", ...).

Titles are unique when set, and at most ``MAX_TITLE_LENGTH`` characters when
people choose them (numbered ones may run a few characters over). When
compression splits a session, the child is titled after the parent's base
with the next free number; the unnumbered original counts as #1. Looking up the numbered siblings is a range scan on the
title index (``"base #0" <= title < "base #:"``), not a LIKE pattern, so
titles containing ``_`` or ``%`` never match as wildcards.
"""

from __future__ import annotations

import re
import sqlite3
import unicodedata
from collections.abc import Iterable
from typing import Final

from storage.errors import InvalidTitleError

__all__ = [
    "MAX_TITLE_LENGTH",
    "chain_title_range",
    "clean_title",
    "next_numbered_title",
    "next_title_in_chain",
    "normalize_title",
    "split_number",
]

MAX_TITLE_LENGTH: Final = 100
_NUMBERED: Final = re.compile(r"^(?P<base>.*?) #(?P<n>[0-9]+)$", re.DOTALL)
_SPACES: Final = re.compile(r"\s+")


def normalize_title(title: str) -> str | None:
    """Drop control, zero-width and bidi characters, collapse spaces; '' becomes None."""
    visible = "".join(ch for ch in title if unicodedata.category(ch) not in ("Cc", "Cf") or ch in "\t\n")
    return _SPACES.sub(" ", visible).strip() or None


def clean_title(title: str | None) -> str | None:
    """A title as typed, normalized and checked: None for none, ``InvalidTitleError`` if too long."""
    cleaned = normalize_title(title) if title is not None else None
    if cleaned is not None and len(cleaned) > MAX_TITLE_LENGTH:
        raise InvalidTitleError(cleaned, f"longer than {MAX_TITLE_LENGTH} characters")
    return cleaned


def split_number(title: str) -> tuple[str, int]:
    """``"notes #3"`` -> ``("notes", 3)``; ``"notes"`` -> ``("notes", 1)``."""
    match = _NUMBERED.match(title)
    if match and match.group("base"):
        return match.group("base"), int(match.group("n"))
    return title, 1


def chain_title_range(title: str) -> tuple[str, str]:
    """The bounds ``low <= t < high`` of the titles numbered after ``title``'s base (``"base #0"``, ``"base #:"``),
    compared code point by code point (SQLite's BINARY, PostgreSQL's ``"C"`` collation)."""
    base, _ = split_number(title)
    return f"{base} #0", f"{base} #:"


def next_numbered_title(title: str, taken: Iterable[str]) -> str:
    """The next free number of ``title``'s chain, given the ``taken`` titles in its range (``chain_title_range``)."""
    base, _ = split_number(title)
    prefix = f"{base} #"
    highest = 1
    for candidate in taken:
        suffix = candidate[len(prefix) :]
        if candidate.startswith(prefix) and suffix.isascii() and suffix.isdigit():
            highest = max(highest, int(suffix))
    return f"{base} #{highest + 1}"


def next_title_in_chain(conn: sqlite3.Connection, title: str) -> str:
    """The title for the next session of the chain ``title`` belongs to."""
    rows = conn.execute("SELECT title FROM sessions WHERE title >= ? AND title < ?", chain_title_range(title))
    return next_numbered_title(title, (candidate for (candidate,) in rows))

"""A chunk's target: one dialect measured in one unit, and how a run of pieces is written in it.

The chunker (``chunking.py``) measures every piece in each target (the platform's markup and
plain text) and renders each chunk in both; the wrappers open around a piece, the markers that
move between two pieces and the invisible gap that keeps two marker runs apart are decided here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final

from gateway.delivery.formatting.dialect import Dialect, Stack
from gateway.delivery.formatting.layout import Kind, Piece, WrapKind
from gateway.delivery.formatting.lengths import measure, utf16_len

Measured = tuple[Stack, str, int]
"""A piece as one target writes it: effective stack, body, body length."""


class Target:
    """One dialect measured in one unit, with the few strings it needs cached."""

    def __init__(self, dialect: Dialect, unit: str) -> None:
        measure("", unit)  # rejects an unknown unit
        self.dialect = dialect
        self.size: Callable[[str], int] = utf16_len if unit == "utf16" else len
        self._stacks: dict[Stack, Stack] = {}
        self._moves: dict[tuple[Stack, Stack], tuple[str, str]] = {}
        self._move_sizes: dict[tuple[Stack, Stack], int] = {}

    def stack(self, piece: Piece) -> Stack:
        found = self._stacks.get(piece.wraps)
        if found is None:
            found = self._stacks[piece.wraps] = self.dialect.effective(piece.wraps)
        return found

    def body(self, piece: Piece) -> str:
        if piece.plain_only and not self.dialect.shows_link_urls:
            return ""
        if piece.brk is not None:
            return self.dialect.separator(piece.text, self.stack(piece))
        return self.dialect.text(piece.text, piece.kind, self.stack(piece))

    def move(self, old: Stack, new: Stack) -> tuple[str, str]:
        """What to write to go from inside ``old`` to inside ``new``: the closings, then the openings."""
        key = (old, new)
        found = self._moves.get(key)
        if found is None:
            shared = 0
            while shared < min(len(old), len(new)) and old[shared] == new[shared]:
                shared += 1
            closes = "".join(self.dialect.close(wrap) for wrap in reversed(old[shared:]))
            opens = "".join(self.dialect.open(wrap) for wrap in new[shared:])
            if closes and opens and closes[-1] == opens[0] and opens[0] in _RUN_MARKERS:
                # "**a**" then "*b*" would read "**a***b*", which Discord takes as bold "a*": keep them apart.
                opens = _MARKER_GAP + opens
            found = self._moves[key] = (closes, opens)
        return found

    def move_size(self, old: Stack, new: Stack) -> int:
        key = (old, new)
        found = self._move_sizes.get(key)
        if found is None:
            found = self._move_sizes[key] = self.size("".join(self.move(old, new)))
        return found

    def measure_piece(self, piece: Piece) -> Measured:
        """The piece's effective stack, its body, and the body's length (empty when not shown)."""
        body = self.body(piece)
        return self.stack(piece), body, self.size(body)

    def render(self, pieces: Sequence[Piece], measured: Sequence[Measured]) -> str:
        """One chunk's text: separators at its edges dropped, every wrapper closed at the end."""
        shown: list[tuple[Piece, Stack, str]] = []
        for piece, (stack, body, _) in zip(pieces, measured, strict=True):
            if body and not (piece.brk is not None and (not shown or shown[-1][0].brk is not None)):
                shown.append((piece, stack, body))
        while shown and shown[-1][0].brk is not None:
            shown.pop()
        # Markdown-like dialects only honour a closing marker right after a non-space and an
        # opening one right before a non-space, so whitespace at a style change moves between them.
        out: list[str] = []
        current: Stack = ()
        after_text = False
        for piece, stack, body in shown:
            closes, opens = self.move(current, stack)
            gap = ""
            if (closes or opens) and outer(current) == outer(stack):
                if closes and after_text and prose(current):
                    kept = out[-1].rstrip()
                    gap, out[-1] = out[-1][len(kept) :], kept
                if opens and piece.brk is None and piece.kind != Kind.MARKUP and prose(stack):
                    kept = body.lstrip()
                    gap, body = gap + body[: len(body) - len(kept)], kept
            out += (closes, gap, opens, body)
            current = stack
            after_text = piece.brk is None and piece.kind != Kind.MARKUP
        out.append(self.move(current, ())[0])
        return "".join(out)


_RUN_MARKERS: Final = frozenset("*_~|")
"""Marker characters that merge with a neighbouring marker of the same character."""
_MARKER_GAP: Final = "\u200b"
"""A zero-width space: invisible, and it ends a run of marker characters."""


def prose(stack: Stack) -> bool:
    """Whether whitespace at the edge of a piece in ``stack`` may move across its markers."""
    return bool(stack) and WrapKind.LINK <= stack[-1].kind < WrapKind.CODE


def outer(stack: Stack) -> Stack:
    """The block-level part of a stack (quote, code block, heading)."""
    return tuple(wrap for wrap in stack if wrap.kind < WrapKind.LINK)

"""Cutting lowered pieces into chunks that fit a platform's limit, in its markup and as plain text.

Each chunk is measured as it will be written, wrappers and escapes included, in both
the target dialect and plain text; both must fit. Where to cut, best first:

1. a blank line between blocks, then a line break, then a space, if the chunk is
   at least half full that way;
2. otherwise the latest of those, however short the chunk;
3. otherwise a hard cut inside the text that overflowed (never inside a code
   point, a grapheme's marks or an escape; after a space or CJK punctuation if
   one is near), or between two pieces that touch.

A break right after a heading counts only as a space, so a heading stays with its
section when it can; a list marker is never left alone at the end of a chunk unless
nothing else fits.

A chunk closes every wrapper still open at its end and the next one reopens them,
so tags balance and code fences are closed and reopened with their language.
Whitespace at a cut is dropped, except inside code. Inline code is cut only where
neither part would end or begin with its delimiter's character (a backtick there
would merge into the delimiter around it); where no such place is in reach, the
code is padded with a space inside its delimiters, which makes every place safe.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Final

from gateway.delivery.formatting.dialect import Dialect, Stack
from gateway.delivery.formatting.layout import Brk, Kind, Piece, WrapKind
from gateway.delivery.formatting.lengths import is_boundary
from gateway.delivery.formatting.targets import Measured, Target

MIN_LENGTH: Final = 16
"""The smallest limit the chunker accepts: room for the widest escape of one character."""

_SOFT_STOPS: Final = frozenset("。！？，、；：）」』】〉》.!?,;:")

_State = tuple[int, Stack]
"""Length written so far and the wrappers open at that point."""


@dataclass(frozen=True, slots=True)
class Chunk:
    """One message's worth of a reply."""

    text: str
    """The chunk in the target dialect, within the limit."""
    plain: str
    """The same chunk as plain text, within the limit: re-send this if the platform rejects ``text``."""


def split(pieces: Sequence[Piece], dialect: Dialect, plain: Dialect, *, limit: int, unit: str) -> list[Chunk]:
    """Cut ``pieces`` into chunks whose text (in ``dialect``) and plain text both fit ``limit``."""
    if limit < MIN_LENGTH:
        raise ValueError(f"max_length must be at least {MIN_LENGTH}, got {limit}")
    targets = [Target(dialect, unit)]
    if type(plain) is not type(dialect):
        targets.append(Target(plain, unit))
    cutter = _Cutter(list(pieces), targets, limit)
    chunks = []
    for group, measured in cutter.groups():
        text = targets[0].render(group, [sizes[0] for sizes in measured])
        if text.strip():  # a chunk holding only a link's plain-text address adds nothing
            chunks.append(Chunk(text, targets[-1].render(group, [sizes[-1] for sizes in measured])))
    return chunks


class _Cutter:
    def __init__(self, pieces: list[Piece], targets: list[Target], limit: int) -> None:
        self.pieces = pieces
        self.targets = targets
        self.limit = limit
        self.sizes = [self._size(piece) for piece in pieces]
        """Per piece, per target: how it is written (kept in step with ``pieces``)."""

    def _size(self, piece: Piece) -> tuple[Measured, ...]:
        return tuple([target.measure_piece(piece) for target in self.targets])

    def _set(self, index: int, *pieces: Piece) -> None:
        """Replace the piece at ``index`` by ``pieces``, keeping the sizes in step."""
        self.pieces[index : index + 1] = pieces
        self.sizes[index : index + 1] = [self._size(piece) for piece in pieces]

    def groups(self) -> list[tuple[list[Piece], list[tuple[Measured, ...]]]]:
        """The chunks, each as its pieces and how each target writes them."""
        groups = []
        start = 0
        while (start := self._start(start)) < len(self.pieces):
            end = self._cut(start)
            groups.append((self.pieces[start:end], self.sizes[start:end]))
            start = end
        return groups

    def _start(self, index: int) -> int:
        """Skip separators and whitespace a chunk must not begin with."""
        pieces = self.pieces
        while index < len(pieces):
            piece = pieces[index]
            if piece.brk is None and not _loose(piece):
                return index
            if piece.brk is None:
                text = piece.text.lstrip()
                if text:
                    self._set(index, replace(piece, text=text))
                    return index
            index += 1
        return index

    def _add(self, states: list[_State], index: int) -> list[_State]:
        added = []
        for target, (length, current), (stack, _, size) in zip(self.targets, states, self.sizes[index], strict=True):
            if size:
                length += target.move_size(current, stack) + size
                current = stack
            added.append((length, current))
        return added

    def _closed(self, states: list[_State]) -> list[int]:
        pairs = zip(self.targets, states, strict=True)
        return [length + target.move_size(current, ()) for target, (length, current) in pairs]

    def _cut(self, start: int) -> int:
        """Choose where the chunk starting at ``start`` ends; may split a piece in two."""
        pieces, limit = self.pieces, self.limit
        states: list[_State] = [(0, ()) for _ in self.targets]
        candidates: list[tuple[int, int]] = []  # (end, length): every place this chunk could end
        index = start
        while index < len(pieces):
            grown = self._add(states, index)
            if pieces[index].brk is None:
                closed = self._closed(grown)
                if max(closed) > limit:
                    break
                if index + 1 == len(pieces):
                    return index + 1
                candidates.append((index + 1, closed[0]))
            states = grown
            index += 1
        if index == len(pieces):  # only a trailing separator was left
            return candidates[-1][0] if candidates else index
        return self._choose(start, index, states, candidates)

    def _boundary(self, end: int) -> Brk:
        """How good a cut between ``pieces[end - 1]`` and ``pieces[end]`` is."""
        left, right = self.pieces[end - 1], self.pieces[end]
        if left.kind == Kind.MARKUP and left.text.endswith(" "):
            return Brk.GLUE  # a list marker or an indent stays with what follows, unless nothing else fits
        if right.brk is not None:
            return Brk.WORD if _heading(left) else right.brk  # a heading stays with its section if it can
        if right.plain_only:
            return Brk.GLUE
        if (_loose(left) and left.text[-1:].isspace()) or (_loose(right) and right.text[:1].isspace()):
            return Brk.WORD
        return Brk.GLUE

    def _choose(self, start: int, over: int, states: list[_State], candidates: list[tuple[int, int]]) -> int:
        piece = self.pieces[over]
        costs = self._char_costs(piece, states) if piece.brk is None else None
        fits = self._fitting(costs) if costs else 0
        word = self._word_split(piece, fits, costs) if costs and _loose(piece) else None
        if word is not None and not self._clean(piece, word[0], word[1]):
            word = None
        half = self.limit // 2
        for level in (Brk.PARA, Brk.LINE, Brk.WORD):
            if level == Brk.WORD and word is not None and word[2] >= half:
                return self._split(over, word[0], word[1])
            best = self._latest(candidates, level, half)
            if best is not None:
                return self._take(best)
        if word is not None:
            return self._split(over, word[0], word[1])
        best = self._latest(candidates, Brk.WORD, 0)
        if best is not None:
            return self._take(best)
        if fits > 0:
            hard = self._hard_split(piece.text, fits, loose=_loose(piece))
            if hard > 0 and not self._clean(piece, hard, hard):
                hard = self._clean_before(piece, hard)
            if hard > 0:
                return self._split(over, hard, hard)
        if candidates:
            return self._take(candidates[-1][0])
        if self._pad_code(over):
            return self._cut(start)
        if not piece.wraps or piece.brk is not None:
            raise ValueError(f"cannot fit any text of {piece!r} in {self.limit}")
        self._unwrap(over)
        return self._cut(start)

    def _latest(self, candidates: list[tuple[int, int]], level: Brk, least: int) -> int | None:
        """The last end at least ``least`` long whose cut is ``level`` or better."""
        for end, length in reversed(candidates):
            if length < least:
                return None  # lengths only grow along the chunk: earlier ones are shorter still
            if self._boundary(end) >= level:
                return end
        return None

    def _take(self, end: int) -> int:
        if self._boundary(end) == Brk.WORD:
            left = self.pieces[end - 1]
            if _loose(left):
                self._set(end - 1, replace(left, text=left.text.rstrip()))
        self._show(end)
        return end

    def _show(self, index: int) -> None:
        """A link's address that must open the next chunk is shown in every dialect there,
        so no chunk is left with only plain-text content."""
        if index < len(self.pieces) and self.pieces[index].plain_only:
            self._set(index, replace(self.pieces[index], plain_only=False))

    def _clean(self, piece: Piece, left_end: int, right_start: int) -> bool:
        """Whether cutting ``piece`` there keeps each part apart from the delimiters around it.

        Inside inline code nothing is escaped, so a part that begins or ends with the character
        its delimiter is made of (a backtick, in Markdown) would merge with it: ``a`b`` cut after
        the first backtick would read ````a```` + ````, a run that closes nothing.
        """
        text = piece.text
        if _loose(piece):  # the whitespace at the cut is dropped: the parts end where it starts
            while left_end > 0 and text[left_end - 1].isspace():
                left_end -= 1
            while right_start < len(text) and text[right_start].isspace():
                right_start += 1
        last, first = text[left_end - 1 : left_end], text[right_start : right_start + 1]
        for target in self.targets:
            stack = target.stack(piece)
            if stack and stack[-1].kind == WrapKind.CODE:
                write = target.dialect.text
                if last and write(last, piece.kind, stack)[-1:] == target.dialect.close(stack[-1])[:1]:
                    return False
                if first and write(first, piece.kind, stack)[:1] == target.dialect.open(stack[-1])[-1:]:
                    return False
        return True

    def _clean_before(self, piece: Piece, cut: int) -> int:
        """The latest clean cut (see :meth:`_clean`) before ``cut`` that falls on a character boundary; 0 if none."""
        while cut > 0 and not (is_boundary(piece.text, cut) and self._clean(piece, cut, cut)):
            cut -= 1
        return cut

    def _pad_code(self, index: int) -> bool:
        """Pad the inline code of the piece at ``index`` with a space inside its delimiters, so any cut
        is clean (for code where none is: every place within reach touches a backtick). False when it
        is no unpadded inline code."""
        piece = self.pieces[index]
        code = piece.wraps[-1] if piece.wraps else None
        if code is None or code.kind != WrapKind.CODE or code.flag:
            return False
        self._set(index, replace(piece, wraps=(*piece.wraps[:-1], code._replace(flag=True))))
        return True

    def _unwrap(self, index: int) -> None:
        """Write a piece whose wrappers alone exceed the limit without them.

        A link loses its markup, so its address, until now shown in plain text only,
        is shown in every dialect.
        """
        piece = self.pieces[index]
        self._set(index, replace(piece, wraps=()))
        if not any(wrap.kind == WrapKind.LINK for wrap in piece.wraps):
            return
        for later in range(index + 1, len(self.pieces)):
            follower = self.pieces[later]
            if follower.brk is not None:
                return
            if follower.plain_only:
                self._set(later, replace(follower, plain_only=False))
                return

    def _split(self, index: int, left_end: int, right_start: int) -> int:
        piece = self.pieces[index]
        left, right = piece.text[:left_end], piece.text[right_start:]
        if _loose(piece):
            left = left.rstrip()
        self._set(index, replace(piece, text=left), replace(piece, text=right))
        self._show(index + 1)
        return index + 1

    def _char_costs(self, piece: Piece, states: list[_State]) -> list[tuple[int, list[int]]]:
        """Per target: the fixed length around ``piece`` and the cumulative length of its text.

        The cumulative list stops at the first character that no longer fits, so a long
        piece costs time in proportion to the limit, not to its own length.
        """
        costs = []
        for target, (length, current) in zip(self.targets, states, strict=True):
            if not target.body(piece):
                costs.append((length + target.move_size(current, ()), [0] * (len(piece.text) + 1)))
                continue
            stack = target.stack(piece)
            fixed = length + target.move_size(current, stack) + target.move_size(stack, ())
            running, total = [0], 0
            sizes: dict[str, int] = {}
            for char in piece.text:
                size = sizes.get(char)
                if size is None:
                    size = sizes[char] = target.size(target.dialect.text(char, piece.kind, stack))
                total += size
                if fixed + total > self.limit:
                    break
                running.append(total)
            costs.append((fixed, running))
        return costs

    def _fitting(self, costs: list[tuple[int, list[int]]]) -> int:
        """How many characters of the overflowing piece fit."""
        return min(len(running) for _, running in costs) - 1

    def _word_split(self, piece: Piece, fits: int, costs: list[tuple[int, list[int]]]) -> tuple[int, int, int] | None:
        """The last space at or before ``fits``: (left end, right start, chunk length)."""
        text = piece.text
        index = min(fits, len(text) - 1)
        while index > 0 and not (text[index].isspace() and not text[index - 1].isspace()):
            index -= 1
        if index <= 0:
            return None
        right = index
        while right < len(text) and text[right].isspace():
            right += 1
        fixed, running = costs[0]
        return index, right, fixed + running[index]

    @staticmethod
    def _hard_split(text: str, fits: int, *, loose: bool) -> int:
        """Where to cut ``text`` when no space will do: at most ``fits`` characters in."""
        cut = fits
        while cut > 0 and not is_boundary(text, cut):
            cut -= 1
        for soft in range(cut, cut // 2, -1):
            if (text[soft - 1] in _SOFT_STOPS or (not loose and text[soft - 1].isspace())) and is_boundary(text, soft):
                return soft
        return cut or fits  # one visible character longer than the limit: cut between its code points


def _heading(piece: Piece) -> bool:
    return any(wrap.kind == WrapKind.HEADING for wrap in piece.wraps)


def _loose(piece: Piece) -> bool:
    """Whether whitespace at a cut in this piece may be dropped (prose, not code or layout)."""
    return piece.brk is None and piece.kind != Kind.MARKUP and not piece.in_code

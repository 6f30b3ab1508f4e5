"""Lowering: the parsed document as a flat run of pieces, ready to be measured and cut.

A :class:`Piece` is a run of text plus the stack of :class:`Wrap` values around
it: block wrappers (a quote, a code block, a heading) first, then a link, then
inline styles, in a fixed order. Because every piece names all of its
wrappers, a renderer can start a chunk at any piece by opening that piece's
stack, and end it anywhere by closing what is open: this is how tags stay
balanced and code fences are closed and reopened across chunks.

Separators are pieces too (``brk`` set): a blank line between blocks
(:attr:`Brk.PARA`) or a line break (:attr:`Brk.LINE`). A chunk never starts or
ends with one. Word breaks are found later, inside text pieces.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Final, NamedTuple

from gateway.delivery.formatting.ir import (
    Block,
    CodeBlock,
    Heading,
    Line,
    ListBlock,
    Paragraph,
    Quote,
    Rule,
    Style,
    Table,
    TextKind,
    same_address,
)
from gateway.delivery.formatting.tables import table_blocks

RULE_TEXT: Final = "─" * 10
"""What a thematic break (``---``) becomes: a line of box-drawing characters."""


class WrapKind(IntEnum):
    """Wrapper kinds, in nesting order: a lower value always encloses a higher one."""

    QUOTE = 0
    PRE = 1
    HEADING = 2
    LINK = 3
    BOLD = 4
    ITALIC = 5
    STRIKE = 6
    SPOILER = 7
    CODE = 8


BLOCK_KINDS: Final = frozenset({WrapKind.QUOTE, WrapKind.PRE})


class Wrap(NamedTuple):
    """One wrapper around a piece (a plain tuple, so stacks hash and compare fast)."""

    kind: WrapKind
    arg: str = ""
    """PRE: language; HEADING: level; LINK: address; CODE: the backtick delimiter."""
    flag: bool = False
    """PRE: the code contains a fence of its own; CODE: pad the delimiter with spaces."""
    ident: int = 0
    """Keeps two adjacent code blocks apart (equal wraps merge)."""
    fence: int = 3
    """PRE: how many backticks a fence around this code needs (more than any run inside it)."""


class Kind(IntEnum):
    TEXT = 0
    URL = 1
    RAW = 2
    MARKUP = 3
    """Structure the layout added (bullets, indentation, rules): never escaped."""


class Brk(IntEnum):
    """How good a place to cut is; higher is better."""

    GLUE = 0
    WORD = 1
    LINE = 2
    PARA = 3


@dataclass(frozen=True, slots=True)
class Piece:
    text: str
    wraps: tuple[Wrap, ...] = ()
    kind: Kind = Kind.TEXT
    brk: Brk | None = None
    """Set on separators only."""
    plain_only: bool = False
    """Shown in plain text only (a link's `` (url)``)."""

    @property
    def in_code(self) -> bool:
        return any(wrap.kind == WrapKind.PRE for wrap in self.wraps)


_KIND_OF: Final = {TextKind.TEXT: Kind.TEXT, TextKind.URL: Kind.URL, TextKind.RAW: Kind.RAW}
_WRAP_OF: Final = {style: WrapKind[style.name] for style in Style}


@dataclass(frozen=True, slots=True)
class _Ctx:
    wraps: tuple[Wrap, ...] = ()
    indent: str = ""
    depth: int = 0
    joiner: tuple[str, Brk] = ("\n\n", Brk.PARA)


def lower(blocks: Iterable[Block], *, bullets: Sequence[str]) -> list[Piece]:
    """Flatten parsed blocks into pieces; ``bullets`` are the list markers by nesting depth."""
    lowerer = _Lowerer(tuple(bullets))
    lowerer.blocks(tuple(blocks), _Ctx())
    return lowerer.out


def lower_literal(text: str) -> list[Piece]:
    """``text`` as text, not Markdown: its lines as written (trailing spaces dropped), with line
    and paragraph breaks between. For a reply whose Markdown shows nothing once rendered."""
    pieces: list[Piece] = []
    for paragraph in re.split(r"\n[ \t]*\n\s*", text.strip()):
        if pieces:
            pieces.append(Piece("\n\n", brk=Brk.PARA))
        for number, line in enumerate(paragraph.split("\n")):
            if number:
                pieces.append(Piece("\n", brk=Brk.LINE))
            pieces.append(Piece(line.rstrip()))
    return pieces


def block_prefix(a: tuple[Wrap, ...], b: tuple[Wrap, ...]) -> tuple[Wrap, ...]:
    """The block wrappers (quote, code) that ``a`` and ``b`` share, outermost first."""
    shared: list[Wrap] = []
    for left, right in zip(a, b, strict=False):
        if left != right or left.kind not in BLOCK_KINDS:
            break
        shared.append(left)
    return tuple(shared)


def longest_backtick_run(text: str) -> int:
    longest = run = 0
    for char in text:
        run = run + 1 if char == "`" else 0
        longest = max(longest, run)
    return longest


def code_wrap(text: str) -> Wrap:
    """The inline-code wrapper for ``text``: a backtick run longer than any inside it."""
    delimiter = "`" * (longest_backtick_run(text) + 1)
    return Wrap(WrapKind.CODE, delimiter, text.startswith("`") or text.endswith("`"))


_Mark = Style | None
"""An inline style, or None for the link."""


def _nesting(line: Line, drop: frozenset[Style]) -> list[list[_Mark]]:
    """Per span: its styles and link, outermost first.

    A style that started earlier, or lasts longer, encloses the others, so
    ``~~a **b**~~`` nests as written instead of closing ``~~`` to open ``**``.
    """
    marks = [[None, *(span.styles - drop)] if span.href else list(span.styles - drop) for span in line]
    starts: list[dict[_Mark, int]] = []
    for index, here in enumerate(marks):
        before = starts[-1] if starts else {}
        starts.append({mark: before.get(mark, index) if _continues(line, index, mark) else index for mark in here})
    ends: list[dict[_Mark, int]] = [{} for _ in marks]
    for index in range(len(marks) - 1, -1, -1):
        after = ends[index + 1] if index + 1 < len(marks) else {}
        ends[index] = {
            mark: after.get(mark, index) if _continues(line, index + 1, mark) else index for mark in marks[index]
        }
    return [
        sorted(here, key=lambda mark, i=index: (starts[i][mark], -ends[i][mark], 0 if mark is None else int(mark)))
        for index, here in enumerate(marks)
    ]


def _continues(line: Line, index: int, mark: _Mark) -> bool:
    """Whether ``mark`` runs on from span ``index - 1`` into span ``index``."""
    if index <= 0 or index >= len(line):
        return False
    before, here = line[index - 1], line[index]
    if mark is None:
        return before.href is not None and before.href == here.href
    return mark in before.styles and mark in here.styles and mark is not Style.CODE


@dataclass(slots=True)
class _Lowerer:
    bullets: tuple[str, ...]
    out: list[Piece] = field(default_factory=list)
    pending: tuple[str, Brk] | None = None
    ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def emit(self, piece: Piece) -> None:
        if not piece.text:
            return
        if self.pending is not None and self.out:
            text, brk = self.pending
            self.out.append(Piece(text, block_prefix(self.out[-1].wraps, piece.wraps), Kind.MARKUP, brk))
        self.pending = None
        self.out.append(piece)

    def sep(self, text: str, brk: Brk) -> None:
        if not self.out:
            return
        if self.pending is None or (brk, len(text)) > (self.pending[1], len(self.pending[0])):
            self.pending = (text, brk)

    def blocks(self, blocks: Sequence[Block], ctx: _Ctx) -> None:
        for index, block in enumerate(blocks):
            if index:
                self.sep(*ctx.joiner)
            self.block(block, ctx, glued=False)

    def block(self, block: Block, ctx: _Ctx, *, glued: bool) -> None:
        if isinstance(block, Paragraph):
            self.lines(block.lines, ctx, (), frozenset(), glued=glued)
        elif isinstance(block, Heading):
            heading = (Wrap(WrapKind.HEADING, str(block.level)),)
            self.lines(block.lines, ctx, heading, frozenset({Style.BOLD}), glued=glued)
        elif isinstance(block, CodeBlock):
            self.code(block)
        elif isinstance(block, Quote):
            self.blocks(block.blocks, replace(ctx, wraps=(Wrap(WrapKind.QUOTE),)))
        elif isinstance(block, ListBlock):
            self.list(block, ctx)
        elif isinstance(block, Table):
            self.blocks(table_blocks(block), ctx)
        elif isinstance(block, Rule):
            self.indent(ctx)
            self.emit(Piece(RULE_TEXT, ctx.wraps, Kind.MARKUP))

    def indent(self, ctx: _Ctx) -> None:
        if ctx.indent:
            self.emit(Piece(ctx.indent, ctx.wraps, Kind.MARKUP))

    def lines(
        self, lines: Sequence[Line], ctx: _Ctx, extra: tuple[Wrap, ...], drop: frozenset[Style], *, glued: bool
    ) -> None:
        for index, line in enumerate(lines):
            if index:
                self.sep("\n", Brk.LINE)
            if index or not glued:
                self.indent(ctx)
            self.spans(line, ctx.wraps + extra, drop)

    def spans(self, line: Line, base: tuple[Wrap, ...], drop: frozenset[Style]) -> None:
        order = _nesting(line, drop)
        for href, grouped in itertools.groupby(enumerate(line), key=lambda item: item[1].href):
            group = list(grouped)
            names_itself = href is not None and same_address("".join(span.text for _, span in group), href)
            for index, span in group:
                wraps = list(base)
                for mark in order[index]:
                    if mark is None:
                        if href is not None and not names_itself:
                            wraps.append(Wrap(WrapKind.LINK, href))
                    else:
                        wraps.append(code_wrap(span.text) if mark is Style.CODE else Wrap(_WRAP_OF[mark]))
                kind = Kind.URL if names_itself and Style.CODE not in span.styles else _KIND_OF[span.kind]
                self.emit(Piece(span.text, tuple(wraps), kind))
            if href is not None and not names_itself:
                self.emit(Piece(f" ({href})", base, Kind.TEXT, plain_only=True))

    def code(self, block: CodeBlock) -> None:
        fence = max(3, longest_backtick_run(block.text) + 1)
        wrap = Wrap(WrapKind.PRE, block.lang, "```" in block.text, next(self.ids), fence)
        blank, first = 0, True
        for line in block.text.split("\n"):
            if not line.strip():
                blank += 1
                continue
            if not first:
                self.sep("\n" * (blank + 1), Brk.PARA if blank else Brk.LINE)
            self.emit(Piece(line, (wrap,), Kind.TEXT))
            blank, first = 0, False

    def list(self, block: ListBlock, ctx: _Ctx) -> None:
        for number, item in enumerate(block.items, start=block.start):
            if number != block.start:
                self.sep("\n", Brk.LINE)
            marker = f"{number}. " if block.ordered else self.bullets[min(ctx.depth, len(self.bullets) - 1)]
            self.emit(Piece(ctx.indent + marker, ctx.wraps, Kind.MARKUP))
            inner = _Ctx(ctx.wraps, ctx.indent + " " * len(marker), ctx.depth + 1, ("\n", Brk.LINE))
            for index, child in enumerate(item):
                glued = index == 0 and isinstance(child, Paragraph | Heading)
                if not glued:
                    self.sep("\n", Brk.LINE)
                self.block(child, inner, glued=glued)

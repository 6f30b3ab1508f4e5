"""The intermediate form model Markdown is parsed into, once, before any dialect is chosen.

A document is a tuple of blocks. Text inside a block is a tuple of lines, and a
line is a tuple of :class:`Span` values: a run of text with one set of styles and
at most one link target. The form is deliberately small: it holds only what the
three chat dialects can show, so every renderer handles every case.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Style(IntEnum):
    """Inline styles, in the order they nest when rendered (outermost first)."""

    BOLD = 1
    ITALIC = 2
    STRIKE = 3
    SPOILER = 4
    CODE = 5


class TextKind(IntEnum):
    TEXT = 0
    """Ordinary text: escaped as each dialect requires."""
    URL = 1
    """A bare web address: never given Markdown escapes, so platforms still linkify it."""
    RAW = 2
    """A platform entity such as ``<@U123>`` or ``<#C42>``: passed through where the platform knows it."""


@dataclass(frozen=True, slots=True)
class Span:
    text: str
    styles: frozenset[Style] = frozenset()
    href: str | None = None
    """Link target, already checked to use an allowed scheme."""
    kind: TextKind = TextKind.TEXT


Line = tuple[Span, ...]


@dataclass(frozen=True, slots=True)
class Paragraph:
    lines: tuple[Line, ...]


@dataclass(frozen=True, slots=True)
class Heading:
    level: int
    lines: tuple[Line, ...]


@dataclass(frozen=True, slots=True)
class CodeBlock:
    lang: str
    """Language tag, sanitised to ``[A-Za-z0-9_+#.-]``; empty when none was given."""
    text: str


@dataclass(frozen=True, slots=True)
class Quote:
    blocks: tuple[Block, ...]


@dataclass(frozen=True, slots=True)
class ListBlock:
    ordered: bool
    start: int
    items: tuple[tuple[Block, ...], ...]


@dataclass(frozen=True, slots=True)
class Table:
    header: tuple[Line, ...]
    rows: tuple[tuple[Line, ...], ...]
    aligns: tuple[str, ...]
    """Per column: ``"left"``, ``"right"``, ``"center"`` or ``""``."""


@dataclass(frozen=True, slots=True)
class Rule:
    pass


Block = Paragraph | Heading | CodeBlock | Quote | ListBlock | Table | Rule


def line_text(line: Line, *, with_urls: bool = False) -> str:
    """The visible text of a line; with ``with_urls``, each link is followed by `` (url)``."""
    out: list[str] = []
    for index, span in enumerate(line):
        out.append(span.text)
        following = line[index + 1].href if index + 1 < len(line) else None
        if with_urls and span.href and following != span.href and not _names_itself(line, index):
            out.append(f" ({span.href})")
    return "".join(out)


def _names_itself(line: Line, last: int) -> bool:
    """Whether the link ending at ``line[last]`` shows its own address as its text."""
    href = line[last].href
    first = last
    while first > 0 and line[first - 1].href == href:
        first -= 1
    return same_address("".join(span.text for span in line[first : last + 1]), href or "")


def same_address(text: str, href: str) -> bool:
    """True when a link's text is just its address (so showing the address again adds nothing)."""
    text = text.strip()
    return text == href or f"mailto:{text}" == href or text.rstrip("/") == href.rstrip("/")


_EMPHASIS = frozenset({Style.BOLD, Style.ITALIC, Style.STRIKE, Style.SPOILER})


def tidy(spans: list[Span]) -> Line:
    """Merge equal neighbours, trim the line, and keep emphasis edges off whitespace.

    Chat dialects only close ``**`` or ``*`` right after a non-space character, so
    whitespace at the edge of a styled run moves outside the style.
    """
    parts: list[Span] = []
    for span in spans:
        if Style.CODE in span.styles or span.kind != TextKind.TEXT or not span.styles & _EMPHASIS:
            parts.append(span)
            continue
        core = span.text.strip()
        head = span.text[: len(span.text) - len(span.text.lstrip())]
        tail = span.text[len(head) + len(core) :]
        for piece in (head, core, tail):
            if piece:
                parts.append(Span(piece, span.styles, span.href))
    for index, span in enumerate(parts):
        if span.text.isspace() and Style.CODE not in span.styles and span.styles & _EMPHASIS:
            before = parts[index - 1].styles if index else frozenset()
            after = parts[index + 1].styles if index + 1 < len(parts) else frozenset()
            keep = span.styles & before & after | (span.styles - _EMPHASIS)
            parts[index] = Span(span.text, keep, span.href, span.kind)
    merged: list[Span] = []
    for span in parts:
        if merged and (merged[-1].styles, merged[-1].href, merged[-1].kind) == (span.styles, span.href, span.kind):
            merged[-1] = Span(merged[-1].text + span.text, span.styles, span.href, span.kind)
        elif span.text:
            merged.append(span)
    while merged and merged[0].text.isspace() and Style.CODE not in merged[0].styles:
        merged.pop(0)
    while merged and merged[-1].text.isspace() and Style.CODE not in merged[-1].styles:
        merged.pop()
    if merged and Style.CODE not in merged[0].styles:
        merged[0] = Span(merged[0].text.lstrip(), merged[0].styles, merged[0].href, merged[0].kind)
    if merged and Style.CODE not in merged[-1].styles:
        merged[-1] = Span(merged[-1].text.rstrip(), merged[-1].styles, merged[-1].href, merged[-1].kind)
    return tuple(merged)

"""What a markup dialect must say about the layout's pieces, and the plain-text dialect.

A dialect turns one piece into text in three steps the chunker can measure
separately: the *effective* wrapper stack (a dialect may drop wrappers it cannot
nest), the opening and closing strings of each wrapper, and the piece's text
with the dialect's escaping. Escaping must work character by character
(``text(a + b) == text(a) + text(b)``) so a long piece can be cut anywhere.
"""

from __future__ import annotations

import abc
from typing import ClassVar

from adapters.contract import Markup
from gateway.delivery.formatting.layout import Kind, Wrap, WrapKind

Stack = tuple[Wrap, ...]


class Dialect(abc.ABC):
    """One way of spelling the layout. Subclasses are stateless."""

    markup: ClassVar[Markup]
    bullets: ClassVar[tuple[str, ...]] = ("• ", "◦ ", "▪ ")
    """List markers by nesting depth (the last one repeats)."""
    shows_link_urls: ClassVar[bool] = False
    """Whether link addresses are written out after the link text (plain text only)."""

    def effective(self, wraps: Stack) -> Stack:
        """The wrappers this dialect actually writes for a piece wrapped in ``wraps``."""
        return wraps

    @abc.abstractmethod
    def open(self, wrap: Wrap) -> str:
        """Text that starts ``wrap``."""

    @abc.abstractmethod
    def close(self, wrap: Wrap) -> str:
        """Text that ends ``wrap``."""

    @abc.abstractmethod
    def text(self, text: str, kind: Kind, stack: Stack) -> str:
        """``text`` (of one piece, inside ``stack``) as this dialect must spell it."""

    def separator(self, text: str, stack: Stack) -> str:
        """A line or paragraph break inside ``stack``."""
        return text


def quote_lines(text: str, stack: Stack, prefix: str = "> ") -> str:
    """For line-prefixed quotes: repeat the quote marker after every newline inside a quote."""
    if stack and stack[0].kind == WrapKind.QUOTE:
        return text.replace("\n", "\n" + prefix)
    return text


class PlainText(Dialect):
    """No markup: markers dropped, link addresses shown after their text, code fenced with backticks.

    A fence is longer than any backtick run in its code, as in Markdown, so code that
    itself shows a fence stays readable.
    """

    markup = Markup.PLAIN
    shows_link_urls = True

    def open(self, wrap: Wrap) -> str:
        if wrap.kind == WrapKind.PRE:
            return "`" * wrap.fence + wrap.arg + "\n"
        return "> " if wrap.kind == WrapKind.QUOTE else ""

    def close(self, wrap: Wrap) -> str:
        return "\n" + "`" * wrap.fence if wrap.kind == WrapKind.PRE else ""

    def text(self, text: str, kind: Kind, stack: Stack) -> str:
        return text

    def separator(self, text: str, stack: Stack) -> str:
        return quote_lines(text, stack)

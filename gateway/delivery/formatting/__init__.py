"""Formatting replies for chat platforms: Markdown in, fitting chunks of each platform's markup out.

Usage::

    from gateway.delivery.formatting import render

    for chunk in render(reply, Markup.TELEGRAM_HTML, max_length=4096, length_unit="utf16"):
        try:
            await send(chunk.text, parse_mode="HTML")
        except MarkupRejected:
            log.warning("delivery.markup_rejected", ...)
            await send(chunk.plain)

The model's Markdown is parsed once (:mod:`.markdown`), flattened into pieces
(:mod:`.layout`) and cut into chunks (:mod:`.chunking`), each measured and written (:mod:`.targets`) in the
dialect's own spelling (:mod:`.telegram_html`, :mod:`.discord_md`,
:mod:`.slack_mrkdwn`, :class:`.dialect.PlainText`). The limit and how it is
counted come from the caller: each adapter's ``capabilities`` are their only
source. Pure text processing: no platform library is imported here.
"""

from __future__ import annotations

import re
from typing import Final

from adapters.contract import Markup
from gateway.delivery.formatting.chunking import MIN_LENGTH, Chunk, split
from gateway.delivery.formatting.dialect import Dialect, PlainText
from gateway.delivery.formatting.discord_md import DiscordMarkdown
from gateway.delivery.formatting.layout import lower, lower_literal
from gateway.delivery.formatting.lengths import LengthUnit, measure
from gateway.delivery.formatting.markdown import parse
from gateway.delivery.formatting.slack_mrkdwn import SlackMrkdwn
from gateway.delivery.formatting.telegram_html import TelegramHTML

__all__ = ["MIN_LENGTH", "Chunk", "LengthUnit", "dialect_for", "measure", "render"]

_DIALECTS: Final[dict[Markup, Dialect]] = {
    Markup.PLAIN: PlainText(),
    Markup.TELEGRAM_HTML: TelegramHTML(),
    Markup.DISCORD_MARKDOWN: DiscordMarkdown(),
    Markup.SLACK_MRKDWN: SlackMrkdwn(),
}
_PLAIN: Final = _DIALECTS[Markup.PLAIN]


def dialect_for(markup: Markup) -> Dialect:
    """The dialect object that writes ``markup``."""
    return _DIALECTS[Markup(markup)]


_SPECIAL: Final = re.compile(r"[^ -~]|[\\`*_~\[\]<>&|#!()]|://|www\.|\s\s|\s$")
"""Anything Markdown or a dialect might treat specially (or that needs a closer look): markup
characters, URLs, runs of whitespace, anything outside printable ASCII (line breaks included)."""


def _as_is(text: str, max_length: int, length_unit: str) -> str | None:
    """``text`` itself when it is one short line of plain ASCII prose that every dialect writes
    unchanged (most short replies); None when it needs the full pipeline."""
    text = text.strip()
    if not text or len(text) > max_length or not text[0].isalpha() or _SPECIAL.search(text):
        return None
    return text


def render(markdown_text: str, markup: Markup, *, max_length: int, length_unit: str) -> list[Chunk]:
    """Convert model Markdown into chunks of ``markup`` that each fit ``max_length``.

    ``length_unit`` is ``"utf16"`` (Telegram counts UTF-16 code units) or ``"chars"``.
    Both ``Chunk.text`` and ``Chunk.plain`` of every chunk fit the limit, measured on
    what is sent, tags and escapes included (stricter than Telegram, which counts the
    text left after parsing). Cuts fall on
    a blank line, then a line break, then a space, and only then inside a word;
    formatting and code fences open at a cut are closed and reopened. Nothing is
    dropped except whitespace at the cuts. Empty or blank input gives no chunks;
    any other input gives at least one: Markdown that shows nothing once rendered
    (a lone ``#`` or ``>``, an opening fence, ``[]()``) is sent as written, escaped
    so the platform shows it literally.

    Raises ``ValueError`` for a limit below :data:`MIN_LENGTH` or an unknown unit.
    """
    measure("", length_unit)  # rejects an unknown unit before any work
    if max_length < MIN_LENGTH:
        raise ValueError(f"max_length must be at least {MIN_LENGTH}, got {max_length}")
    simple = _as_is(markdown_text, max_length, length_unit)
    if simple is not None:
        return [Chunk(simple, simple)]
    dialect = dialect_for(markup)
    pieces = lower(parse(markdown_text), bullets=dialect.bullets)
    chunks = split(pieces, dialect, _PLAIN, limit=max_length, unit=length_unit)
    if chunks or not markdown_text.strip():
        return chunks
    return split(lower_literal(markdown_text), dialect, _PLAIN, limit=max_length, unit=length_unit)

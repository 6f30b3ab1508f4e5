"""Telegram's HTML parse mode, as strict as the real Bot API is about it.

:func:`parse_html` returns the text a user would see (tags removed, entities
decoded) or raises :class:`ParseError` with the wording Telegram uses after
"Bad Request: can't parse entities: ". Only the tags Telegram documents are
accepted; every start tag needs its own end tag, nested properly.
"""

from __future__ import annotations

import html
import re

SUPPORTED_TAGS = frozenset(
    {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span", "tg-spoiler", "a", "tg-emoji",
     "code", "pre", "blockquote"}
)  # fmt: skip
TAG = re.compile(r"<\s*(/?)\s*([a-zA-Z][a-zA-Z0-9-]*)([^>]*)>")
ENTITY = re.compile(r"&(#\d+|#x[0-9a-fA-F]+|lt|gt|amp|quot);")


class ParseError(ValueError):
    """The markup is not valid Telegram HTML; the message is Telegram's explanation."""


def utf16_length(text: str) -> int:
    return len(text.encode("utf-16-le")) // 2


def parse_html(markup: str) -> str:
    """The visible text of ``markup``; raises :class:`ParseError` like Telegram does."""
    visible: list[str] = []
    open_tags: list[str] = []
    position = 0
    while position < len(markup):
        char = markup[position]
        if char == "<":
            position = _tag(markup, position, open_tags)
        elif char == "&":
            match = ENTITY.match(markup, position)
            if match is None:
                visible.append("&")
                position += 1
            else:
                visible.append(html.unescape(match.group(0)))
                position = match.end()
        elif char == ">":
            raise ParseError(f"Unexpected end of tag at byte offset {_byte_offset(markup, position)}")
        else:
            visible.append(char)
            position += 1
    if open_tags:
        raise ParseError(f'Can\'t find end tag corresponding to start tag "{open_tags[-1]}"')
    return "".join(visible)


def _tag(markup: str, position: int, open_tags: list[str]) -> int:
    offset = _byte_offset(markup, position)
    match = TAG.match(markup, position)
    if match is None:
        raise ParseError(f"Unclosed start tag at byte offset {offset}")
    closing, name = match.group(1) == "/", match.group(2).lower()
    if closing:
        if not open_tags:
            raise ParseError(f'Unexpected end tag at byte offset {offset}')
        if open_tags[-1] != name:
            raise ParseError(
                f'Unmatched end tag at byte offset {offset}, expected "</{open_tags[-1]}>", found "</{name}>"'
            )
        open_tags.pop()
    else:
        if name not in SUPPORTED_TAGS:
            raise ParseError(f'Unsupported start tag "{name}" at byte offset {offset}')
        open_tags.append(name)
    return match.end()


def _byte_offset(text: str, position: int) -> int:
    return len(text[:position].encode("utf-8"))

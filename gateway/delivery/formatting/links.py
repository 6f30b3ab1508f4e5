"""Links in model text: where a link points, whether it may be linked, and bare addresses.

Every dialect links only ``http``, ``https``, ``mailto`` and ``tg`` addresses; a
link to anything else (``javascript:``, ``file:``, a relative path) is shown as
its text alone.
"""

from __future__ import annotations

import re
from typing import Final

ALLOWED_SCHEMES: Final = ("http://", "https://", "mailto:", "tg://")
AUTOLINK: Final = re.compile(r"<([A-Za-z][A-Za-z0-9+.-]{1,31}:[^<>\s]*)>")
EMAIL: Final = re.compile(
    r"<([A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)+)>"
)
ENTITY: Final = re.compile(r"<(?:[@#!][^<>\s]*|a?:\w+:\d+|t:-?\d+(?::[tTdDfFR])?)>")
"""Slack (``<@U1>``, ``<#C1|name>``, ``<!here>``) and Discord (``<:emoji:1>``, ``<t:1:R>``) entities."""

_BARE_URL: Final = re.compile(r"https?://[^\s<>]+", re.IGNORECASE)
_URL_TRAILING: Final = ".,:;!?'\"*_~"
_UNESCAPE: Final = re.compile(r"\\([!-/:-@\[-`{-~])")


def safe_href(url: str) -> str | None:
    """``url`` if its scheme is one every platform may link to, else None."""
    url = url.strip()
    return url if url.lower().startswith(ALLOWED_SCHEMES) else None


def bare_url(src: str, pos: int) -> str | None:
    """The web address starting at ``pos``, without the punctuation that ends a sentence."""
    if pos and (src[pos - 1].isalnum() or src[pos - 1] in "/\\"):
        return None
    found = _BARE_URL.match(src, pos)
    if found is None:
        return None
    url = found.group()
    while url and (url[-1] in _URL_TRAILING or (url[-1] == ")" and url.count("(") < url.count(")"))):
        url = url[:-1]
    return url if len(url) > url.index("//") + 2 else None


def link_destination(src: str, pos: int) -> tuple[str, int] | None:
    """Parse ``(dest "title")`` at ``pos``; return the destination and the index after ``)``."""
    if not src.startswith("(", pos):
        return None
    pos += 1
    while pos < len(src) and src[pos] in " \t\n":
        pos += 1
    if src.startswith("<", pos):
        end = src.find(">", pos + 1)
        if end < 0 or "\n" in src[pos:end]:
            return None
        dest, pos = src[pos + 1 : end], end + 1
    else:
        start, depth = pos, 0
        while pos < len(src) and not src[pos].isspace():
            char = src[pos]
            if char == "\\" and pos + 1 < len(src):
                pos += 2
                continue
            if char == "(":
                depth += 1
            elif char == ")":
                if depth == 0:
                    break
                depth -= 1
            pos += 1
        dest = src[start:pos]
    while pos < len(src) and src[pos] in " \t\n":
        pos += 1
    if pos < len(src) and src[pos] in "\"'(":
        closing = ")" if src[pos] == "(" else src[pos]
        end = src.find(closing, pos + 1)
        if end < 0:
            return None
        pos = end + 1
        while pos < len(src) and src[pos] in " \t\n":
            pos += 1
    if not src.startswith(")", pos):
        return None
    return _UNESCAPE.sub(r"\1", dest).replace(" ", "%20"), pos + 1

"""Slack's mrkdwn.

``*bold*``, ``_italic_``, ``~strike~``, inline code, ``` fences (Slack shows no
language, so the tag is dropped), ``<url|text>`` links and ``>`` quotes.
Headings become bold lines, lists use ``•``. ``&``, ``<`` and ``>`` are escaped
everywhere except in Slack's own entities (``<@U123>``, ``<#C123>``, ``<!here>``),
which pass through. Slack cannot nest styles inside link text, nor escape a
backtick inside inline code; those styles are dropped rather than garbled.
"""

from __future__ import annotations

from typing import Final

from adapters.contract import Markup
from gateway.delivery.formatting.dialect import Dialect, Stack, quote_lines
from gateway.delivery.formatting.layout import Kind, Wrap, WrapKind

_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# Slack has no escape character; a zero-width space after a literal backtick keeps it from
# pairing with another one into code or a fence.
_TEXT_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", "`": "`\u200b"})
_URL_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "%3C", ">": "%3E", "|": "%7C", " ": "%20"})
_INLINE: Final = frozenset({WrapKind.BOLD, WrapKind.ITALIC, WrapKind.STRIKE, WrapKind.SPOILER, WrapKind.CODE})
_MARKERS: Final = {
    WrapKind.HEADING: "*",
    WrapKind.BOLD: "*",
    WrapKind.ITALIC: "_",
    WrapKind.STRIKE: "~",
    WrapKind.SPOILER: "",
    WrapKind.CODE: "`",
}


class SlackMrkdwn(Dialect):
    markup = Markup.SLACK_MRKDWN

    def effective(self, wraps: Stack) -> Stack:
        kinds = {wrap.kind for wrap in wraps}
        if WrapKind.LINK in kinds:
            return tuple(wrap for wrap in wraps if wrap.kind not in _INLINE)
        if WrapKind.CODE in kinds:
            code = next(wrap for wrap in wraps if wrap.kind == WrapKind.CODE)
            keep = _INLINE if len(code.arg) == 1 else _INLINE - {WrapKind.CODE}
            return tuple(wrap for wrap in wraps if wrap.kind not in _INLINE or wrap.kind in keep)
        return wraps

    def open(self, wrap: Wrap) -> str:
        if wrap.kind == WrapKind.QUOTE:
            return "> "
        if wrap.kind == WrapKind.PRE:
            return "```\n"
        if wrap.kind == WrapKind.LINK:
            return f"<{wrap.arg.translate(_URL_ESCAPES)}|"
        return _MARKERS[wrap.kind]

    def close(self, wrap: Wrap) -> str:
        if wrap.kind == WrapKind.QUOTE:
            return ""
        if wrap.kind == WrapKind.PRE:
            return "\n```"
        if wrap.kind == WrapKind.LINK:
            return ">"
        return _MARKERS[wrap.kind]

    def text(self, text: str, kind: Kind, stack: Stack) -> str:
        if kind in (Kind.MARKUP, Kind.RAW):
            return text
        inner = stack[-1] if stack else None
        if inner is not None and (inner.kind == WrapKind.CODE or (inner.kind == WrapKind.PRE and not inner.flag)):
            return text.translate(_ESCAPES)
        return text.translate(_TEXT_ESCAPES)

    def separator(self, text: str, stack: Stack) -> str:
        return quote_lines(text, stack)

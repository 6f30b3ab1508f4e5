"""Discord's Markdown.

Discord renders most of what models write, so formatting passes through:
``**bold**``, ``*italic*``, ``~~strike~~``, ``||spoiler||``, inline code, fenced
code with its language, ``[text](url)`` links, ``>`` quotes, ``-`` lists and
``#``/``##``/``###`` headings (deeper headings become bold lines). Characters the
model did *not* mean as formatting (the ``_`` in ``snake_case_name``, the ``*`` in
``2*3*4``) get a backslash, which Discord hides. So do every ``#`` and ``>`` of the
text, so that a line the model did not mean as a heading, subtext or quote (its
``\\# not a heading``) is not shown as one. Escaping is character by character
(the chunker sizes text a character at a time), so a ``-``, ``+`` or ``1.`` that
starts a line of text is left as it is: at worst a line shows as a list item.
Bare URLs are never escaped.
"""

from __future__ import annotations

from typing import Final

from adapters.contract import Markup
from gateway.delivery.formatting.dialect import Dialect, Stack, quote_lines
from gateway.delivery.formatting.layout import Kind, Wrap, WrapKind

_ESCAPES: Final = str.maketrans({char: "\\" + char for char in "\\*_~`|[]#>"})
_URL_ESCAPES: Final = str.maketrans({"(": "%28", ")": "%29", "<": "%3C", ">": "%3E", " ": "%20"})
_FENCE_BREAK: Final = str.maketrans({"`": "`\u200b"})
_MARKERS: Final = {
    WrapKind.BOLD: "**",
    WrapKind.ITALIC: "*",
    WrapKind.STRIKE: "~~",
    WrapKind.SPOILER: "||",
}


class DiscordMarkdown(Dialect):
    markup = Markup.DISCORD_MARKDOWN
    bullets = ("- ",)

    def open(self, wrap: Wrap) -> str:
        kind = wrap.kind
        if kind == WrapKind.QUOTE:
            return "> "
        if kind == WrapKind.PRE:
            return f"```{wrap.arg}\n"
        if kind == WrapKind.HEADING:
            return "#" * int(wrap.arg) + " " if int(wrap.arg) <= 3 else "**"
        if kind == WrapKind.LINK:
            return "["
        if kind == WrapKind.CODE:
            return wrap.arg + (" " if wrap.flag else "")
        return _MARKERS[kind]

    def close(self, wrap: Wrap) -> str:
        kind = wrap.kind
        if kind == WrapKind.QUOTE:
            return ""
        if kind == WrapKind.PRE:
            return "\n```"
        if kind == WrapKind.HEADING:
            return "" if int(wrap.arg) <= 3 else "**"
        if kind == WrapKind.LINK:
            return f"]({wrap.arg.translate(_URL_ESCAPES)})"
        if kind == WrapKind.CODE:
            return (" " if wrap.flag else "") + wrap.arg
        return _MARKERS[kind]

    def text(self, text: str, kind: Kind, stack: Stack) -> str:
        inner = stack[-1] if stack else None
        if inner is not None and inner.kind == WrapKind.PRE:
            # Discord ends a code block at the first ``` anywhere, so break up runs inside the code.
            return text.translate(_FENCE_BREAK) if inner.flag else text
        if (inner is not None and inner.kind == WrapKind.CODE) or kind in (Kind.MARKUP, Kind.URL, Kind.RAW):
            return text
        return text.translate(_ESCAPES)

    def separator(self, text: str, stack: Stack) -> str:
        return quote_lines(text, stack)

"""Telegram's HTML parse mode (``parse_mode=HTML``).

Only the tags Telegram documents are written: ``b i s code pre a blockquote
tg-spoiler``. ``&``, ``<`` and ``>`` are escaped in all text, and ``"`` too in
link addresses, so nothing the model wrote can open a tag or an entity.
Telegram forbids some nestings (bold around code, code inside a link, a quote
inside a quote); :meth:`TelegramHTML.effective` drops the inner wrapper instead.
"""

from __future__ import annotations

from typing import Final

from adapters.contract import Markup
from gateway.delivery.formatting.dialect import Dialect, Stack
from gateway.delivery.formatting.layout import Kind, Wrap, WrapKind

_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
_HREF_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;"})
_EMPHASIS: Final = frozenset({WrapKind.BOLD, WrapKind.ITALIC, WrapKind.STRIKE, WrapKind.SPOILER})
_SIMPLE: Final = {
    WrapKind.QUOTE: "blockquote",
    WrapKind.HEADING: "b",
    WrapKind.BOLD: "b",
    WrapKind.ITALIC: "i",
    WrapKind.STRIKE: "s",
    WrapKind.SPOILER: "tg-spoiler",
    WrapKind.CODE: "code",
}


class TelegramHTML(Dialect):
    markup = Markup.TELEGRAM_HTML

    def effective(self, wraps: Stack) -> Stack:
        kinds = {wrap.kind for wrap in wraps}
        if WrapKind.CODE not in kinds:
            return wraps
        if WrapKind.LINK in kinds:
            return tuple(wrap for wrap in wraps if wrap.kind != WrapKind.CODE)
        return tuple(wrap for wrap in wraps if wrap.kind not in _EMPHASIS and wrap.kind != WrapKind.HEADING)

    def open(self, wrap: Wrap) -> str:
        if wrap.kind == WrapKind.PRE:
            return f'<pre><code class="language-{wrap.arg}">' if wrap.arg else "<pre>"
        if wrap.kind == WrapKind.LINK:
            return f'<a href="{wrap.arg.translate(_HREF_ESCAPES)}">'
        return f"<{_SIMPLE[wrap.kind]}>"

    def close(self, wrap: Wrap) -> str:
        if wrap.kind == WrapKind.PRE:
            return "</code></pre>" if wrap.arg else "</pre>"
        if wrap.kind == WrapKind.LINK:
            return "</a>"
        return f"</{_SIMPLE[wrap.kind]}>"

    def text(self, text: str, kind: Kind, stack: Stack) -> str:
        return text if kind == Kind.MARKUP else text.translate(_ESCAPES)

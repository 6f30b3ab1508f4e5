"""Text PostgreSQL can store: it refuses the NUL character (U+0000) in ``text`` and ``jsonb`` values.

SQLite keeps a NUL as it is; a PostgreSQL ``text`` column rejects it ("invalid byte sequence") and
``jsonb`` rejects its escape (``\\u0000``: "unsupported Unicode escape sequence"). No platform
delivers one in a chat message, but a tool's output or a pasted binary might carry one, and a
message must never be refused for it. The policy: every NUL becomes U+FFFD (the replacement
character, what a decoder shows for bytes it cannot read), in text and inside JSON, so the message
is stored with everything else intact and the change is visible to whoever reads it.
"""

from __future__ import annotations

from typing import Final, overload

__all__ = ["NUL_STANDS_IN", "clean", "clean_json"]

NUL_STANDS_IN: Final = "\ufffd"
_NUL_ESCAPE: Final = "\\u0000"


@overload
def clean(text: str) -> str: ...
@overload
def clean(text: None) -> None: ...
def clean(text: str | None) -> str | None:
    """``text`` with every NUL replaced by U+FFFD (the same string when it holds none)."""
    if text is None or "\0" not in text:
        return text
    return text.replace("\0", NUL_STANDS_IN)


@overload
def clean_json(text: str) -> str: ...
@overload
def clean_json(text: None) -> None: ...
def clean_json(text: str | None) -> str | None:
    """JSON text with every NUL, raw or escaped as ``\\u0000``, replaced by U+FFFD (an escaped backslash before
    ``u0000`` is left alone: ``"\\\\u0000"`` is the six characters ``\\u0000``, not a NUL)."""
    if text is None:
        return None
    text = clean(text)
    if _NUL_ESCAPE not in text:
        return text
    out: list[str] = []
    i = 0
    while i < len(text):
        if text[i] == "\\":
            if text.startswith(_NUL_ESCAPE, i):
                out.append(NUL_STANDS_IN)
                i += len(_NUL_ESCAPE)
                continue
            out.append(text[i : i + 2])
            i += 2
            continue
        out.append(text[i])
        i += 1
    return "".join(out)

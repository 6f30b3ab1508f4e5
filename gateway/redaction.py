"""Masking secrets out of text before it reaches a log.

Two nets: every configured secret value (tokens, keys) is replaced wherever it
appears, and well-known secret shapes are replaced even when nobody configured
them (a key pasted into a chat, a header echoed by a library).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 6

# Start of a secret: not glued to a preceding word, except in Telegram's /bot<token>/ URLs.
_B = r"(?:(?<=/bot)|(?<![A-Za-z0-9]))"

# (clues, pattern, replacement). A pattern can only match text that holds one of its clues, which
# is checked first (a fast search): a substring of the case-folded text, or for shapes built around
# characters every line holds (the ':' and '.' of its timestamp) a short regex that starts with
# that character, which the regex engine finds by jumping from one to the next. Most log lines
# hold none of the clues; running every pattern on every line was about half the cost of writing
# it, and the two timestamp-character shapes alone were three quarters of what was left.
# Replacements keep a harmless prefix so a reader can tell what was hidden.
_SHAPES: tuple[tuple[tuple[str, ...] | re.Pattern[str], re.Pattern[str], str], ...] = (
    (("sk-ant-",), re.compile(_B + r"sk-ant-[A-Za-z0-9_\-]{6,}"), "sk-ant-" + MASK),
    (("sk-",), re.compile(_B + r"sk-(?:proj-|svcacct-)?[A-Za-z0-9_\-]{16,}"), "sk-" + MASK),
    (("xox",), re.compile(_B + r"(xox[abposre])-[A-Za-z0-9\-]{6,}"), r"\1-" + MASK),
    (("xapp-",), re.compile(_B + r"xapp-[A-Za-z0-9\-]{6,}"), "xapp-" + MASK),
    # Telegram bot tokens: "<bot id>:<35 characters>", also inside /bot<token>/ URLs.
    (re.compile(r":[A-Za-z0-9_\-]{30}"), re.compile(_B + r"(\d{5,}):[A-Za-z0-9_\-]{30,}"), r"\1:" + MASK),
    # Discord bot tokens: three base64url parts separated by dots.
    (
        re.compile(r"\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27}"),
        re.compile(_B + r"[MNO][A-Za-z0-9_\-]{23,27}\.[A-Za-z0-9_\-]{6,7}\.[A-Za-z0-9_\-]{27,}"),
        MASK,
    ),
    (("bearer",), re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*"), r"\1 " + MASK),
    (
        ("key", "token", "secret", "password"),
        re.compile(r"(?i)\b(x-api-key|api[_-]?key|access[_-]?token|token|secret|password)([\"']?\s*[:=]\s*[\"']?)"
                   r"(?!\[REDACTED\])[^\s\"',}&]{8,}"),
        r"\1\2" + MASK,
    ),
)


class Redactor:
    """Replaces configured secrets and known secret shapes in text."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets: list[str] = []
        self.add_secrets(secrets)

    def add_secrets(self, secrets: Iterable[str]) -> None:
        merged = {*self._secrets, *(s for s in secrets if s and len(s) >= MIN_SECRET_LENGTH)}
        # Longest first, so a secret that contains another is masked whole.
        self._secrets = sorted(merged, key=len, reverse=True)

    def __call__(self, text: str) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        lowered = text.casefold()
        for clues, pattern, replacement in _SHAPES:
            if isinstance(clues, re.Pattern):
                if clues.search(text):
                    text = pattern.sub(replacement, text)
                continue
            for clue in clues:
                if clue in lowered:
                    text = pattern.sub(replacement, text)
                    break
        return text

"""Masking secrets out of every text that leaves the process.

Two nets: every configured secret value (tokens, keys) is replaced wherever it
appears, and well-known secret shapes are replaced even when nobody configured
them (a key pasted into a chat, a header echoed by a library).

:data:`redactor` is the one place that knows the configured secrets: whoever loads
the configuration adds them (the CLI, the doctor, :class:`gateway.app.Gateway`),
and each exit masks through it once: gateway.log, /health and /metrics, replies to
users, the output of the ``switchboard`` commands and backups' manifests.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from config import ConfigError, LoadedConfig, load_config
from config.loader import environment_secrets

MASK = "[REDACTED]"
MIN_SECRET_LENGTH = 6

# Start of a secret: not glued to a preceding word, except in Telegram's /bot<token>/ URLs.
_B = r"(?:(?<=/bot)|(?<![A-Za-z0-9]))"

# (clues, pattern, replacement). A pattern can only match text that holds one of its clues, which
# is checked first (a fast search): a substring of the case-folded text, or for shapes built around
# characters every line holds (the ':' and '.' of its timestamp) a short regex that starts with
# that character, which the regex engine finds by jumping from one to the next. Most log lines
# hold none of the clues, so they are written without running any pattern.
# Replacements keep a harmless prefix so a reader can tell what was hidden.
_Shape = tuple[tuple[str, ...] | re.Pattern[str], re.Pattern[str], str]

# Credential formats: text shaped like these is a credential wherever it appears.
_FORMATS: tuple[_Shape, ...] = (
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
)

# Values after a word that announces a secret: right in a log line or an error, but in a chat reply
# (``api_key = os.environ["KEY"]`` in a code example) such text is the answer, not a leak.
_KEYWORDS: tuple[_Shape, ...] = (
    (("bearer",), re.compile(r"(?i)\b(bearer)\s+[A-Za-z0-9._~+/\-]{8,}=*"), r"\1 " + MASK),
    (
        ("key", "token", "secret", "password"),
        re.compile(r"(?i)\b(x-api-key|api[_-]?key|access[_-]?token|token|secret|password)([\"']?\s*[:=]\s*[\"']?)"
                   r"(?!\[REDACTED\])[^\s\"',}&]{8,}"),
        r"\1\2" + MASK,
    ),
)
_SHAPES = _FORMATS + _KEYWORDS


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
        """Every net: configured secrets, credential formats, and values after ``token=``, ``Bearer`` and the like."""
        return self._mask(text, _SHAPES)

    def credentials(self, text: str) -> str:
        """Configured secrets and credential formats only: for text written for a person (a chat reply)."""
        return self._mask(text, _FORMATS)

    def _mask(self, text: str, shapes: tuple[_Shape, ...]) -> str:
        for secret in self._secrets:
            if secret in text:
                text = text.replace(secret, MASK)
        lowered = text.casefold()
        for clues, pattern, replacement in shapes:
            if isinstance(clues, re.Pattern):
                if clues.search(text):
                    text = pattern.sub(replacement, text)
                continue
            for clue in clues:
                if clue in lowered:
                    text = pattern.sub(replacement, text)
                    break
        return text


redactor = Redactor()
"""The process-wide redactor (see the module's docstring)."""


def redact_values(value: Any, redact: Redactor = redactor) -> Any:
    """A copy of a JSON-like value with every string in it masked; mapping keys are kept as they are."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {key: redact_values(item, redact) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [redact_values(item, redact) for item in value]
    return value


def load_config_masked(config_path: Path | None = None, *, create_home: bool = False) -> LoadedConfig:
    """:func:`config.load_config`, with the secrets it holds added to :data:`redactor` before anything is shown.

    When the configuration cannot be loaded, the ``ConfigError`` is raised after the values of the
    conventional variables (environment and the home's ``.env``) were added instead: its message
    may quote one of them.
    """
    try:
        loaded = load_config(config_path, create_home=create_home)
    except ConfigError:
        redactor.add_secrets(environment_secrets())
        raise
    redactor.add_secrets(loaded.secrets())
    return loaded

"""What the model should know about the chat platform it is answering on.

One short paragraph per platform: which formatting renders there and how long a
message may be. Operators can replace any hint (or add one for another platform)
through config; the mapping is passed in, never read here::

    platform_hint("discord")                                  # the built-in text
    platform_hint("discord", {"discord": "Keep it short."})   # the override
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Final

TELEGRAM_HINT: Final = (
    "You are answering in Telegram. Write ordinary Markdown; the gateway converts it to "
    "Telegram's HTML. Bold, italic, strikethrough, inline code, code blocks, links and "
    "||spoilers|| all render. Tables do not, so present tabular facts as short lists or "
    '"label: value" lines. A Telegram message holds at most 4,096 characters; a longer '
    "reply is split into several messages, so put the answer first and keep it compact."
)

DISCORD_HINT: Final = (
    "You are answering in Discord. Markdown renders: bold, italic, strikethrough, inline "
    "code, code blocks, lists, quotes and links. Tables do not, so use lists instead. A "
    "Discord message holds at most 2,000 characters; a longer reply is split into several "
    "messages, so be brief and put the answer first."
)

SLACK_HINT: Final = (
    "You are answering in Slack, which renders its own mrkdwn format rather than full "
    "Markdown: bold, italic, strikethrough, inline code, code blocks, quotes, simple lists "
    "and links work; headings and tables do not. Replies longer than roughly 3,000-4,000 "
    "characters are split into several messages, so keep answers short and skimmable."
)

CLI_HINT: Final = (
    "You are answering in a terminal. Use plain text: Markdown is shown as raw symbols, "
    "so skip headings, bold and tables. Short paragraphs and simple dashes for lists read best."
)

PLATFORM_HINTS: Final[Mapping[str, str]] = MappingProxyType(
    {
        "telegram": TELEGRAM_HINT,
        "discord": DISCORD_HINT,
        "slack": SLACK_HINT,
        "cli": CLI_HINT,
    }
)
"""The built-in hints, keyed by platform name (lower case)."""


def platform_hint(platform: str | None, overrides: Mapping[str, str] | None = None) -> str:
    """The hint for ``platform``: the override if configured, else the built-in one.

    An override of ``""`` removes the hint. An unknown platform without an override
    gets no hint (``""``).
    """
    if not platform:
        return ""
    key = platform.strip().lower()
    if overrides is not None:
        for name, text in overrides.items():
            if name.strip().lower() == key:
                return text.strip()
    return PLATFORM_HINTS.get(key, "")

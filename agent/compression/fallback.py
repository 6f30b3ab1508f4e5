"""The local summary: a deterministic inventory of condensed turns, built without a model.

It stands in only when the summary model failed (or is cooling down) and the
next request cannot be sent otherwise. It lists what can be read off the
turns mechanically: the user's requests, the tools used, the files mentioned,
the errors seen and the photos and documents sent (as their placeholder lines).
An earlier summary found among the turns is carried over.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Final

from agent.compression.attachments import ATTACHMENTS_HEADING, placeholder
from agent.compression.pruning import error_line
from agent.messages import ChatMessage

__all__ = ["local_summary"]

MAX_REQUESTS: Final = 12
MAX_REQUEST_CHARS: Final = 300
MAX_FILES: Final = 25
MAX_ERRORS: Final = 10
MAX_PREVIOUS_CHARS: Final = 8_000
PATH_ARGUMENTS: Final = ("path", "file_path", "file", "filename")
FILE_PATTERN: Final = re.compile(
    r"(?<![\w/.-])(?:~?/)?(?:[\w.-]+/)+[\w.-]+|(?<![\w/.-])[\w-]+\.(?:py|pyi|js|jsx|ts|tsx|go|rs|rb|java|kt|c|h|"
    r"cpp|hpp|cs|php|swift|sh|md|rst|txt|json|jsonl|yaml|yml|toml|ini|cfg|sql|html|css|csv|lock|env)\b"
)
NOTE: Final = (
    "(Assembled without the summary model, which was unavailable: this is a mechanical inventory of the "
    "condensed turns, not a summary. Details not listed here were lost.)"
)


def _shorten(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unique(items: Iterable[str], limit: int) -> list[str]:
    seen: dict[str, None] = {}
    for item in items:
        if item and item not in seen:
            seen[item] = None
    return list(seen)[:limit]


def _requests(turns: Sequence[ChatMessage]) -> list[str]:
    asks = [_shorten(m.content, MAX_REQUEST_CHARS) for m in turns if m.role == "user" and m.content.strip()]
    return asks[-MAX_REQUESTS:]


def _tools(turns: Sequence[ChatMessage]) -> list[str]:
    counts = Counter(call.name for message in turns for call in message.tool_calls)
    return [f"{name} x{count}" for name, count in counts.most_common()]


def _files(turns: Sequence[ChatMessage]) -> list[str]:
    found: list[str] = []
    for message in turns:
        for call in message.tool_calls:
            arguments = call.parsed_arguments()
            found += [str(arguments[key]) for key in PATH_ARGUMENTS if isinstance(arguments.get(key), str)]
            found += FILE_PATTERN.findall(call.arguments)
        found += FILE_PATTERN.findall(message.content)
    return _unique((path.strip(".,;:'\"") for path in found), MAX_FILES)


def _errors(turns: Sequence[ChatMessage]) -> list[str]:
    lines = (error_line(m.content) for m in turns if m.role == "tool")
    return _unique((line for line in lines if line), MAX_ERRORS)


def _section(heading: str, items: list[str]) -> str:
    body = "\n".join(f"- {item}" for item in items) if items else "None."
    return f"{heading}\n{body}"


def local_summary(turns: Sequence[ChatMessage], previous: str | None = None) -> str:
    """The deterministic stand-in summary of ``turns``; same input, same text."""
    parts = [NOTE]
    if previous:
        parts.append(f"## Earlier Summary\n{previous.strip()[:MAX_PREVIOUS_CHARS]}")
    parts += [
        _section("## User Requests (oldest first)", [f'"{ask}"' for ask in _requests(turns)]),
        _section("## Tools Used", _tools(turns)),
        _section("## Files Mentioned", _files(turns)),
        _section("## Errors Seen", _errors(turns)),
    ]
    sent = [placeholder(part) for message in turns for part in message.media]
    if sent:
        parts.append(_section(ATTACHMENTS_HEADING, sent))
    return "\n\n".join(parts)

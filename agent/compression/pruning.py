"""Phase 1 of a compaction, no model call: shrink old tool output to one line.

A tool result longer than :data:`PRUNE_MIN_CHARS` outside the protected tail is
replaced by a line that says what the call did, for example::

    [tool output cleared] terminal command="pytest -q" -> 5,120 chars, 80 lines; first error: FAILED t.py::test_a

When nothing is known about the call, the generic stand-in
``[Old tool output cleared to save context space]`` is used.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

from agent.compression.framing import CLEARED_TOOL_OUTPUT, PRUNED_PREFIX, is_pruned
from agent.messages import ChatMessage, ToolCall

__all__ = ["PRUNE_MIN_CHARS", "calls_by_id", "describe_result", "error_line", "prune_tool_results"]

PRUNE_MIN_CHARS: Final = 200
KEY_ARGUMENTS: Final = (
    "path", "file_path", "file", "filename", "command", "cmd", "query", "pattern",
    "url", "urls", "target", "action", "name", "goal", "code",
)
"""Arguments that say most about a call, in the order they are shown."""
MAX_ARGUMENTS: Final = 3
MAX_VALUE_CHARS: Final = 60
MAX_ERROR_CHARS: Final = 120
ERROR_PATTERN: Final = re.compile(
    r"\b\w*(?:error|exception)\b|\b(?:failed|failure|fatal|panic|denied|not found)\b|exit (?:code|status) [1-9]",
    re.IGNORECASE,
)
"""A line worth keeping from failed output. A traceback's opening line is not: its last line is."""


def calls_by_id(messages: Iterable[ChatMessage]) -> dict[str, ToolCall]:
    """Every tool call in ``messages`` by its id."""
    return {call.id: call for message in messages for call in message.tool_calls}


def _short(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    if len(text) > MAX_VALUE_CHARS:
        text = text[: MAX_VALUE_CHARS - 3] + "..."
    return json.dumps(text, ensure_ascii=False) if " " in text or not text else text


def _key_arguments(arguments: Mapping[str, Any]) -> list[str]:
    keys = [key for key in KEY_ARGUMENTS if key in arguments]
    keys += [key for key in arguments if key not in keys]
    return [f"{key}={_short(arguments[key])}" for key in keys[:MAX_ARGUMENTS]]


def error_line(content: str) -> str | None:
    """The first line of ``content`` that looks like an error, shortened."""
    for line in content.splitlines():
        if ERROR_PATTERN.search(line):
            line = " ".join(line.split())
            return line if len(line) <= MAX_ERROR_CHARS else line[: MAX_ERROR_CHARS - 3] + "..."
    return None


def describe_result(result: ChatMessage, call: ToolCall | None) -> str:
    """One line that stands in for a tool result: tool, key arguments, size, first error."""
    name = call.name if call is not None else result.tool_name
    if not name:
        return CLEARED_TOOL_OUTPUT
    parts = [PRUNED_PREFIX, name, *(_key_arguments(call.parsed_arguments()) if call else [])]
    lines = len(result.content.splitlines()) or 1
    line = f"{' '.join(parts)} -> {len(result.content):,} chars, {lines:,} line{'s' if lines != 1 else ''}"
    error = error_line(result.content)
    return f"{line}; first error: {error}" if error else line


def prune_tool_results(
    messages: Sequence[ChatMessage], calls: Mapping[str, ToolCall]
) -> tuple[list[ChatMessage], int]:
    """``messages`` with long tool results replaced by one line each, and how many were."""
    out: list[ChatMessage] = []
    pruned = 0
    for message in messages:
        if message.role == "tool" and len(message.content) > PRUNE_MIN_CHARS and not is_pruned(message.content):
            call = calls.get(message.tool_call_id or "")
            message = message.with_content(describe_result(message, call))
            pruned += 1
        out.append(message)
    return out, pruned

"""The ``memory`` tool: add, replace or remove entries in the session's MEMORY.md and USER.md.

The gateway picks the folder (one person's or one shared conversation's, see
:mod:`agent.memory_scopes`); the tool has no way to name another one or the shared layer.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any, Final

from agent.memory import MemoryResult, MemoryStore, MemoryTarget
from agent.tools.registry import Tool, ToolContext

DESCRIPTION: Final = (
    "Keep durable facts across conversations with the person you talk to (in a shared thread: "
    "with that thread). target 'user' is their profile (name, preferences, how they like "
    "answers); target 'memory' is your own notes (their setup, ongoing projects, lessons "
    "learned). action 'add' saves content as a new entry; 'replace' swaps the entry containing "
    "old_text for content; 'remove' deletes the entry containing old_text. Both files are small "
    "and capped: keep entries short and factual, and when a file is full, merge or remove "
    "entries before adding. The operator's shared notes cannot be changed here. Changes are "
    "saved at once and appear in saved memory from the next conversation."
)


class MemoryTool(Tool):
    """Edits the session's memory store, :attr:`ToolContext.memory`."""

    name = "memory"
    description = DESCRIPTION
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "action": {"type": "string", "enum": ["add", "replace", "remove"]},
            "target": {"type": "string", "enum": [t.value for t in MemoryTarget]},
            "content": {"type": "string", "description": "The entry to save (add, replace)."},
            "old_text": {
                "type": "string",
                "description": "A short, distinctive part of the existing entry (replace, remove).",
            },
        },
        "required": ["action", "target"],
        "additionalProperties": False,
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        store = context.memory
        if store is None:
            return "error: memory is turned off for this conversation"
        action, target = arguments["action"], MemoryTarget(arguments["target"])
        content, old_text = arguments.get("content", ""), arguments.get("old_text", "")
        if action in ("add", "replace") and not content.strip():
            return f"error: memory {action} needs content"
        if action in ("replace", "remove") and not old_text.strip():
            return f"error: memory {action} needs old_text to say which entry"
        result = await asyncio.to_thread(_apply, store, action, target, content, old_text)
        return render_result(result)


def _apply(store: MemoryStore, action: str, target: MemoryTarget, content: str, old_text: str) -> MemoryResult:
    if action == "add":
        return store.add(target, content)
    if action == "replace":
        return store.replace(target, old_text, content)
    return store.remove(target, old_text)


def render_result(result: MemoryResult) -> str:
    """The tool result as compact JSON: outcome, message, fill level, listed entries."""
    data: dict[str, Any] = {
        "ok": result.ok,
        "message": result.message,
        "file": result.target.file_name,
        "usage": result.usage,
    }
    if result.entries:
        data["entries"] = list(result.entries)
    return json.dumps(data, ensure_ascii=False)

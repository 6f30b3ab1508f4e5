"""The ``session_search`` tool: full-text search over earlier conversations.

The search itself belongs to the gateway's storage; it arrives as
:attr:`ToolContext.search`, an async ``(query, limit) -> hits`` function that
reads only the past conversations of the session's person (or, in a shared
thread, of that thread): one user never finds another's messages.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agent.tools.registry import Tool, ToolContext

DEFAULT_LIMIT: Final = 5
MAX_LIMIT: Final = 20
SNIPPET_MAX: Final = 400

DESCRIPTION: Final = (
    "Search the messages of earlier conversations with this person (in a shared thread: of this "
    "thread) by keywords. Use it when the "
    "user refers to something discussed before, or when past context would help, instead of "
    "asking them to repeat it. Returns matching snippets with their date and session."
)


class SessionSearchTool(Tool):
    """Calls :attr:`ToolContext.search` and formats the hits for the model."""

    name = "session_search"
    description = DESCRIPTION
    parameters: dict[str, Any] = {
        "type": "object",
        "properties": {
            "query": {"type": "string", "description": "Keywords to look for."},
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIMIT,
                "description": f"How many matches to return (default {DEFAULT_LIMIT}).",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    }

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        if context.search is None:
            return "error: searching past conversations is not available here"
        query = " ".join(arguments["query"].split())
        if not query:
            return "error: session_search needs a non-empty query"
        limit = arguments.get("limit", DEFAULT_LIMIT)
        hits = await context.search(query, limit)
        return render_hits(query, hits[:limit])


def render_hits(query: str, hits: Sequence[Mapping[str, Any]]) -> str:
    """One numbered block per hit: date, session and role, then the snippet."""
    if not hits:
        return f'No earlier messages match "{query}". Try different or fewer keywords.'
    lines = [f'{len(hits)} match{"es" if len(hits) != 1 else ""} for "{query}":']
    for number, hit in enumerate(hits, start=1):
        date = format_date(hit.get("date"))
        session = hit.get("session_id") or "?"
        role = hit.get("role") or "?"
        lines.append(f"{number}. {date} · session {session} · {role}")
        lines.append(f"   {_snippet(hit.get('snippet'))}")
    return "\n".join(lines)


def format_date(value: Any) -> str:
    """A hit's date as ``YYYY-MM-DD HH:MM`` (UTC for timestamps); ``?`` when missing."""
    if isinstance(value, bool) or value is None or value == "":
        return "?"
    if isinstance(value, int | float):
        value = dt.datetime.fromtimestamp(value, tz=dt.UTC)
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M")
    if isinstance(value, dt.date):
        return value.isoformat()
    return str(value)


def _snippet(value: Any) -> str:
    text = " ".join(str(value or "").split())
    return text if len(text) <= SNIPPET_MAX else text[: SNIPPET_MAX - 1].rstrip() + "…"

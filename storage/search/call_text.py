"""Tool calls as the text a person searches for: the tool's name and its argument values.

A message's ``tool_calls`` column holds JSON whose ``arguments`` are themselves a
JSON string, as the model APIs send them. Indexed as stored, that text is
escaped twice: ``{"cmd": "make\\ntest"}`` indexes ``make`` and ``ntest``, and an
argument sent as ``Z\\u00fcrich`` is never found as Zürich. So the search
index, the substring vocabulary and the excerpts all read the same rendering
instead: one line per call, the name, then every value of its arguments with
escapes decoded (keys are left out: ``path`` or ``query`` in every call would
only add noise). Arguments that are not valid JSON are taken as they are.

The rendering exists twice, as SQL for the index triggers (so any program that
writes the database keeps the index right, no registered function needed) and
as Python for excerpts; the two agree on text, which is what search sees.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any

from storage.records import ToolCallRecord

__all__ = ["readable_calls", "readable_calls_sql"]


def readable_calls_sql(column: str) -> str:
    """An SQL expression rendering the ``tool_calls`` JSON in ``column`` (NULL stays NULL)."""
    arguments = "json_extract(c.value, '$.arguments')"
    return f"""(CASE WHEN json_valid({column}) THEN (
        SELECT group_concat(coalesce(json_extract(c.value, '$.name'), '') || ' ' || (
            CASE WHEN json_valid({arguments}) THEN (
                SELECT coalesce(group_concat(a.value, ' '), '') FROM json_tree({arguments}) AS a
                WHERE a.atom IS NOT NULL
            ) ELSE coalesce({arguments}, '') END
        ), char(10)) FROM json_each({column}) AS c
    ) ELSE {column} END)"""


def readable_calls(calls: Sequence[ToolCallRecord]) -> str | None:
    """The same rendering in Python, for excerpts."""
    if not calls:
        return None
    return "\n".join(f"{call.name} {_values_text(call.arguments)}" for call in calls)


def _values_text(arguments: str) -> str:
    try:
        parsed = json.loads(arguments)
    except ValueError:
        return arguments
    return " ".join(_leaves(parsed))


def _leaves(value: Any) -> Iterator[str]:
    if isinstance(value, dict):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list):
        for item in value:
            yield from _leaves(item)
    elif value is None:
        return
    elif isinstance(value, bool):
        yield "1" if value else "0"
    else:
        yield str(value)

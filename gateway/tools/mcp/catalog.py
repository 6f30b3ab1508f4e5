"""From a server's ``tools/list`` answer to the tools the model is offered: filtered, named, schemas checked.

* ``include`` / ``exclude`` (the server's own tool names, shell patterns) decide which are offered at all;
* each is named ``<server>__<tool>`` (:data:`config.tools.SEPARATOR`): characters a model refuses
  become ``_``, and a name past 64 characters (or one two tools would share after that) is
  shortened and given a short digest of the tool's own name, so every name is the same after a restart;
* its input schema must be a JSON Schema for an object: a tool whose schema is not is left out and
  logged (``mcp.tool.rejected``), never offered with a schema the model or its API would refuse.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Final

import jsonschema
import mcp.types as types
import structlog

from config.tools import SEPARATOR, McpServer

log = structlog.get_logger("gateway.tools.mcp")

MAX_NAME: Final = 64
_NOT_ALLOWED: Final = re.compile(r"[^A-Za-z0-9_-]")


@dataclass(frozen=True, slots=True)
class Offered:
    """One remote tool as the model sees it."""

    name: str
    """``<server>__<tool>``, at most 64 characters."""
    remote: str
    """The tool's own name on the server (what a call sends)."""
    description: str
    parameters: dict[str, Any]


def offered(server: McpServer, tools: Iterable[types.Tool]) -> list[Offered]:
    """The tools of ``server`` the model may be offered, in the server's order."""
    chosen = [tool for tool in tools if server.offers(tool.name)]
    names = _names(server.name, [tool.name for tool in chosen])
    result = []
    for tool in chosen:
        problem = schema_problem(tool.input_schema)
        if problem is not None:
            log.warning("mcp.tool.rejected", server=server.name, tool=tool.name, reason=problem,
                        hint="the server's tool is left out; tell its author, or exclude it in tools.mcp_servers")  # fmt: skip
            continue
        description = (tool.description or tool.title or "").strip() or f"The {tool.name} tool of the {server.name} server."
        result.append(Offered(names[tool.name], tool.name, description, dict(tool.input_schema)))
    return result


def schema_problem(schema: Any) -> str | None:
    """What is wrong with a tool's input schema for the model, or None."""
    if not isinstance(schema, dict):
        return "its input schema is not a JSON object"
    if schema.get("type") != "object":
        return f"its input schema describes {schema.get('type')!r}, not an object of arguments"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as error:
        return f"its input schema is not valid JSON Schema ({error.message})"
    return None


def _names(server: str, remote: list[str]) -> dict[str, str]:
    """Each remote tool name's name for the model, distinct and at most 64 characters."""
    prefix = f"{server}{SEPARATOR}"
    plain = {name: prefix + _NOT_ALLOWED.sub("_", name) for name in remote}
    counts: dict[str, int] = {}
    for name in plain.values():
        counts[name] = counts.get(name, 0) + 1
    names = {}
    for name, candidate in plain.items():
        if len(candidate) > MAX_NAME or counts[candidate] > 1 or not name:
            digest = hashlib.sha256(name.encode()).hexdigest()[:8]
            candidate = candidate[: MAX_NAME - len(digest) - 1] + "_" + digest
        names[name] = candidate
    return names

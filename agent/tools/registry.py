"""The tool interface and the registry the agent loop calls tools through.

A tool is one small class: a name, a description, a JSON Schema for its
arguments, and ``run``. Whatever a tool needs from outside (the session, the
memory store, the search function) arrives in a :class:`ToolContext`, so tools
hold no state of their own and one registry serves every session::

    registry = ToolRegistry([MemoryTool(), SessionSearchTool()])
    tools = registry.bind(ToolContext(session_id="s1", platform="telegram", memory=store))
    tools.specs()                       # what the model is offered
    await tools.call(tool_call)         # the result text for the model

Tools report expected failures (bad arguments, a full memory file) as text the
model can act on. Only truly unexpected errors are raised; the agent loop turns
those into an error result too.

A built-in tool sets its name, description and schema on the class; a tool that
wraps something only known at run time (one of an MCP server's tools, built by
the gateway) sets them on the instance. ``run`` returns the text for the model,
or a :class:`ToolResult` when there is more than text (pictures). The registry
changes while the gateway runs (a tool server starts, stops or changes its
list): :meth:`ToolRegistry.replace` swaps one source's tools at once.
"""

from __future__ import annotations

import abc
import copy
import json
import re
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import structlog

from agent.memory import MemoryStore
from agent.memory_scopes import MemoryScope
from agent.messages import ToolCall
from agent.providers.base import ToolSpec

log = structlog.get_logger("agent.tools")

SearchFunction = Callable[[str, int], Awaitable[list[dict[str, Any]]]]
"""``(query, limit) -> hits``; each hit has ``session_id``, ``role``, ``snippet`` and ``date``."""
ScopedSearchFunction = Callable[[str, int, MemoryScope], Awaitable[list[dict[str, Any]]]]
"""``(query, limit, scope) -> hits`` from the past conversations of ``scope`` only (one person's, or one
shared conversation's); the agent binds each session's scope to make its :data:`SearchFunction`."""

BUILT_IN: Final = "builtin"
"""The ``server`` a built-in tool's ``tool.call`` log line names."""
TOOL_NAME: Final = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_JSON_TYPES: Final[Mapping[str, tuple[type, ...]]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "array": (list,),
    "object": (dict,),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolContext:
    """What the gateway hands every tool call: who is asking and the services tools may use."""

    session_id: str
    platform: str
    memory: MemoryStore | None = None
    """The session's own memory folder (its person's or shared conversation's); None when memory is
    off. The operator's shared layer is never here: the model cannot write it."""
    search: SearchFunction | None = None
    """Full-text search over the past sessions of this session's person or shared conversation; None
    when the gateway offers none."""


@dataclass(frozen=True, slots=True)
class ToolImage:
    """A picture a tool returned (the bytes as the tool gave them)."""

    data: bytes
    mime: str
    """image/png, image/jpeg, image/gif or image/webp."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """What a tool returns when there is more than text: the text, pictures, and whether it failed."""

    text: str
    images: tuple[ToolImage, ...] = ()
    is_error: bool = False
    """The tool ran and reports a failure (``text`` says what); the model reads it like any result."""


class Tool(abc.ABC):
    """One capability the model can call: a name, a description and a schema, on the class or the instance."""

    name: str
    """What the model calls it: 1-64 letters, digits, '_' or '-' (:data:`TOOL_NAME`)."""
    description: str
    parameters: Mapping[str, Any]
    """A JSON Schema (``"type": "object"``) for the arguments."""
    source: str = ""
    """Where the tool comes from, for people: "" for a built-in tool, else the name of the tool server
    (an MCP server's name in ``tools.mcp_servers``)."""
    title: str = ""
    """The tool's own name as people see it (progress messages, logs): "" means :attr:`name`."""

    @property
    def label(self) -> str:
        """``source.title`` (``github.search_issues``) for a server's tool, the name for a built-in one."""
        own = self.title or self.name
        return f"{self.source}.{own}" if self.source else own

    @abc.abstractmethod
    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str | ToolResult:
        """Do the work and return the text the model reads (or a :class:`ToolResult`).

        ``arguments`` have already been checked against :attr:`parameters`.
        """

    def schema(self) -> dict[str, Any]:
        """The provider-neutral description: ``name``, ``description``, ``parameters``."""
        return {"name": self.name, "description": self.description, "parameters": copy.deepcopy(dict(self.parameters))}


def argument_errors(schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> list[str]:
    """Problems with ``arguments`` against the top level of an object ``schema``.

    Checks required keys, unknown keys (when ``additionalProperties`` is false),
    JSON types, enums and integer bounds: enough to give the model a clear error.
    """
    properties: Mapping[str, Any] = schema.get("properties", {})
    problems = [f"missing required argument '{key}'" for key in schema.get("required", ()) if key not in arguments]
    for key, value in arguments.items():
        spec = properties.get(key)
        if spec is None:
            if schema.get("additionalProperties") is False:
                problems.append(f"unknown argument '{key}'")
            continue
        problems.extend(_value_errors(key, spec, value))
    return problems


def _value_errors(key: str, spec: Mapping[str, Any], value: Any) -> list[str]:
    expected = spec.get("type")
    types = _JSON_TYPES.get(expected, (object,)) if isinstance(expected, str) else (object,)
    if not isinstance(value, types) or (expected in ("integer", "number") and isinstance(value, bool)):
        return [f"argument '{key}' must be of type {expected}"]
    if "enum" in spec and value not in spec["enum"]:
        return [f"argument '{key}' must be one of {', '.join(map(str, spec['enum']))}"]
    if expected in ("integer", "number"):
        if "minimum" in spec and value < spec["minimum"]:
            return [f"argument '{key}' must be at least {spec['minimum']}"]
        if "maximum" in spec and value > spec["maximum"]:
            return [f"argument '{key}' must be at most {spec['maximum']}"]
    return []


class ToolRegistry:
    """The tools on offer, by name, in registration order."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._specs: tuple[ToolSpec, ...] | None = None
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        """Add ``tool``; a second tool with the same name is a programming error."""
        if not TOOL_NAME.match(tool.name):
            raise ValueError(f"tool name {tool.name!r} must be 1-64 letters, digits, '_' or '-'")
        if tool.name in self._tools:
            raise ValueError(f"a tool named {tool.name!r} is already registered")
        self._tools[tool.name] = tool
        self._specs = None

    def replace(self, source: str, tools: Iterable[Tool]) -> None:
        """Make ``tools`` the tools of ``source`` (a tool server's name): its earlier ones go, all at once.

        Tools of other sources stay; a name another source already uses is a ``ValueError`` (and
        nothing changes). ``source`` must not be "" (the built-in tools are not replaced).
        """
        if not source:
            raise ValueError("replace() is for a tool server's tools; built-in tools are registered once")
        kept = {name: tool for name, tool in self._tools.items() if tool.source != source}
        for tool in tools:
            if tool.source != source:
                raise ValueError(f"tool {tool.name!r} comes from {tool.source!r}, not {source!r}")
            if not TOOL_NAME.match(tool.name):
                raise ValueError(f"tool name {tool.name!r} must be 1-64 letters, digits, '_' or '-'")
            if tool.name in kept:
                raise ValueError(f"a tool named {tool.name!r} is already registered")
            kept[tool.name] = tool
        self._tools = kept
        self._specs = None

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    def names(self) -> tuple[str, ...]:
        return tuple(self._tools)

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self) -> Iterator[Tool]:
        return iter(self._tools.values())

    def __len__(self) -> int:
        return len(self._tools)

    def schemas(self) -> list[dict[str, Any]]:
        """Every tool's :meth:`Tool.schema`, for any provider to translate."""
        return [tool.schema() for tool in self._tools.values()]

    def specs(self) -> list[ToolSpec]:
        """The schemas as the agent loop's :class:`ToolSpec` values.

        Built once per set of tools (every model call asks for them); callers must not change
        the parameter schemas they get.
        """
        if self._specs is None:
            self._specs = tuple(ToolSpec(**schema) for schema in self.schemas())
        return list(self._specs)

    async def dispatch(self, name: str, arguments: Mapping[str, Any] | str, context: ToolContext) -> str | ToolResult:
        """Run tool ``name``; unknown tools and bad arguments come back as error text."""
        tool = self._tools.get(name)
        if tool is None:
            known = ", ".join(self._tools) or "none"
            return f"error: there is no tool named '{name}' (available: {known})"
        parsed = _parse_arguments(arguments)
        if isinstance(parsed, str):
            return parsed
        if problems := argument_errors(tool.parameters, parsed):
            return f"error: {name}: " + "; ".join(problems)
        if tool.source:  # a tool server's tool logs its own call, with what went wrong (gateway/tools/mcp)
            return await tool.run(parsed, context)
        started = time.perf_counter()
        failed = True
        try:
            result = await tool.run(parsed, context)
            failed = _failed(result)
            return result
        finally:  # one info line per call of a built-in tool too, never its arguments
            log.info("tool.call", server=BUILT_IN, tool=name, ms=round((time.perf_counter() - started) * 1000), ok=not failed)

    def bind(self, context: ToolContext) -> BoundTools:
        """This registry with ``context`` attached: the shape the agent loop calls."""
        return BoundTools(self, context)


def _failed(result: str | ToolResult) -> bool:
    """Whether a tool's result reports a failure (an error result, or text the loop's way: ``error: ...``)."""
    if isinstance(result, ToolResult):
        return result.is_error or result.text.startswith("error:")
    return result.startswith("error:")


def _parse_arguments(arguments: Mapping[str, Any] | str) -> dict[str, Any] | str:
    if not isinstance(arguments, str):
        return dict(arguments)
    try:
        value = json.loads(arguments or "{}")
    except json.JSONDecodeError as exc:
        return f"error: the arguments are not valid JSON ({exc.msg}); send a JSON object"
    if not isinstance(value, dict):
        return "error: the arguments must be a JSON object"
    return value


@dataclass(frozen=True, slots=True)
class BoundTools:
    """A registry plus one session's :class:`ToolContext` (the loop's ``ToolBox``)."""

    registry: ToolRegistry
    context: ToolContext

    def specs(self) -> list[ToolSpec]:
        return self.registry.specs()

    async def call(self, call: ToolCall) -> str | ToolResult:
        return await self.registry.dispatch(call.name, call.arguments, self.context)

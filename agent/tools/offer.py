"""A session's tools: the list fixed when the session starts, and calls checked against it.

The registry changes while the gateway runs (a tool server starts, stops, or changes its list),
but a session keeps the tools it was offered when it started: its system prompt speaks of them,
and the request's tool definitions come first in the cached prefix, so a change mid-session
would cost the whole cache and confuse the model. :func:`offered` picks a new session's tools
from the registry, :func:`specs_json` / :func:`specs_from_json` turn them into the text the
gateway stores with the session and back (the same specs, key order and all, so the request's
``tools`` are byte for byte the same after a restart), and :class:`SessionTools` is what the
loop calls: the frozen specs, and each call run by the registry's tool of that name as it is
now. An offered tool the registry no longer has (its server stopped) answers with an error the
model can read.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from agent.messages import ToolCall, error_text
from agent.providers.base import ToolSpec
from agent.tools.registry import ToolContext, ToolRegistry, ToolResult

__all__ = ["SessionTools", "offered", "specs_from_json", "specs_json"]


def offered(registry: ToolRegistry, names: Collection[str] | None) -> tuple[ToolSpec, ...]:
    """The specs of the registry's tools named in ``names`` (None: all of them), in registration order."""
    return tuple(spec for spec in registry.specs() if names is None or spec.name in names)


def specs_json(specs: Sequence[ToolSpec]) -> str:
    """``specs`` as the text stored with a session (compact JSON; the schemas' key order kept)."""
    listed = [{"name": s.name, "description": s.description, "parameters": s.parameters} for s in specs]
    return json.dumps(listed, ensure_ascii=False, separators=(",", ":"))


def specs_from_json(text: str) -> tuple[ToolSpec, ...]:
    """The specs :func:`specs_json` stored; ``ValueError`` when ``text`` is not such a list."""
    listed = json.loads(text)
    if not isinstance(listed, list) or not all(isinstance(item, dict) for item in listed):
        raise ValueError("a session's stored tools are a JSON list of objects")
    return tuple(ToolSpec(item["name"], item["description"], item["parameters"]) for item in listed)


@dataclass(frozen=True, slots=True)
class SessionTools:
    """One session's tools as the loop calls them (its ``ToolBox``).

    ``frozen``: the specs the session was offered; None for a session stored before tool lists were
    kept, which is offered the registry's tools as they are at each call.
    """

    registry: ToolRegistry
    context: ToolContext
    frozen: tuple[ToolSpec, ...] | None = None

    def specs(self) -> list[ToolSpec]:
        return list(self.frozen) if self.frozen is not None else self.registry.specs()

    async def call(self, call: ToolCall) -> str | ToolResult:
        if self.frozen is not None:
            names = [spec.name for spec in self.frozen]
            if call.name not in names:
                return error_text(f"there is no tool named '{call.name}' (available: {', '.join(names) or 'none'})")
            if call.name not in self.registry:
                return error_text(
                    f"the {call.name} tool is no longer available (its tool server stopped or no longer offers it); "
                    "go on without it, and tell the user if their request needed it"
                )
        return await self.registry.dispatch(call.name, call.arguments, self.context)

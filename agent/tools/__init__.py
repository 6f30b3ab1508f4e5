"""The agent's built-in tools and the registry that offers them to the model.

Adding a tool takes one module: a :class:`Tool` subclass, listed in
:func:`default_registry` (or registered by the caller on any registry).
Which of the registry's tools a session is offered is fixed when it starts
(:mod:`agent.tools.offer`).
"""

from __future__ import annotations

from agent.tools.memory_tool import MemoryTool
from agent.tools.registry import (
    BoundTools,
    ScopedSearchFunction,
    SearchFunction,
    Tool,
    ToolContext,
    ToolImage,
    ToolRegistry,
    ToolResult,
)
from agent.tools.session_search import SessionSearchTool

__all__ = [
    "BoundTools",
    "MemoryTool",
    "ScopedSearchFunction",
    "SearchFunction",
    "SessionSearchTool",
    "Tool",
    "ToolContext",
    "ToolImage",
    "ToolRegistry",
    "ToolResult",
    "default_registry",
]


def default_registry(*, memory: bool = True, session_search: bool = True) -> ToolRegistry:
    """The built-in tools, minus the ones switched off.

    Switch a tool off when its service is missing (no memory store, no search
    function), so the model is never offered a tool that can only fail.
    """
    registry = ToolRegistry()
    if memory:
        registry.register(MemoryTool())
    if session_search:
        registry.register(SessionSearchTool())
    return registry

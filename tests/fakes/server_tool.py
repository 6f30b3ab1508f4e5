"""A tool server's tool without the server: registered in the agent's registry as the MCP client
registers one (``ToolRegistry.replace`` with tools whose ``source`` is the server's name), for tests
about which tools a session is offered rather than how they got there."""

from __future__ import annotations

from typing import Any

from agent.tools.registry import Tool, ToolContext


class ServerTool(Tool):
    """One tool of the server ``server``, named as the gateway names them (``<server>__<title>``)."""

    description = "a tool of a test server"
    parameters = {"type": "object", "properties": {}}

    def __init__(self, server: str, title: str) -> None:
        self.name = f"{server}__{title}"
        self.source = server
        self.title = title
        self.runs: list[str] = []
        """The sessions it ran in."""

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str:
        self.runs.append(context.session_id)
        return "ran"

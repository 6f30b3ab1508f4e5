"""The fake MCP server's tools: one of each behaviour the gateway's client must handle."""

from __future__ import annotations

import asyncio
import base64
import os
import sys

import mcp.types as types
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

FACTS = {
    "ticket-7": "ticket-7: the printer on floor 3 is out of toner (opened by Ada, priority high)",
    "lisbon": "lisbon: 21 degrees and sunny",
}
"""What ``lookup`` knows."""

PICTURE = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)
"""A 1x1 PNG: what ``picture`` returns."""


def build_server(name: str = "fake-tools") -> MCPServer:
    """The server with every test tool on it."""
    server = MCPServer(name, log_level="WARNING")

    @server.tool()
    def lookup(key: str) -> str:
        """Look a key up in the fake knowledge base (ticket-7, lisbon)."""
        return FACTS.get(key.lower(), f"nothing is known about {key}")

    @server.tool()
    async def slow(seconds: float) -> str:
        """Wait this many seconds, then answer."""
        await asyncio.sleep(seconds)
        return f"waited {seconds:g} seconds"

    @server.tool()
    def fail(reason: str = "it broke") -> str:
        """Always fail with the given reason."""
        raise ToolError(reason)

    @server.tool()
    def picture() -> Image:
        """Return a tiny PNG picture."""
        return Image(data=PICTURE, format="png")

    @server.tool()
    def long_text(size: int) -> str:
        """Return ``size`` characters of text."""
        return ("0123456789" * (size // 10 + 1))[:size]

    @server.tool()
    def document() -> types.EmbeddedResource:
        """Return a text resource."""
        contents = types.TextResourceContents(uri="file:///notes/plan.txt", mime_type="text/plain", text="the plan: ship it")
        return types.EmbeddedResource(type="resource", resource=contents)

    @server.tool()
    def environment(name: str) -> str:
        """The server process's environment variable ``name`` ("unset" when it has none)."""
        return os.environ.get(name, "unset")

    @server.tool()
    def where() -> str:
        """The server process's working directory."""
        return os.getcwd()

    if notes := os.environ.get("FAKE_MCP_NOTES"):  # only where a test asks for it: others count the tools

        @server.tool()
        def note(text: str) -> str:
            """Write ``text`` down (a line in the file ``FAKE_MCP_NOTES`` names): a call a test can see happened."""
            with open(notes, "a", encoding="utf-8") as written:
                written.write(text + "\n")
            return f"noted: {text}"

    @server.tool()
    def crash() -> str:
        """Exit the whole server process in the middle of the call."""
        sys.stdout.flush()
        os._exit(3)

    @server.tool()
    async def add_tool(name: str, ctx: Context) -> str:
        """Add a tool called ``name`` (it answers its own name) and tell the client the list changed."""

        def added() -> str:
            return f"{name} answered"

        server.add_tool(added, name=name, description=f"The tool {name}, added at run time.")
        await ctx.request_context.session.send_tool_list_changed()
        return f"added {name}"

    return server


def add_http_tools(server: MCPServer) -> None:
    """The tools that only make sense over HTTP."""

    @server.tool()
    def header(name: str, ctx: Context) -> str:
        """The value of the request header ``name`` this call came with ("none" when absent)."""
        request = ctx.request_context.request
        headers = getattr(request, "headers", None)
        return headers.get(name, "none") if headers is not None else "none"

"""One live connection to an MCP server: the transport and the SDK's session, opened and closed in one task.

The SDK runs on anyio task groups, whose cancel scopes must be left in the task that entered them:
:func:`connect` is an async context manager the supervisor enters and exits in its own long-lived
task, while turns call tools on the yielded :class:`Connection` from theirs. Everything the server
sends passes a small relay, so the connection knows when the server went away (a program that
exited, an HTTP stream that ended) without waiting for the next call to fail.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import structlog
from anyio.abc import ObjectReceiveStream, ObjectSendStream
from mcp import ClientSession

from config.tools import McpServer
from gateway.tools.mcp.transport import open_transport

log = structlog.get_logger("gateway.tools.mcp")


class Connection:
    """A session that answers: list its tools, call one; :attr:`ended` is set once the server is gone."""

    session: ClientSession

    def __init__(self, server: McpServer) -> None:
        self.server = server
        self.ended = asyncio.Event()
        """Set when the server stopped answering for good (exited, or closed the connection)."""
        self.tools_changed = asyncio.Event()
        """Set when the server said its tool list changed (``notifications/tools/list_changed``)."""
        self.server_name = ""
        """What the server calls itself (``serverInfo``), for logs."""

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server offers, following its pages."""
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
            page = await self.session.list_tools(params=params)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                return tools

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call the server's tool ``name`` (its own name); the caller bounds the wait."""
        return await self.session.call_tool(name, arguments)

    async def relay(self, read: ObjectReceiveStream[Any], send: ObjectSendStream[Any]) -> None:
        """Pass what the server sends on to the session; when the server's stream ends, say so."""
        try:
            async with send:
                async for item in read:
                    await send.send(item)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream):
            pass
        finally:
            self.ended.set()

    async def on_message(self, message: types.ServerNotification | Exception) -> None:
        """What the session does not handle itself: notifications, and transport errors."""
        if isinstance(message, Exception):  # a line that is not JSON-RPC, a failed HTTP request: not fatal
            log.warning("mcp.server.transport_error", server=self.server.name, error=str(message))
        elif isinstance(message, types.ToolListChangedNotification):
            self.tools_changed.set()


@asynccontextmanager
async def connect(server: McpServer, home: Path) -> AsyncIterator[Connection]:
    """Start (or reach) ``server``, shake hands within ``server.start_timeout`` seconds, yield the connection.

    Raises what starting failed with (``OSError`` for a program that cannot start, ``TimeoutError``
    when the handshake took too long, the SDK's errors otherwise). On exit the session is closed and
    a local program stopped (the SDK closes its stdin, then terminates, then kills it).
    """
    connection = Connection(server)
    async with open_transport(server, home) as (read, write):
        send, receive = anyio.create_memory_object_stream[Any](0)
        async with anyio.create_task_group() as group:
            group.start_soon(connection.relay, read, send)
            async with ClientSession(receive, write, message_handler=connection.on_message) as session:
                connection.session = session
                with anyio.fail_after(server.start_timeout):
                    result = await session.initialize()
                connection.server_name = result.server_info.name
                try:
                    yield connection
                finally:
                    group.cancel_scope.cancel()

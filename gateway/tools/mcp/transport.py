"""How the gateway reaches one configured MCP server: a local command over stdio, or a URL over streamable HTTP.

A local server gets a minimal environment (the SDK's safe set: PATH, HOME, ...) plus its configured
``env``, never the gateway's own (which holds the platform tokens and model keys), and runs in its
``cwd`` (relative to the Switchboard home; unset: the home). Its stderr is the gateway's. A remote
server gets the configured ``headers`` on every request.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path

from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from config.tools import McpServer


def transport_kind(server: McpServer) -> str:
    """``stdio`` or ``http``, for logs and output."""
    return "stdio" if server.command is not None else "http"


def open_transport(server: McpServer, home: Path) -> AbstractAsyncContextManager[tuple[object, object]]:
    """The SDK transport for ``server``: entered, it yields its (read stream, write stream) of
    messages; exited, the program is stopped or the HTTP session ended."""
    if server.command is not None:
        cwd = (home / server.cwd) if server.cwd else home
        params = StdioServerParameters(command=server.command, args=list(server.args), env=dict(server.env), cwd=cwd)
        return stdio_client(params, errlog=sys.stderr)
    assert server.url is not None  # the config allows exactly one of command and url
    return _http(server.url, dict(server.headers))


@asynccontextmanager
async def _http(url: str, headers: dict[str, str]) -> AsyncIterator[tuple[object, object]]:
    async with create_mcp_http_client(headers=headers) as client, streamable_http_client(url, http_client=client) as streams:
        yield streams


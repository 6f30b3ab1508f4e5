"""Tools from MCP (Model Context Protocol) servers, through the official ``mcp`` SDK.

``transport.py`` reaches a server (a local command over stdio, or a URL over streamable HTTP);
``connection.py`` holds one live session; ``supervisor.py`` keeps one server running (start,
restart with backoff, tool-list refresh, stop); ``servers.py`` is all of them for the gateway;
``catalog.py`` turns a server's tool list into what the model is offered (filters, names, schema
checks); ``tool.py`` is one remote tool in the agent's registry (``McpTool``); ``results.py``
converts what a call returned (text, pictures, resources, cut to a budget).
"""

from gateway.tools.mcp.connection import Connection, connect
from gateway.tools.mcp.servers import ToolServers
from gateway.tools.mcp.tool import Confirm, McpTool

__all__ = ["Confirm", "Connection", "McpTool", "ToolServers", "connect"]

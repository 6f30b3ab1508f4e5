"""Starting each configured MCP server as the gateway would, listing its tools, calling none, and stopping it."""

from __future__ import annotations

import asyncio

from config import LoadedConfig
from config.tools import McpServer
from gateway.operations.doctor.results import Check
from gateway.tools.mcp.catalog import offered
from gateway.tools.mcp.connection import connect
from gateway.tools.mcp.supervisor import describe, start_hint
from gateway.tools.mcp.transport import transport_kind

SHOWN = 12
"""Tool names listed on one line; the rest are counted."""


def check_name(server: McpServer) -> str:
    return f"mcp:{server.name}"


async def tool_server_checks(loaded: LoadedConfig, *, offline: bool) -> list[Check]:
    """One line per server of ``tools.mcp_servers``, in their order (none: no line)."""
    servers = loaded.settings.tools.mcp_servers
    if offline:
        return [Check.skip(check_name(server), "--offline: not started") for server in servers]
    return list(await asyncio.gather(*(_check(server, loaded) for server in servers)))


async def _check(server: McpServer, loaded: LoadedConfig) -> Check:
    name = check_name(server)
    if not server.enabled:
        return Check.skip(name, "enabled: false (the gateway does not start it)")
    how = f"over {transport_kind(server)}"
    try:
        async with connect(server, loaded.home) as connection:
            async with asyncio.timeout(server.start_timeout):
                listed = await connection.list_tools()
            tools = offered(server, listed)
    except Exception as error:  # noqa: BLE001 - every failure is the line's verdict
        return Check.fail(name, f"did not start {how}: {describe(error, server)}", start_hint(server))
    names = [tool.remote for tool in tools]
    shown = ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")
    left_out = f" ({len(listed) - len(tools)} of its {len(listed)} left out by include/exclude or a bad schema)"
    detail = f"started {how}, {len(tools)} tools offered" + (left_out if len(tools) < len(listed) else "")
    return Check.ok(name, f"{detail}: {shown or 'none'}; none called")

"""Every configured MCP server, for the gateway: started together before the adapters, stopped together."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import structlog

from agent import ToolRegistry
from config.tools import ToolsConfig
from gateway.tools.mcp.supervisor import Supervisor
from gateway.tools.mcp.tool import Confirm

log = structlog.get_logger("gateway.tools.mcp")


class ToolServers:
    """The enabled servers of ``tools.mcp_servers``, each under a :class:`Supervisor`, their tools in ``registry``."""

    def __init__(self, config: ToolsConfig, registry: ToolRegistry, *, home: Path, confirm: Confirm | None = None) -> None:
        """``confirm``: asks the person before a call of a tool a server's ``confirm`` covers (None: such
        calls run without asking)."""
        self.registry = registry
        self.supervisors = [
            Supervisor(server, registry, home=home, budget=config.result_budget, confirm=confirm)
            for server in config.mcp_servers if server.enabled
        ]  # fmt: skip
        for server in config.mcp_servers:
            if not server.enabled:
                log.info("mcp.server.disabled", server=server.name)

    async def start(self) -> None:
        """Start every server and wait until each has started or failed once (each within its
        ``start_timeout``); a failed one is logged and tried again in the background."""
        for supervisor in self.supervisors:
            supervisor.start()
        await asyncio.gather(*(supervisor.first_try() for supervisor in self.supervisors))

    async def stop(self) -> None:
        """Stop every server (side by side: each local program gets a few seconds to exit) and drop their tools."""
        await asyncio.gather(*(supervisor.stop() for supervisor in self.supervisors))

    def health(self) -> dict[str, Any]:
        """For /health: each server's state, tool count and restarts so far."""
        return {
            s.config.name: {"state": s.state, "tools": s.tools, "restarts": s.restarts} for s in self.supervisors
        }

"""One configured MCP server kept running: started with the gateway, restarted with backoff, stopped with it.

The supervisor's task owns the connection (the SDK's task groups are entered and left in it) and
goes round one loop: connect and read the tool list (at most ``start_timeout`` seconds each),
register the tools, then wait for the server to go away, to say its list changed (read again and
swapped in at once) or for the gateway to stop. A server that fails to start or goes away is
logged with what to do and tried again after 1 s, 2 s, 4 s ... up to 5 minutes (back to 1 s once it
has stayed up a while); the gateway runs on meanwhile. Tools of a server that went away stay
registered, so the sessions that were offered them keep the same list; a call meanwhile reads that
the server is restarting.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any, Final

import mcp.types as types
import structlog
from mcp import MCPError
from mcp.types import CONNECTION_CLOSED

from agent import ToolRegistry
from config.tools import McpServer
from gateway.tools.mcp.catalog import offered
from gateway.tools.mcp.connection import Connection, connect
from gateway.tools.mcp.tool import Confirm, McpTool, Unavailable
from gateway.tools.mcp.transport import transport_kind

log = structlog.get_logger("gateway.tools.mcp")

FIRST_DELAY: Final = 1.0
MAX_DELAY: Final = 300.0
STEADY: Final = 60.0
"""Seconds a server must stay up for the next restart to wait :data:`FIRST_DELAY` again."""


class Supervisor:
    """Keeps ``config``'s server running and its tools in ``registry`` as ``<server>__<tool>``."""

    def __init__(
        self, config: McpServer, registry: ToolRegistry, *, home: Path, budget: int, confirm: Confirm | None = None
    ) -> None:
        self.config = config
        self._registry = registry
        self._home = home
        self._budget = budget
        self._confirm = confirm
        self._connection: Connection | None = None
        self._stopping = asyncio.Event()
        self._tried = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.state = "not started"
        """not started, starting, running, restarting (waiting to try again), stopped: for /health."""
        self.tools = 0
        self.restarts = 0

    def start(self) -> None:
        self._task = asyncio.create_task(self._supervise(), name=f"mcp:{self.config.name}")

    async def first_try(self) -> None:
        """Wait until the first start has succeeded or failed."""
        await self._tried.wait()

    async def stop(self) -> None:
        """Stop the server (a local program gets its stdin closed, then SIGTERM, then SIGKILL) and drop its tools."""
        self._stopping.set()
        if self._task is not None:
            if self.state != "running":  # a start that hangs would hold the shutdown up to start_timeout
                self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        self._registry.replace(self.config.name, [])
        self.state = "stopped"
        self._tried.set()  # nobody waits for a first start that will not come

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        connection = self._connection
        if connection is None or connection.ended.is_set():
            state = "restarting" if connection is not None or self.state == "starting" else self.state
            raise Unavailable(f"the {self.config.name} tool server is {state}; try again in a minute")
        return await connection.call(tool, arguments)

    async def _supervise(self) -> None:
        delay = FIRST_DELAY
        while not self._stopping.is_set():
            self.state = "starting"
            began = time.monotonic()
            failure: Exception | None = None
            try:
                await self._serve()
            except Exception as error:  # noqa: BLE001 - a server's failure is logged; the gateway runs on
                failure = error
            finally:
                self._connection = None
            if self._stopping.is_set():
                break
            if time.monotonic() - began >= STEADY:  # it ran a good while: this is a fresh failure
                delay = FIRST_DELAY
            self._report(failure, retry_in=delay)
            self._tried.set()
            self.state = "restarting"
            self.restarts += 1
            try:
                await asyncio.wait_for(self._stopping.wait(), delay)
            except TimeoutError:
                pass
            delay = min(delay * 2, MAX_DELAY)
        self._tried.set()
        self.state = "stopped"

    async def _serve(self) -> None:
        """Connect, register the tools, follow list changes until the server goes or the gateway stops."""
        async with connect(self.config, self._home) as connection:
            await self._install(connection, "mcp.server.started")
            self._connection = connection
            self.state = "running"
            self._tried.set()
            while True:
                await _first_of(connection.ended, connection.tools_changed, self._stopping)
                if connection.ended.is_set() or self._stopping.is_set():
                    return
                connection.tools_changed.clear()
                await self._install(connection, "mcp.server.tools_changed")

    async def _install(self, connection: Connection, event: str) -> None:
        async with asyncio.timeout(self.config.start_timeout):
            listed = await connection.list_tools()
        tools = [McpTool(self, tool, budget=self._budget, confirm=self._confirm) for tool in offered(self.config, listed)]
        self._registry.replace(self.config.name, tools)
        self.tools = len(tools)
        log.info(event, server=self.config.name, transport=transport_kind(self.config), tools=len(tools),
                 of=len(listed), names=",".join(tool.title for tool in tools), server_says=connection.server_name)  # fmt: skip

    def _report(self, error: Exception | None, *, retry_in: float) -> None:
        """Log why the server is not running (first start failed: error; later: warning) and when it is tried again."""
        name = self.config.name
        if error is None:
            log.warning("mcp.server.exited", server=name, retry_in=retry_in,
                        hint="it stopped answering (the program exited or closed the connection); "
                             "its own output is on the gateway's stderr")  # fmt: skip
        elif self.state == "starting":
            level = log.error if not self._tried.is_set() else log.warning
            level("mcp.server.start_failed", server=name, error=describe(error, self.config), retry_in=retry_in,
                  hint=start_hint(self.config))  # fmt: skip
        else:
            log.warning("mcp.server.lost", server=name, error=describe(error, self.config), retry_in=retry_in)


async def _first_of(*events: asyncio.Event) -> None:
    waits = [asyncio.create_task(event.wait()) for event in events]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()


def describe(error: BaseException, config: McpServer) -> str:
    """What went wrong, in a few words (no traceback: the hint says what to do)."""
    if isinstance(error, TimeoutError):
        return f"it did not answer within {config.start_timeout:g} seconds (start_timeout)"
    if isinstance(error, FileNotFoundError):
        return f"the program {config.command!r} was not found"
    if isinstance(error, MCPError) and error.code == CONNECTION_CLOSED:
        return "it closed the connection before answering (a program that exited at once: its error is on stderr)"
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(describe(inner, config) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def start_hint(config: McpServer) -> str:
    """What the operator can do about a server that does not start."""
    where = f"tools.mcp_servers (name: {config.name})"
    if config.command is not None:
        return (f"check command, args, env and cwd in {where}: run the command by hand from the Switchboard home "
                "to see its error (its output is on the gateway's stderr); its tools are left out until it starts, "
                "and the gateway keeps trying")  # fmt: skip
    return (f"check url and headers in {where}, and that the server is up and reachable from here; its tools are "
            "left out until it answers, and the gateway keeps trying")  # fmt: skip

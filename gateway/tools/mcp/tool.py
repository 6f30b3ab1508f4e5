"""``McpTool``: one of an MCP server's tools in the agent's registry; every way a call can go wrong is a result.

A call checks the arguments against the tool's schema, asks the person first when the server's
``confirm`` covers the tool, then sends it to the server and waits at most the server's ``timeout``.
A refusal, bad arguments, a timeout, a server that is down or restarting, a crash in the middle of the
call and an error the tool reports all come back as text the model reads: a turn never fails
because of a tool server. Each call writes one info line (``tool.call server=... tool=... ms=...
ok=...``, plus ``outcome`` when it did not succeed); the arguments are never written (what the model
says stays out of the log, as what users say does).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import jsonschema
import mcp.types as types
import structlog
from mcp import MCPError

from agent import Tool, ToolContext, ToolResult
from config.tools import McpServer
from gateway.tools.mcp.catalog import Offered
from gateway.tools.mcp.results import convert

log = structlog.get_logger("gateway.tools.mcp")

Confirm = Callable[[ToolContext, Tool, dict[str, Any]], Awaitable[str | None]]
"""Asks the person whose turn it is before a call: None when allowed, else the result text for the model."""


class Unavailable(Exception):
    """The server cannot take a call now (not started, restarting, stopped); the message says which."""


class ServerLink(Protocol):
    """What a tool needs of its server's supervisor."""

    config: McpServer

    async def call(self, tool: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Raises :class:`Unavailable`, or what the SDK raised (the connection closed mid-call)."""


class McpTool(Tool):
    """A remote tool, named ``<server>__<tool>`` for the model and shown as ``server.tool`` to people."""

    def __init__(self, link: ServerLink, offered: Offered, *, budget: int, confirm: Confirm | None = None) -> None:
        self.name = offered.name
        self.description = offered.description
        self.parameters = offered.parameters
        self.source = link.config.name
        self.title = offered.remote
        self._link = link
        self._budget = budget
        self._confirm = confirm if link.config.confirms(offered.remote) else None
        self._validator = jsonschema.validators.validator_for(offered.parameters)(offered.parameters)

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str | ToolResult:
        started = time.monotonic()
        outcome, result = await self._outcome(arguments, context)
        ms = round((time.monotonic() - started) * 1000)
        failed = {} if outcome == "ok" else {"outcome": outcome}  # the turn's ids are bound to every line already
        log.info("tool.call", server=self.source, tool=self.title, ms=ms, ok=not failed, **failed)
        return for_model(result)

    async def _outcome(self, arguments: dict[str, Any], context: ToolContext) -> tuple[str, ToolResult]:
        error = jsonschema.exceptions.best_match(self._validator.iter_errors(arguments))
        if error is not None:
            where = "/".join(map(str, error.absolute_path)) or "the arguments"
            return "bad_arguments", _error(f"{self.label}: {where}: {error.message}; fix the arguments and call it again")
        if self._confirm is not None:
            refusal = await self._confirm(context, self, arguments)
            if refusal is not None:
                return "refused", ToolResult(refusal)  # the text says what happened, as the asker wrote it
        timeout = self._link.config.timeout
        try:
            async with asyncio.timeout(timeout):
                answer = await self._link.call(self.title, arguments)
        except TimeoutError:
            return "timeout", _error(f"{self.label} did not answer within {timeout:g} s and the call was given up; "
                                     "try again later, or do without it")  # fmt: skip
        except Unavailable as why:
            return "unavailable", _error(f"{self.label} cannot be used right now: {why}")
        except MCPError as failure:
            return "server_error", _error(f"the {self.source} tool server failed during the call ({failure.message}); "
                                          "the gateway restarts it if it stopped. Try again in a moment")  # fmt: skip
        except Exception as failure:  # noqa: BLE001 - whatever the transport raises is the model's result, not a crash
            log.warning("mcp.call.failed", server=self.source, tool=self.title, error=str(failure))
            return "server_error", _error(f"the call to {self.label} failed ({type(failure).__name__}); try again later")
        result = convert(answer, self._budget)
        return ("tool_error" if result.is_error else "ok"), result


def _error(text: str) -> ToolResult:
    return ToolResult(f"error: {text}", is_error=True)


def for_model(result: ToolResult) -> str | ToolResult:
    """The result as the agent loop takes it: plain text when there is no picture (an error starts with
    ``error:``, as every tool's does), the :class:`ToolResult` with its pictures otherwise."""
    if result.images:
        return result
    if result.is_error and not result.text.startswith("error:"):
        return f"error: {result.text}"
    return result.text

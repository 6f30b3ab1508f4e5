"""The ``tools:`` section: tool servers the agent may call (MCP), and who may use which of their tools.

Each entry of ``tools.mcp_servers`` is one Model Context Protocol server: a local command the gateway
starts and talks to over stdin/stdout, or a URL it talks to over streamable HTTP. Its tools join the
agent's own (memory, session search) under the name ``<server>__<tool>``, so two servers cannot
collide. Which of them a person is offered is decided when their session starts:

* with no ``allow`` rule on a server, everyone allowed to talk to the bot gets its tools (configuring
  the server is the operator's choice);
* with rules, a person gets the tools of the rules that match them (platform, user, chat) and no other:
  an ``allow`` list narrows, never widens, who the platform's own access settings let in.

A tool matched by ``confirm`` asks the person in the chat before each call (buttons under a message);
the turn waits at most ``tools.confirm_timeout`` seconds, and a refusal or no answer is the call's result.
Values in ``env`` and ``headers`` are secrets: write ``${VAR}`` to take them from the environment or the
home's ``.env``; they are masked in logs and output like every other secret.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Annotated, Final

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from config.fields import IdList, Section, between

SERVER_NAME: Final = re.compile(r"^[a-z][a-z0-9-]{0,23}$")
"""A server's name: lower-case letters, digits and '-' (no '_': ``<server>__<tool>`` must split one way),
short enough to leave room for its tools' names in the model's 64 characters."""
SEPARATOR: Final = "__"
"""Between a server's name and its tool's name, in the name the model calls (``github__search_issues``)."""


def matches(name: str, patterns: list[str]) -> bool:
    """Whether a tool's own ``name`` matches one of the shell-style ``patterns`` (``search_*``, ``*``)."""
    return any(fnmatch.fnmatchcase(name, pattern) for pattern in patterns)


class ToolRule(Section):
    """Who gets a server's tools: every condition written must hold (an empty list is no condition)."""

    platforms: list[str] = []
    """On these platforms only (names of ``platforms``' sections, checked with the whole configuration)."""
    users: IdList = []
    """These people only (platform user ids, as in ``platforms.<name>.allowed_users``), in their own sessions: a
    rule naming users never applies in a session several people share (a thread, or a group with
    ``sessions.group_per_user`` off), where everyone reads what the tools return."""
    chats: IdList = []
    """In these chats (channels) only; a direct message's chat is the person's DM with the bot."""
    tools: list[str] = ["*"]
    """Which of the server's tools the rule grants, by their own names (shell patterns)."""


class McpServer(Section):
    name: Annotated[str, Field(pattern=SERVER_NAME.pattern)]
    """The server's name: its tools are called ``<name>__<tool>`` by the model and shown as ``<name>.<tool>``."""
    command: str | None = None
    """A local server: the program to start (stdio transport). Exactly one of ``command`` and ``url``."""
    args: list[str] = []
    env: dict[str, str] = {}
    """Variables the program gets besides a minimal safe set (PATH, HOME, ...); values are secrets."""
    cwd: str | None = None
    """The program's working directory (relative: to the Switchboard home); unset: the home."""
    url: str | None = None
    """A remote server: its streamable-HTTP endpoint (``https://host/mcp``)."""
    headers: dict[str, str] = {}
    """Request headers for ``url`` (``Authorization: "Bearer ${GITHUB_TOKEN}"``); values are secrets."""
    enabled: bool = True
    timeout: Annotated[float, between(1.0, 3600.0)] = 60.0
    """Seconds one call of one of its tools may take; then the model reads that it timed out."""
    start_timeout: Annotated[float, between(1.0, 600.0)] = 30.0
    """Seconds the server may take to start and list its tools."""
    include: list[str] = ["*"]
    """Which of its tools to offer at all, by their own names (shell patterns)."""
    exclude: list[str] = []
    """Tools never offered, even when ``include`` matches them."""
    confirm: bool | list[str] = False
    """Ask the person before each call: true for every tool of the server, or patterns of tool names."""
    allow: list[ToolRule] = []
    """Who may use its tools (see the module docstring); empty: everyone allowed to talk to the bot."""

    @model_validator(mode="after")
    def _one_transport(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise PydanticCustomError(
                "mcp_transport",
                "server {name}: set exactly one of command (a local program, started by the gateway) and url "
                "(a remote server over streamable HTTP)",
                {"name": self.name},
            )
        if self.url is not None and not self.url.startswith(("http://", "https://")):
            raise PydanticCustomError(
                "mcp_url", "server {name}: url must start with http:// or https:// (got {url})",
                {"name": self.name, "url": self.url},
            )  # fmt: skip
        if self.command is None and (self.args or self.env or self.cwd):
            raise PydanticCustomError(
                "mcp_stdio_keys", "server {name}: args, env and cwd are for a local command; this server has a url",
                {"name": self.name},
            )  # fmt: skip
        if self.url is None and self.headers:
            raise PydanticCustomError(
                "mcp_http_keys", "server {name}: headers are for a url; this server runs a local command",
                {"name": self.name},
            )  # fmt: skip
        return self

    def offers(self, tool: str) -> bool:
        """Whether the server's tool named ``tool`` (its own name) is offered at all."""
        return matches(tool, self.include) and not matches(tool, self.exclude)

    def confirms(self, tool: str) -> bool:
        """Whether a call of ``tool`` (its own name) asks the person first."""
        return self.confirm if isinstance(self.confirm, bool) else matches(tool, self.confirm)


class ToolsConfig(Section):
    mcp_servers: list[McpServer] = []
    """Tool servers (Model Context Protocol), started with the gateway and stopped with it."""
    confirm_timeout: Annotated[float, between(5.0, 3600.0)] = 120.0
    """Seconds a tool call that asks the person first waits for an answer; then it is not run."""
    result_budget: Annotated[int, between(1_000, 1_000_000)] = 20_000
    """Characters of one tool result the model reads; a longer one is cut, with a note saying so."""

    @model_validator(mode="after")
    def _names_differ(self) -> ToolsConfig:
        names = [server.name for server in self.mcp_servers]
        if twice := sorted({name for name in names if names.count(name) > 1}):
            raise PydanticCustomError(
                "mcp_names", "tools.mcp_servers: each server needs its own name; used more than once: {names}",
                {"names": ", ".join(twice)},
            )  # fmt: skip
        return self

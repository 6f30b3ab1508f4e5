"""Who is offered which tools: the names of the tools a new session may show the model.

The agent's built-in tools (its notes, past-conversation search) are offered in every session. A tool
server's tools (``tools.mcp_servers``) are offered when all of these hold:

1. the server offers the tool at all (its ``include`` and ``exclude`` patterns);
2. the server has no ``allow`` rule, or one of its rules matches the session: the session's platform
   (``platforms``), its person (``users``), its chat (``chats``), and the tool's own name (``tools``).

A shared session (a thread or forum topic, or a whole group when ``sessions.group_per_user`` is off)
has no one person: everyone in it reads what the tools return and may ask for any tool it shows. So
it is offered only what every member may use: the rules that name no ``users``. A server whose every
rule names users is never offered there; :class:`ToolAccess` logs that once when it is made, so an
operator who wonders where a tool went finds the reason.

The answer is worked out when a session starts (:class:`gateway.turn.conversations.Conversations`
asks through ``tool_offer``) from the tools registered at that moment; the session keeps it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import structlog

from config.tools import McpServer, ToolRule, ToolsConfig, matches
from gateway.inbound.session_key import SessionKey

log = structlog.get_logger("gateway.tools.access")


class OfferableTool(Protocol):
    """What the decision reads of a tool (the agent's ``Tool``)."""

    @property
    def name(self) -> str: ...

    @property
    def source(self) -> str: ...

    @property
    def title(self) -> str: ...


def rule_admits(rule: ToolRule, key: SessionKey, tool: str) -> bool:
    """Whether ``rule`` grants the tool named ``tool`` (its own name) in the session of ``key``.

    A rule naming ``users`` never matches a shared session (``key.user_id`` is None): it grants
    those people, not everyone they share a conversation with.
    """
    if rule.platforms and key.platform not in rule.platforms:
        return False
    if rule.users and key.user_id not in rule.users:
        return False
    if rule.chats and key.chat_id not in rule.chats:
        return False
    return matches(tool, rule.tools)


def server_admits(server: McpServer, key: SessionKey, tool: str) -> bool:
    """Whether ``server``'s tool named ``tool`` (its own name) is offered in the session of ``key``."""
    if not server.enabled or not server.offers(tool):
        return False
    return not server.allow or any(rule_admits(rule, key, tool) for rule in server.allow)


def only_for_named_users(server: McpServer) -> bool:
    """Whether every ``allow`` rule of ``server`` names users: its tools never reach a shared session."""
    return bool(server.allow) and all(rule.users for rule in server.allow)


class ToolAccess:
    """The ``tool_offer`` of :class:`gateway.turn.conversations.Conversations`: call it with a session's key.

    ``tools`` is read at each call (the agent's ``ToolRegistry``: servers come, go and change their
    lists while the gateway runs). A tool whose ``source`` names no configured server is not offered:
    nothing in the configuration lets anyone use it.
    """

    def __init__(self, config: ToolsConfig, tools: Iterable[OfferableTool]) -> None:
        self._servers = {server.name: server for server in config.mcp_servers}
        self._tools = tools
        for server in config.mcp_servers:
            if server.enabled and only_for_named_users(server):
                log.info("tools.access.personal_only", server=server.name,
                         hint="every allow rule of this server names users, so its tools are offered only in "
                              "one person's sessions (direct messages, per-user group sessions), never in "
                              "threads or groups shared by several people; add a rule without users to "
                              "offer some of them there")  # fmt: skip

    def __call__(self, key: SessionKey) -> tuple[str, ...]:
        """The names of the tools a new session of ``key`` is offered, in the registry's order."""
        return tuple(tool.name for tool in self._tools if self.admits(key, tool))

    def admits(self, key: SessionKey, tool: OfferableTool) -> bool:
        if not tool.source:
            return True
        server = self._servers.get(tool.source)
        return server is not None and server_admits(server, key, tool.title or tool.name)

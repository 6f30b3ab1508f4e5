"""The tool servers part of ``switchboard check``: each server of ``tools.mcp_servers``, how it is reached,
which of its tools are offered, which ask first and who gets them. Read from the configuration only: no
server is started (``switchboard doctor`` starts each one and lists its tools)."""

from __future__ import annotations

from urllib.parse import urlsplit

from config.loader import LoadedConfig
from config.tools import McpServer, ToolRule, ToolsConfig


def tool_server_lines(loaded: LoadedConfig, width: int) -> list[str]:
    """The section's lines, indented like the plan's; none when no server is configured."""
    tools = loaded.settings.tools
    if not tools.mcp_servers:
        return []
    lines = [f"  {'tool servers'.ljust(width)}  {_limits(tools)}"]
    name_width = max(len(server.name) for server in tools.mcp_servers)
    for server in tools.mcp_servers:
        state = "on " if server.enabled else "off"
        lines.append(f"    {server.name.ljust(name_width)} {state}  {_reach(server)}")
        pad = " " * (name_width + 10)
        lines.append(f"{pad}tools: {_filters(server)}; ask first: {_confirm(server)}")
        lines.append(f"{pad}who: {_who(server.allow)}")
    return lines


def _limits(tools: ToolsConfig) -> str:
    return (f"results cut at {tools.result_budget:,} characters; a confirmation waits {tools.confirm_timeout:g} s "
            "(`switchboard doctor` starts each server and lists its tools)")  # fmt: skip


def _reach(server: McpServer) -> str:
    timing = f"calls time out after {server.timeout:g} s, start within {server.start_timeout:g} s"
    if server.command is not None:
        command = " ".join([server.command, *server.args])
        where = f"in {server.cwd} (under the home)" if server.cwd else "in the home"
        env = f", variables {', '.join(sorted(server.env))}" if server.env else ""
        return f"local command `{command}` {where}{env}; {timing}"
    assert server.url is not None
    parts = urlsplit(server.url)
    shown = f"{parts.scheme}://{parts.hostname}{f':{parts.port}' if parts.port else ''}{parts.path}"
    shown += "?[REDACTED]" if parts.query else ""
    headers = f", headers {', '.join(sorted(server.headers))}" if server.headers else ""
    return f"streamable HTTP {shown}{headers}; {timing}"


def _filters(server: McpServer) -> str:
    offered = "all" if server.include == ["*"] else ", ".join(server.include)
    return offered + (f" except {', '.join(server.exclude)}" if server.exclude else "")


def _confirm(server: McpServer) -> str:
    if isinstance(server.confirm, bool):
        return "every tool" if server.confirm else "none"
    return ", ".join(server.confirm) or "none"


def _who(rules: list[ToolRule]) -> str:
    if not rules:
        return "everyone allowed to talk to the bot"
    return " | ".join(_rule(rule) for rule in rules)


def _rule(rule: ToolRule) -> str:
    parts = [
        f"on {', '.join(rule.platforms)}" if rule.platforms else "on any platform",
        f"users {', '.join(map(str, rule.users))}" if rule.users else "",
        f"in chats {', '.join(map(str, rule.chats))}" if rule.chats else "",
    ]
    tools = "all tools" if rule.tools == ["*"] else f"tools {', '.join(rule.tools)}"
    return " ".join(part for part in parts if part) + f": {tools}"

"""The gateway's tool servers against the real fake MCP server, over stdio and over streamable HTTP.

``ToolServers`` is driven as the gateway drives it (start, calls through the agent's registry, stop);
the server runs as its own process, so starts, crashes and exits are real.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from agent.messages import ToolCall
from agent.tools import Tool, ToolContext, ToolRegistry
from config.tools import ToolsConfig
from gateway.tools.mcp import ToolServers
from tests.fakes.mcp_server import HttpServer, serve_http, stdio_command
from tests.waiting import eventually

CONTEXT = ToolContext(session_id="s1", platform="loopback")


@pytest.fixture
def http_server() -> Iterator[HttpServer]:
    server = serve_http()
    yield server
    server.stop()


@pytest_asyncio.fixture
async def servers(tmp_path: Path) -> AsyncIterator[list[ToolServers]]:
    """Every ToolServers a test starts (through :func:`start`) is stopped at its end."""
    started: list[ToolServers] = []
    yield started
    for each in started:
        await each.stop()


async def start(started: list[ToolServers], home: Path, *servers: dict[str, Any], **options: Any) -> ToolServers:
    home.mkdir(parents=True, exist_ok=True)
    config = ToolsConfig.model_validate({"mcp_servers": list(servers)})
    tool_servers = ToolServers(config, ToolRegistry(), home=home, **options)
    started.append(tool_servers)
    await tool_servers.start()
    return tool_servers


async def call(tool_servers: ToolServers, tool: str, /, **arguments: Any) -> Any:
    return await tool_servers.registry.bind(CONTEXT).call(ToolCall(id="c", name=tool, arguments=arguments))


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"


async def test_a_remote_server_gets_its_headers_and_its_tools_are_named_for_it(
    http_server: HttpServer, servers: list[ToolServers], tmp_path: Path
) -> None:
    web = {"name": "web", "url": http_server.url, "headers": {"Authorization": "Bearer t0ken"}}
    tool_servers = await start(servers, tmp_path, web)

    assert await call(tool_servers, "web__header", name="authorization") == "Bearer t0ken"
    assert await call(tool_servers, "web__lookup", key="lisbon") == "lisbon: 21 degrees and sunny"
    tool = tool_servers.registry.get("web__lookup")
    assert tool is not None and (tool.source, tool.title, tool.label) == ("web", "lookup", "web.lookup")


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_the_tool_list_is_read_again_when_the_server_says_it_changed(
    servers: list[ToolServers], tmp_path: Path, transport: str, request: pytest.FixtureRequest
) -> None:
    where = stdio_command() if transport == "stdio" else {"url": request.getfixturevalue("http_server").url}
    tool_servers = await start(servers, tmp_path, {"name": "fake", **where})
    assert "fake__extra" not in tool_servers.registry

    assert await call(tool_servers, "fake__add_tool", name="extra") == "added extra"

    await eventually(lambda: "fake__extra" in tool_servers.registry, "the new tool to be registered")
    assert await call(tool_servers, "fake__extra") == "extra answered"
    await tool_servers.stop()  # before the HTTP server goes


async def test_a_local_server_gets_a_minimal_environment_and_runs_in_its_folder(
    servers: list[ToolServers], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123:gateway-secret")
    (tmp_path / "home" / "work").mkdir(parents=True)
    server = stdio_command()
    server["env"] = {**server["env"], "SEARCH_API_KEY": "k-1"}  # type: ignore[dict-item]
    tool_servers = await start(servers, tmp_path / "home", {"name": "fake", **server, "cwd": "work"})

    assert await call(tool_servers, "fake__environment", name="TELEGRAM_BOT_TOKEN") == "unset"
    assert await call(tool_servers, "fake__environment", name="SEARCH_API_KEY") == "k-1"
    assert await call(tool_servers, "fake__where") == str(tmp_path / "home" / "work")


async def test_stopping_ends_the_server_process_and_drops_its_tools(servers: list[ToolServers], tmp_path: Path) -> None:
    starts = tmp_path / "starts"
    tool_servers = await start(servers, tmp_path, {"name": "fake", **stdio_command(starts)})
    (pid,) = map(int, starts.read_text().split())
    assert alive(pid) and "fake__lookup" in tool_servers.registry

    await tool_servers.stop()

    assert not alive(pid)
    assert len(tool_servers.registry) == 0
    assert tool_servers.health()["fake"]["state"] == "stopped"


async def test_a_server_down_at_start_is_logged_and_joins_once_it_answers(
    servers: list[ToolServers], tmp_path: Path
) -> None:
    first = serve_http()
    url = first.url
    first.stop()  # the port is free again: nothing answers there now
    with capture_logs() as logs:
        tool_servers = await start(servers, tmp_path, {"name": "web", "url": url})
    assert len(tool_servers.registry) == 0
    (failed,) = [line for line in logs if line["event"] == "mcp.server.start_failed"]
    assert failed["log_level"] == "error" and failed["server"] == "web"
    assert "check url and headers in tools.mcp_servers (name: web)" in failed["hint"]

    again = serve_http(int(url.rsplit(":", 1)[1].split("/")[0]))
    try:
        await eventually(lambda: "web__lookup" in tool_servers.registry, "the server to be picked up when it answers")
        assert await call(tool_servers, "web__lookup", key="lisbon") == "lisbon: 21 degrees and sunny"
    finally:
        await tool_servers.stop()
        again.stop()


async def test_a_call_of_a_confirm_tool_asks_first_and_runs_only_when_allowed(
    servers: list[ToolServers], tmp_path: Path
) -> None:
    asked: list[tuple[str, str, dict[str, Any]]] = []
    answers = iter(["The person said no: do not add the tool.", None])

    async def confirm(context: ToolContext, tool: Tool, arguments: dict[str, Any]) -> str | None:
        asked.append((context.session_id, tool.label, arguments))
        return next(answers)

    server = {"name": "fake", **stdio_command(), "confirm": ["add_*"]}
    tool_servers = await start(servers, tmp_path, server, confirm=confirm)

    assert await call(tool_servers, "fake__add_tool", name="first") == "The person said no: do not add the tool."
    assert await call(tool_servers, "fake__lookup", key="lisbon") == "lisbon: 21 degrees and sunny"  # not asked
    assert await call(tool_servers, "fake__add_tool", name="second") == "added second"
    assert asked == [("s1", "fake.add_tool", {"name": "first"}), ("s1", "fake.add_tool", {"name": "second"})]
    await eventually(lambda: "fake__second" in tool_servers.registry, "the allowed call to have run")
    assert "fake__first" not in tool_servers.registry


async def test_each_call_logs_one_info_line_without_its_arguments(servers: list[ToolServers], tmp_path: Path) -> None:
    tool_servers = await start(servers, tmp_path, {"name": "fake", **stdio_command(), "timeout": 1})
    with capture_logs() as logs:
        await call(tool_servers, "fake__lookup", key="ticket-7")
        await call(tool_servers, "fake__fail", reason="nope")
        await call(tool_servers, "fake__slow", seconds=30)
    lines = [line for line in logs if line["event"] == "tool.call"]
    assert [(line["log_level"], line["server"], line["tool"], line["ok"], line.get("outcome")) for line in lines] == [
        ("info", "fake", "lookup", True, None),
        ("info", "fake", "fail", False, "tool_error"),
        ("info", "fake", "slow", False, "timeout"),
    ]
    assert all(isinstance(line["ms"], int) for line in lines)
    at_info = [line for line in logs if line["log_level"] != "debug"]
    assert not any("ticket-7" in repr(line) or "nope" in repr(line) for line in at_info)


async def test_a_program_that_exits_at_once_is_logged_with_the_reason_and_what_to_do(
    servers: list[ToolServers], tmp_path: Path
) -> None:
    quits = {"name": "quits", "command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}
    with capture_logs() as logs:
        tool_servers = await start(servers, tmp_path, quits, {"name": "fake", **stdio_command()})
    failed, *again = [line for line in logs if line["event"] == "mcp.server.start_failed"]  # retried meanwhile
    assert failed["server"] == "quits" and failed["log_level"] == "error"
    assert all(line["log_level"] == "warning" for line in again)
    assert failed["error"].startswith("it closed the connection before answering")
    assert "run the command by hand from the Switchboard home" in failed["hint"]
    assert tool_servers.health()["fake"] == {"state": "running", "tools": 10, "restarts": 0}

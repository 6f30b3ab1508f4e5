"""A session's tools through the real gateway: fixed when it starts, byte for byte across turns, registry
changes and a restart; a new session sees the change; tools shown by their label; tools' pictures kept.

The tools stand for a tool server's (source ``github``, named ``github__...`` as the model calls them); the
fake model server records what each request offered.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

import gateway.delivery.progress
from agent.tools import Tool, ToolContext, ToolImage, ToolResult
from tests.agent.media_support import png
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.fakes.model_server.records import RequestRecord
from tests.gateway.conftest import GatewayFactory, Running, handled
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL

CHART = png(320, 200)
SERVERS = {"tools": {"mcp_servers": [{"name": "github", "command": "github-server"},
                                     {"name": "charts", "command": "charts-server"}]}}  # fmt: skip
"""The servers the tools stand for, configured (access offers a server's tools only when it is), never started."""
QUIET = {**SERVERS, "gateway": {"tool_progress": False}}


class ServerTool(Tool):
    """One of a tool server's tools, as the gateway registers it (source, own name, namespaced name)."""

    def __init__(self, server: str, title: str, description: str, result: str | ToolResult = "3 issues") -> None:
        self.source, self.title, self.name = server, title, f"{server}__{title}"
        self.description = description
        self.parameters = {"type": "object", "properties": {"q": {"type": "string"}}}
        self.result = result

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> str | ToolResult:
        return self.result


@pytest.fixture(autouse=True)
def no_edit_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gateway.delivery.progress, "EDIT_INTERVAL", 0.0)


def offered(record: RequestRecord) -> str:
    """The request's ``tools`` as the JSON text they were sent as (key order kept)."""
    return json.dumps(record.body.get("tools"), ensure_ascii=False)


def names(record: RequestRecord) -> list[str]:
    return [tool["name"] for tool in record.body.get("tools") or ()]


def tool_results(record: RequestRecord) -> list[dict[str, Any]]:
    return [block for message in record.messages if isinstance(message["content"], list)
            for block in message["content"] if block.get("type") == "tool_result"]  # fmt: skip


async def turn(running: Running, text: str, chat_id: str, replies: int) -> None:
    await running.adapter.inject(text, chat_id=chat_id, event_id=f"{chat_id}:{text}")  # new after a restart too
    await running.adapter.wait_sent(replies)
    await handled(running.store)


async def test_a_sessions_tools_stay_the_same_across_registry_changes_and_a_restart_and_new_sessions_see_the_change(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(QUIET)
    assert running.agent is not None
    running.agent.tools.replace("github", [ServerTool("github", "search_issues", "Search the issues.")])
    model_server.script(ToolCalls(ToolUse("github__search_issues", {"q": "crash"})), Text("three issues"))
    await turn(running, "any crash reports?", "c1", 1)
    first = offered(model_server.requests[0])
    assert "github__search_issues" in names(model_server.requests[0])

    # The server changes its list: search_issues is gone, list_prs is new; the open session keeps its tools.
    running.agent.tools.replace("github", [ServerTool("github", "list_prs", "List the pull requests.")])
    model_server.reset()
    model_server.script(ToolCalls(ToolUse("github__search_issues", {"q": "again"})), Text("it is gone"))
    await turn(running, "search again", "c1", 2)
    assert [offered(record) for record in model_server.requests] == [first, first]
    (gone,) = tool_results(model_server.requests[1])[-1:]
    assert gone["is_error"] is True and "no longer available" in json.dumps(gone["content"])

    # After a restart (the registry as the servers now offer it), the session still gets what it started with.
    await running.gateway.shutdown()
    running = await start_gateway(QUIET)
    assert running.agent is not None
    running.agent.tools.replace("github", [ServerTool("github", "list_prs", "List the pull requests.")])
    model_server.reset()
    model_server.script(Text("still here"))
    await turn(running, "hello again", "c1", 1)
    assert offered(model_server.last_request) == first

    # A new session (another chat) is offered the registry as it is now.
    model_server.reset()
    model_server.script(Text("fresh"))
    await turn(running, "hi", "c2", 2)
    assert "github__list_prs" in names(model_server.last_request)
    assert "github__search_issues" not in names(model_server.last_request)


async def test_progress_shows_a_server_tool_by_its_label(start_gateway: GatewayFactory, model_server: ModelServer) -> None:
    running = await start_gateway(SERVERS)
    assert running.agent is not None
    running.agent.tools.replace("github", [ServerTool("github", "search_issues", "Search the issues.")])
    model_server.script(ToolCalls(ToolUse("github__search_issues", {"q": "crash"})), Text("three issues"))
    await running.adapter.inject("any crash reports?", chat_id="c1")
    await running.adapter.wait_sent(2)
    await eventually(lambda: running.adapter.edits and running.adapter.edits[-1].text.startswith("Used:"),
                     "the final edit of the progress message")  # fmt: skip
    progress = running.adapter.sent[0]
    assert progress.text == "Working on it: using github.search_issues…"
    assert running.adapter.edits[-1].text == "Used: github.search_issues"


async def test_a_tools_picture_is_kept_in_the_media_folder_sent_to_the_model_and_stored_with_the_result(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(QUIET)
    assert running.agent is not None
    chart = ToolResult("the chart of open issues", images=(ToolImage(CHART, "image/png"),))
    running.agent.tools.replace("charts", [ServerTool("charts", "plot", "Plot a chart.", chart)])
    model_server.script(ToolCalls(ToolUse("charts__plot", {"q": "issues"})), Text("it is rising"))
    await turn(running, "plot the issues", "c1", 1)
    (seen,) = model_server.last_request.media
    assert seen.wire == "image" and seen.tool_use_id is not None and seen.data.startswith(b"\x89PNG")
    (session,) = await running.store.list_sessions()
    stored = [m for m in await running.store.load_messages(session.id) if m.role == "tool"]
    (part,) = stored[0].media
    assert part["origin"] == "tool" and (part["width"], part["height"]) == (320, 200)
    assert (running.home / "media").exists() and any(p.name == part["sha256"] for p in (running.home / "media").rglob("*"))

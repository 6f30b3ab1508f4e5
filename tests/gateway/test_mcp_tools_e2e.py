"""Tools of an MCP server through the real gateway: the fake MCP server over stdio, the fake model, the loopback adapter.

The model's requests are the proof: the tools they offer, and the tool results they carry back.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from agent.messages import ToolCall
from agent.tools import ToolContext, ToolImage, ToolResult
from tests.fakes.mcp_server import PICTURE, stdio_command
from tests.fakes.model_server import ModelServer, RequestRecord, Text, ToolUse
from tests.gateway.conftest import GatewayFactory, Running, handled
from tests.waiting import eventually


def tools_config(starts: Path | None = None, **server: Any) -> dict[str, Any]:
    """The ``tools`` section with the fake server over stdio, named ``fake``."""
    return {"tools": {"mcp_servers": [{"name": "fake", **stdio_command(starts), **server}]}}


def last_tool_result(record: RequestRecord) -> str:
    """The text of the newest tool result a request carries back to the model (Anthropic's wire shape)."""
    for message in reversed(record.messages):
        for block in message.get("content") or []:
            if isinstance(block, Mapping) and block.get("type") == "tool_result":
                content = block.get("content")
                if isinstance(content, list):
                    return "".join(part.get("text", "") for part in content if isinstance(part, Mapping))
                return str(content)
    raise AssertionError("the request carries no tool result")


def answer_from_the_tool(record: RequestRecord) -> Text:
    """The fake model's answer once a tool result is back: it repeats what the tool said."""
    return Text(f"Here is what I found: {last_tool_result(record)}")


async def answering(start_gateway: GatewayFactory, model_server: ModelServer, overrides: dict[str, Any]) -> Running:
    """A gateway with ``overrides``, whose fake model repeats a tool's result once it is back."""
    running = await start_gateway(overrides)
    model_server.responder = answer_from_the_tool
    return running


async def ask(running: Running, text: str, chat: str = "c1") -> str:
    """Send ``text`` as a user and return the reply's text."""
    before = len(running.adapter.sent)
    await running.adapter.inject(text, chat_id=chat)
    await running.adapter.wait_sent(before + 1)
    await handled(running.store)
    return running.adapter.sent[-1].text


async def test_the_model_calls_a_server_tool_and_the_answer_uses_its_result(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await answering(start_gateway, model_server, tools_config())
    model_server.script(ToolUse("fake__lookup", {"key": "ticket-7"}))

    reply = await ask(running, "what is ticket 7 about?")

    assert reply == "Here is what I found: ticket-7: the printer on floor 3 is out of toner (opened by Ada, priority high)"
    offered = {tool["name"]: tool for tool in model_server.requests[0].tools}
    assert {"fake__lookup", "fake__slow", "fake__picture", "memory"} <= set(offered)
    assert offered["fake__lookup"]["input_schema"]["required"] == ["key"]
    assert "knowledge base" in offered["fake__lookup"]["description"]


async def test_a_crash_mid_call_is_an_error_result_and_the_server_is_restarted(
    start_gateway: GatewayFactory, model_server: ModelServer, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    running = await answering(start_gateway, model_server, tools_config(starts))
    model_server.script(ToolUse("fake__crash"))

    reply = await ask(running, "try the crash tool")

    assert reply.startswith("Here is what I found: error: the fake tool server failed during the call")
    await eventually(lambda: len(starts.read_text().split()) == 2, "the fake server to be started again")
    await eventually(lambda: running.gateway.tool_servers.health()["fake"]["state"] == "running", "it to run again")
    model_server.script(ToolUse("fake__lookup", {"key": "lisbon"}))
    assert await ask(running, "and the weather in Lisbon?") == "Here is what I found: lisbon: 21 degrees and sunny"
    assert running.gateway.tool_servers.health()["fake"]["restarts"] == 1


async def test_a_slow_tool_times_out_into_an_error_result_and_the_turn_goes_on(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await answering(start_gateway, model_server, tools_config(timeout=1))
    model_server.script(ToolUse("fake__slow", {"seconds": 30}))

    reply = await ask(running, "wait for it")

    assert reply == (
        "Here is what I found: error: fake.slow did not answer within 1 s and the call was given up; "
        "try again later, or do without it"
    )
    model_server.script(ToolUse("fake__lookup", {"key": "lisbon"}))  # the same server still answers
    assert await ask(running, "weather?") == "Here is what I found: lisbon: 21 degrees and sunny"


async def test_a_failing_tool_and_bad_arguments_are_results_the_model_reads(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await answering(start_gateway, model_server, tools_config())
    model_server.script(ToolUse("fake__fail", {"reason": "the disk is full"}))
    assert await ask(running, "fail please") == "Here is what I found: error: Error executing tool fail: the disk is full"
    model_server.script(ToolUse("fake__long_text", {"size": "many"}))
    reply = await ask(running, "a long one")
    assert reply == "Here is what I found: error: fake__long_text: argument 'size' must be of type integer"


async def test_a_long_result_is_cut_to_the_budget_with_a_note(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    config = tools_config()
    config["tools"]["result_budget"] = 1000
    running = await answering(start_gateway, model_server, config)
    model_server.script(ToolUse("fake__long_text", {"size": 5000}))

    reply = await ask(running, "a long one")

    found = reply.removeprefix("Here is what I found: ")
    assert found.startswith("0123456789" * 100 + "\n[cut: the tool returned 5,000 characters; only the first 1,000")


async def test_an_image_result_reaches_the_agent_as_a_tool_result(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    running = await start_gateway(tools_config())
    tools = running.gateway.tool_servers.registry.bind(ToolContext(session_id="s1", platform="loopback"))

    result = await tools.call(ToolCall(id="call-1", name="fake__picture", arguments="{}"))

    assert result == ToolResult("", (ToolImage(PICTURE, "image/png"),))
    assert await tools.call(ToolCall(id="call-2", name="fake__document", arguments="{}")) == (
        "[resource file:///notes/plan.txt]\nthe plan: ship it"
    )


async def test_a_server_that_cannot_start_is_left_out_and_the_gateway_runs_on(
    start_gateway: GatewayFactory, model_server: ModelServer
) -> None:
    broken = {"name": "broken", "command": "/nonexistent/mcp-server"}
    config = tools_config()
    config["tools"]["mcp_servers"].append(broken)
    running = await start_gateway(config)
    model_server.responder = lambda record: Text("still here")

    assert await ask(running, "hello") == "still here"
    names = {tool["name"] for tool in model_server.requests[-1].tools}
    assert "fake__lookup" in names and not any(name.startswith("broken__") for name in names)
    assert running.gateway.tool_servers.health()["broken"]["state"] in ("starting", "restarting")


EVERY_OTHER = ["fail", "picture", "long_text", "document", "environment", "where", "crash", "add_tool"]


@pytest.mark.parametrize("include, exclude", [(["look*", "slow"], []), (["*"], EVERY_OTHER)])
async def test_include_and_exclude_pick_the_tools_offered(
    start_gateway: GatewayFactory, model_server: ModelServer, include: list[str], exclude: list[str]
) -> None:
    running = await start_gateway(tools_config(include=include, exclude=exclude))
    model_server.responder = lambda record: Text("ok")
    await ask(running, "hello")
    names = {tool["name"] for tool in model_server.requests[-1].tools}
    assert {name for name in names if name.startswith("fake__")} == {"fake__lookup", "fake__slow"}

"""What tools return, on its way to the model: pictures kept and sent as each API takes them, failures as
errors, stand-ins for models without vision, token estimates; and a session's frozen tools.

Through the real anthropic and openai SDKs against the fake model server, which refuses what the real
APIs refuse (a picture in an OpenAI tool message, a tool call not answered right after it).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from agent.caching import CachePolicy
from agent.core import Agent, AgentSettings
from agent.media import KeptImage, MediaPart
from agent.messages import ChatMessage, ToolCall
from agent.providers.base import ModelRequest, Provider, ToolSpec
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from agent.tokens import estimate_message
from agent.tools import Tool, ToolContext, ToolImage, ToolRegistry, ToolResult
from agent.tools.offer import SessionTools, specs_from_json, specs_json
from tests.agent.media_support import MemorySource, png, sha
from tests.agent.sdk_providers import build
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.fakes.model_server.records import RequestRecord

CHART = png(320, 200)
CHART_PART = MediaPart(kind="image", mime="image/png", sha256=sha(CHART), size=len(CHART), origin="tool", width=320,
                       height=200)  # fmt: skip
PLOT = ToolSpec("charts__plot", "Plot a chart.", {"type": "object", "properties": {"q": {"type": "string"}}})
STATS = ToolSpec("charts__stats", "Count things.")
STARTED = dt.datetime(2026, 11, 27, 14, 0, tzinfo=dt.timezone.utc)


def step(*results: ChatMessage) -> list[ChatMessage]:
    """A user message, the model's calls of the tools ``results`` answer, and those results."""
    calls = [ToolCall(r.tool_call_id or "", r.tool_name or "", "{}") for r in results]
    return [ChatMessage.user("plot the issues"), ChatMessage.assistant("", calls), *results]


def request(provider: Provider, messages: list[ChatMessage], **fields: Any) -> ModelRequest:
    model = "claude-sonnet-4-6" if provider.name == "anthropic" else "gpt-4o"
    fields.setdefault("media", {CHART_PART.sha256: CHART})
    return ModelRequest(model=model, system="You are a test.", messages=messages, tools=[PLOT, STATS], **fields)


def chart_result(call_id: str = "call_1", text: str = "the chart of open issues") -> ChatMessage:
    return ChatMessage(role="tool", content=text, tool_call_id=call_id, tool_name="charts__plot", media=(CHART_PART,))


async def test_a_tools_picture_reaches_the_model_as_each_api_takes_it(provider: Provider, model_server: ModelServer) -> None:
    plain = ChatMessage.tool("call_2", "42 open", "charts__stats")
    await provider.complete(request(provider, step(chart_result(), plain)))
    record = model_server.last_request
    assert record.status == 200
    (seen,) = record.media
    assert seen.data == CHART and seen.media_type == "image/png"
    if provider.name == "anthropic":  # inside the tool's result, after its text
        assert seen.wire == "image" and seen.tool_use_id == "call_1"
        (result, other) = record.messages[-1]["content"]
        assert [block["type"] for block in result["content"]] == ["text", "image"]
        assert result["content"][0]["text"] == "the chart of open issues" and other["content"] == "42 open"
    else:  # tool messages take text only: the picture comes in a user message after every tool result
        *_, first, second, pictures = record.messages
        assert (first["role"], second["role"], pictures["role"]) == ("tool", "tool", "user")
        assert first["content"].startswith("the chart of open issues") and "after the tool results" in first["content"]
        assert seen.wire == "image_url" and seen.message == len(record.messages) - 1
        assert pictures["content"][0]["text"] == "The 1 picture the charts__plot tool returned (call call_1):"


async def test_a_model_without_vision_reads_a_stand_in_for_a_tools_picture(
    provider: Provider, model_server: ModelServer
) -> None:
    await provider.complete(request(provider, step(chart_result()), vision=False))
    record = model_server.last_request
    assert record.status == 200 and record.media == []
    sent = json.dumps(record.messages)
    assert "[picture from a tool (320x200): not shown: this model cannot see images]" in sent
    assert record.messages[-1]["role"] != "user" or provider.name == "anthropic"  # no empty picture message


async def test_a_failed_call_reaches_the_model_as_an_error(provider: Provider, model_server: ModelServer) -> None:
    failed = ChatMessage.tool("call_1", "error: the chart server is down", "charts__plot")
    await provider.complete(request(provider, step(failed)))
    last = model_server.last_request.messages[-1]
    if provider.name == "anthropic":
        (block,) = last["content"]
        assert block["is_error"] is True and block["content"] == "error: the chart server is down"
    else:
        assert last["role"] == "tool" and last["content"] == "error: the chart server is down"
        assert "is_error" not in last


class Chart(Tool):
    name = "charts__plot"
    source, title = "charts", "plot"
    description = "Plot a chart."
    parameters = {"type": "object", "properties": {}}

    def __init__(self, result: ToolResult) -> None:
        self.result = result

    async def run(self, arguments: dict[str, Any], context: ToolContext) -> ToolResult:
        return self.result


class Folder(MemorySource):
    """An in-memory media folder: the sink tools' pictures are kept in, and the source the loop reads them from."""

    async def keep_image(self, data: bytes, mime: str) -> KeptImage:
        if not data.startswith(b"\x89PNG"):
            raise ValueError("the picture is damaged or incomplete and could not be read")
        return KeptImage(sha256=self.add(data), mime=mime, size=len(data), width=320, height=200)


async def run_turn(model_server: ModelServer, home: Path, result: ToolResult, folder: Folder | None) -> list[ChatMessage]:
    claude = build("anthropic", model_server)
    target = ModelTarget(claude, "claude-sonnet-4-6", CachePolicy(True, True))
    agent = Agent(AgentSettings(home=home), ModelRouter([target], RetryPolicy(max_attempts=1)),
                  tools=ToolRegistry([Chart(result)]), media=folder, pictures=folder)  # fmt: skip
    model_server.script(ToolCalls(ToolUse("charts__plot", {})), Text("it is rising"))
    try:
        prompt = await agent.build_prompt(session_id="S1", platform="telegram", started_at=STARTED, memory=None)
        session = agent.open_session(session_id="S1", platform="telegram", memory=None)
        turn = await session.run_turn([prompt.message(), ChatMessage.user("plot it")], user_time=1000.0)
    finally:
        await agent.aclose()
    return [message for message in turn.history if message.role == "tool"]


async def test_the_loop_keeps_a_tools_pictures_and_marks_its_failure(model_server: ModelServer, tmp_path: Path) -> None:
    folder = Folder()
    result = ToolResult("half of it", images=(ToolImage(CHART, "image/png"), ToolImage(b"junk", "image/png")),
                        is_error=True)  # fmt: skip
    (message,) = await run_turn(model_server, tmp_path, result, folder)
    assert message.content.startswith("error: half of it")
    assert "[picture 2 the tool returned (image/png) is not shown: the picture is damaged" in message.content
    (part,) = message.media
    assert (part.origin, part.sha256, part.width, part.height) == ("tool", sha(CHART), 320, 200)
    block = tool_block(model_server.last_request)
    assert block["is_error"] is True and [b["type"] for b in block["content"]] == ["text", "image"]
    assert model_server.last_request.media[0].data == CHART


async def test_without_a_sink_the_result_says_its_pictures_are_not_shown(model_server: ModelServer, tmp_path: Path) -> None:
    (message,) = await run_turn(model_server, tmp_path, ToolResult("chart", images=(ToolImage(CHART, "image/png"),)), None)
    assert message.media == () and "is not shown: this agent keeps no pictures" in message.content
    assert "is_error" not in tool_block(model_server.last_request)


def tool_block(record: RequestRecord) -> dict[str, Any]:
    return next(block for block in record.messages[-1]["content"] if block.get("type") == "tool_result")


def test_a_tools_picture_counts_by_its_pixels() -> None:
    text_only = ChatMessage.tool("call_1", "the chart of open issues", "charts__plot")
    assert estimate_message(chart_result()) - estimate_message(text_only) >= 320 * 200 // 750
    assert estimate_message(chart_result(), vision=False) - estimate_message(text_only) < 40  # its stand-in line


async def test_a_session_keeps_its_tools_and_a_gone_one_answers_with_an_error() -> None:
    registry = ToolRegistry([Chart(ToolResult("ok"))])
    frozen = specs_from_json(specs_json(registry.specs()))
    assert frozen == tuple(registry.specs()) and specs_json(frozen) == specs_json(registry.specs())
    tools = SessionTools(registry, ToolContext(session_id="S1", platform="telegram"), frozen)
    registry.replace("charts", [])  # its server stopped
    assert tools.specs() == list(frozen)
    gone = await tools.call(ToolCall("c1", "charts__plot", "{}"))
    assert gone == ("error: the charts__plot tool is no longer available (its tool server stopped or no longer "
                    "offers it); go on without it, and tell the user if their request needed it")  # fmt: skip
    unknown = await tools.call(ToolCall("c2", "shell__run", "{}"))
    assert unknown == "error: there is no tool named 'shell__run' (available: charts__plot)"


async def test_the_system_breakpoint_caches_the_tools_before_it(model_server: ModelServer) -> None:
    """Anthropic reads tools, then system, then messages: the system prompt's breakpoint covers the tool
    definitions, so a session whose tools stay the same reads them from cache, and other tools miss it."""
    claude = build("anthropic", model_server)
    system = "You are a careful assistant. " * 300  # past the smallest prefix the API caches

    async def ask(tools: list[ToolSpec], text: str) -> RequestRecord:
        await claude.complete(ModelRequest(model="claude-sonnet-4-6", system=system, tools=tools, cache_ttl="5m",
                                           messages=[ChatMessage.user(text)]))  # fmt: skip
        return model_server.last_request

    try:
        first = await ask([PLOT, STATS], "first question")
        again = await ask([PLOT, STATS], "another question")
        other = await ask([STATS], "and a third")
    finally:
        await claude.aclose()
    assert first.figures is not None and again.figures is not None and other.figures is not None
    system_at = next(at for at, block in enumerate(again.blocks) if block.is_breakpoint)  # the system prompt's
    assert system_at == 2  # after the two tools
    assert again.figures.cache_read >= sum(block.tokens for block in again.blocks[: system_at + 1]) > 0
    assert other.figures.cache_read == 0  # other tools: the cached prefix no longer matches from its first block

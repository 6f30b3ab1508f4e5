"""The tool loop through the real SDKs and the real compressor, against the fake model server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from agent.caching import CachePolicy
from agent.compressor import CompressionResult, ContextCompressor
from agent.errors import ModelUnavailableError
from agent.loop import BUDGET_NOTE, CANCELLED_RESULT, LoopSettings, ToolLoop
from agent.messages import ChatMessage, ToolCall
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.base import ModelResponse, ToolSpec
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from agent.summarizer import SUMMARIZER_SYSTEM, ModelSummarizer
from agent.tokens import estimate_message
from tests.fakes.model_server import ContextTooLong, ModelServer, RequestRecord, Text, ToolCalls, ToolUse
from tests.waiting import eventually

MODEL = "claude-sonnet-4-6"


class Tools:
    """Test tools: echo (with an optional delay), fail, and hang."""

    def __init__(self) -> None:
        self.started: list[str] = []

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec(name, f"test tool {name}") for name in ("echo", "fail", "hang")]

    async def call(self, call: ToolCall) -> str:
        args = call.parsed_arguments()
        self.started.append(call.name)
        if call.name == "echo":
            await asyncio.sleep(args.get("delay", 0))
            return f"echo:{args.get('text', '')}"
        if call.name == "fail":
            raise RuntimeError("disk full")
        await asyncio.Event().wait()
        return "never"


class Recorder:
    def __init__(self) -> None:
        self.messages: list[ChatMessage] = []
        self.compactions: list[CompressionResult] = []
        self.calls: list[ModelResponse] = []

    async def on_message(self, message: ChatMessage) -> None:
        self.messages.append(message)

    async def on_compaction(self, result: CompressionResult) -> None:
        self.compactions.append(result)

    async def on_model_call(self, response: ModelResponse, cost_usd: float | None) -> None:
        self.calls.append(response)


@pytest_asyncio.fixture
async def provider(model_server: ModelServer) -> AsyncIterator[AnthropicProvider]:
    instance = AnthropicProvider(api_key="test", base_url=model_server.base_url, timeout=5.0)
    yield instance
    await instance.aclose()


def make_loop(
    provider: AnthropicProvider, *, context_length: int = 200_000, tools: Tools | None = None, **settings: float
) -> ToolLoop:
    router = ModelRouter([ModelTarget(provider, MODEL, CachePolicy(True, True))], RetryPolicy(max_attempts=1))
    engine = ContextCompressor(
        context_length, protect_last_n=4, summarizer=ModelSummarizer(router), estimate=estimate_message
    )
    return ToolLoop(router, engine, tools or Tools(), estimate=estimate_message, settings=LoopSettings(**settings))  # type: ignore[arg-type]


def start(*turns: ChatMessage) -> list[ChatMessage]:
    return [ChatMessage.system("You are a test assistant."), *turns]


async def test_tools_run_and_results_return_in_call_order(provider: AnthropicProvider, model_server: ModelServer) -> None:
    model_server.script(
        ToolCalls(ToolUse("echo", {"text": "slow", "delay": 0.2}), ToolUse("echo", {"text": "fast"}), ToolUse("fail")),
        Text("all done"),
    )
    recorder = Recorder()
    result = await make_loop(provider).run(start(ChatMessage.user("go")), observer=recorder)
    assert result.reply == "all done" and result.outcome == "answered"
    roles = [m.role for m in recorder.messages]
    assert roles == ["assistant", "tool", "tool", "tool", "assistant"]
    results = [m.content for m in recorder.messages if m.role == "tool"]
    assert results == ["echo:slow", "echo:fast", "error: the fail tool failed: disk full"]
    calls = recorder.messages[0].tool_calls
    assert [m.tool_call_id for m in recorder.messages[1:4]] == [c.id for c in calls]
    # The second request carried the tool results back as tool_result blocks.
    second = model_server.requests[1].body["messages"][-1]["content"]
    assert [block["type"] for block in second] == ["tool_result"] * 3
    assert result.model_calls == 2 and result.usage.output_tokens > 0
    assert result.history[-1].content == "all done"


async def test_a_hanging_tool_times_out_as_text(provider: AnthropicProvider, model_server: ModelServer) -> None:
    model_server.script(ToolUse("hang"), Text("ok"))
    result = await make_loop(provider, tool_timeout=0.2).run(start(ChatMessage.user("go")))
    tool = [m for m in result.history if m.role == "tool"][0]
    assert tool.content == "error: the hang tool did not finish within 0.2 seconds"


async def test_step_budget_ends_with_a_reply_that_may_not_call_tools(
    provider: AnthropicProvider, model_server: ModelServer
) -> None:
    def respond(record: RequestRecord) -> ToolUse | Text:
        return Text("summary of progress") if record.body.get("tool_choice") == {"type": "none"} else ToolUse("echo", {"text": "again"})

    model_server.responder = respond
    result = await make_loop(provider, max_iterations=3).run(start(ChatMessage.user("loop forever")))
    assert result.outcome == "budget_exhausted"
    assert result.reply == "summary of progress"
    assert len(model_server.requests) == 4
    last = model_server.requests[-1]
    # The tools are still described (the API refuses tool blocks without them; the cached prefix holds).
    assert last.status == 200 and last.body["tools"] == model_server.requests[0].body["tools"]
    assert BUDGET_NOTE in json.dumps(last.body["messages"][-1])


async def test_cancel_leaves_no_call_without_a_result(provider: AnthropicProvider, model_server: ModelServer) -> None:
    model_server.script(ToolUse("hang"))
    recorder, tools = Recorder(), Tools()
    task = asyncio.create_task(make_loop(provider, tools=tools).run(start(ChatMessage.user("go")), observer=recorder))
    await eventually(lambda: tools.started == ["hang"], "the tool call to start")
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert [m.role for m in recorder.messages] == ["assistant", "tool"]
    assert recorder.messages[1].content == CANCELLED_RESULT
    assert recorder.messages[1].tool_call_id == recorder.messages[0].tool_calls[0].id


def long_history(turns: int) -> list[ChatMessage]:
    history = start()
    for index in range(turns):
        history += [ChatMessage.user(f"question {index} " + "words " * 60), ChatMessage.assistant(f"answer {index} " + "text " * 60)]
    return history + [ChatMessage.user("the latest question")]


def is_summary_call(record: RequestRecord) -> bool:
    system = record.body.get("system", "")
    text = system if isinstance(system, str) else "".join(block["text"] for block in system)
    return text == SUMMARIZER_SYSTEM


async def test_context_length_error_compacts_and_retries_once(provider: AnthropicProvider, model_server: ModelServer) -> None:
    model_server.responder = lambda record: Text("## Goal\nstuff") if is_summary_call(record) else Text("fresh answer")
    model_server.script(ContextTooLong())
    recorder = Recorder()
    # The window is big enough not to compact up front, small enough to leave a middle to summarise.
    result = await make_loop(provider, context_length=4000).run(long_history(12), observer=recorder)
    assert result.reply == "fresh answer"
    assert len(recorder.compactions) == 1 and result.compactions == 1
    kinds = ["summary" if is_summary_call(r) else "turn" for r in model_server.requests]
    assert kinds == ["turn", "summary", "turn"]
    retried = model_server.requests[-1].body["messages"]
    assert len(retried) < 25
    assert retried[-1]["content"][-1]["text"] == "the latest question"


async def test_compacts_before_the_call_when_over_the_threshold(provider: AnthropicProvider, model_server: ModelServer) -> None:
    model_server.responder = lambda record: Text("## Goal\nkeep going") if is_summary_call(record) else Text("answer")
    history = long_history(30)
    tokens = sum(estimate_message(m) for m in history)
    recorder = Recorder()
    result = await make_loop(provider, context_length=int(tokens * 1.5)).run(history, observer=recorder)
    assert recorder.compactions and recorder.compactions[0].compacted
    assert is_summary_call(model_server.requests[0])
    assert len(result.history) < len(history)
    assert result.history[-1].content == "answer"


async def test_a_context_that_never_fits_tells_the_user_what_to_do(provider: AnthropicProvider, model_server: ModelServer) -> None:
    model_server.responder = lambda record: Text("## Goal\nx") if is_summary_call(record) else ContextTooLong()
    with pytest.raises(ModelUnavailableError) as caught:
        await make_loop(provider, context_length=4000).run(long_history(12))
    assert "/new" in caught.value.user_message

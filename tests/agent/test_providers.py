"""Providers through the real anthropic / openai SDKs against the fake model server."""

from __future__ import annotations

import json

import pytest

from agent.caching import CachePolicy
from agent.errors import ContextTooLongError, ErrorKind, ModelUnavailableError, ProviderError
from agent.messages import ChatMessage, ToolCall
from agent.providers.base import ModelRequest, Provider, ToolSpec
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from agent.usage import PriceTable, Usage
from tests.agent.sdk_providers import build
from tests.fakes.model_server import (
    AuthFailed,
    ContextTooLong,
    InvalidRequest,
    ModelServer,
    Overloaded,
    RateLimited,
    ServerError,
    Text,
    Timeout,
    ToolCalls,
    ToolUse,
)

TOOLS = [ToolSpec("lookup", "Look a word up.", {"type": "object", "properties": {"word": {"type": "string"}}})]


def request_for(provider: Provider, messages: list[ChatMessage], **fields: object) -> ModelRequest:
    model = "claude-sonnet-4-6" if provider.name == "anthropic" else "gpt-5"
    return ModelRequest(model=model, system="You are a test.", messages=messages, **fields)  # type: ignore[arg-type]


async def test_text_reply_and_usage(provider: Provider, model_server: ModelServer) -> None:
    model_server.script(Text("hello there"))
    response = await provider.complete(request_for(provider, [ChatMessage.user("hi")]))
    assert response.message == ChatMessage.assistant("hello there")
    record = model_server.last_request
    assert response.usage.prompt_tokens == record.figures.prompt_tokens
    assert response.usage.output_tokens > 0
    assert response.stop_reason in {"end_turn", "stop"}


async def test_tool_call_round_trip(provider: Provider, model_server: ModelServer) -> None:
    model_server.script(ToolCalls(ToolUse("lookup", {"word": "cat"}), ToolUse("lookup", {"word": "dog"})), Text("done"))
    first = await provider.complete(request_for(provider, [ChatMessage.user("define")], tools=TOOLS))
    calls = first.message.tool_calls
    assert [c.name for c in calls] == ["lookup", "lookup"]
    assert [json.loads(c.arguments) for c in calls] == [{"word": "cat"}, {"word": "dog"}]
    history = [
        ChatMessage.user("define"),
        first.message,
        ChatMessage.tool(calls[0].id, "a small animal", "lookup"),
        ChatMessage.tool(calls[1].id, "a loyal animal", "lookup"),
    ]
    final = await provider.complete(request_for(provider, history, tools=TOOLS))
    assert final.message.content == "done"
    assert model_server.last_request.ends_with_tool_result


async def test_anthropic_wire_shape_merges_tool_results_and_places_breakpoints(model_server: ModelServer) -> None:
    provider = build("anthropic", model_server)
    call = ToolCall("call_1", "lookup", '{"word": "cat"}')
    history = [
        ChatMessage.user("define cat"),
        ChatMessage.assistant("", [call]),
        ChatMessage.tool("call_1", "a small animal", "lookup"),
        ChatMessage.user("and dog?"),
    ]
    model_server.script(Text("ok"))
    await provider.complete(request_for(provider, history, tools=TOOLS, cache_ttl="1h", ephemeral="(group chat)"))
    body = model_server.last_request.body
    assert body["system"] == [{"type": "text", "text": "You are a test.", "cache_control": {"type": "ephemeral", "ttl": "1h"}}]
    roles = [m["role"] for m in body["messages"]]
    assert roles == ["user", "assistant", "user"]
    tool_turn = body["messages"][2]["content"]
    assert tool_turn[0]["type"] == "tool_result" and tool_turn[0]["tool_use_id"] == "call_1"
    # The call-time note comes last, after (outside) the final cache breakpoint.
    assert tool_turn[-2] == {"type": "text", "text": "and dog?", "cache_control": {"type": "ephemeral", "ttl": "1h"}}
    assert tool_turn[-1] == {"type": "text", "text": "(group chat)"}
    markers = [block for m in body["messages"] for block in m["content"] if "cache_control" in block]
    assert len(markers) == 3
    await provider.aclose()


async def test_openai_usage_splits_cached_tokens(model_server: ModelServer) -> None:
    provider = build("openai", model_server)
    history = [ChatMessage.user("x" * 400)]
    model_server.script(Text("one"), Text("two"))
    first = await provider.complete(request_for(provider, history))
    second = await provider.complete(request_for(provider, [*history, ChatMessage.assistant("one"), ChatMessage.user("more")]))
    assert first.usage.cache_read_tokens == 0
    assert second.usage.cache_read_tokens > 0
    assert second.usage.prompt_tokens == model_server.last_request.figures.prompt_tokens
    await provider.aclose()


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_errors_are_translated(kind: str, model_server: ModelServer) -> None:
    provider = build(kind, model_server, timeout=0.3)
    cases = [
        (RateLimited(7), ErrorKind.RATE_LIMIT),
        (ServerError(), ErrorKind.SERVER),
        (Overloaded(), ErrorKind.OVERLOADED),
        (AuthFailed(), ErrorKind.AUTH),
        (Timeout(seconds=3), ErrorKind.TIMEOUT),
    ]
    for reply, expected in cases:
        model_server.script(reply)
        with pytest.raises(ProviderError) as caught:
            await provider.complete(request_for(provider, [ChatMessage.user("hi")]))
        assert caught.value.kind is expected
        if expected is ErrorKind.RATE_LIMIT:
            assert caught.value.retry_after == 7
    model_server.script(ContextTooLong())
    with pytest.raises(ContextTooLongError):
        await provider.complete(request_for(provider, [ChatMessage.user("hi")]))
    await provider.aclose()


@pytest.mark.parametrize(
    "wording",
    ["input length and `max_tokens` exceed context limit: 197000 + 8192 > 200000, decrease input length or `max_tokens`",
     "the request exceeds the available context size, try increasing it"],
)  # fmt: skip
async def test_other_context_overflow_wordings_are_recognised(provider: Provider, model_server: ModelServer, wording: str) -> None:
    model_server.script(InvalidRequest(message=wording))
    with pytest.raises(ContextTooLongError):
        await provider.complete(request_for(provider, [ChatMessage.user("hi")]))


async def test_a_request_may_describe_tools_without_allowing_a_call(provider: Provider, model_server: ModelServer) -> None:
    model_server.script(Text("wrapping up"))
    await provider.complete(request_for(provider, [ChatMessage.user("hi")], tools=TOOLS, tools_off=True))
    body = model_server.last_request.body
    assert body["tools"] and body["tool_choice"] == ({"type": "none"} if provider.name == "anthropic" else "none")


class RecordingSleep:
    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


def router_for(*providers: tuple[Provider, str], sleep: RecordingSleep) -> ModelRouter:
    targets = [ModelTarget(p, model, CachePolicy(p.name == "anthropic", True)) for p, model in providers]
    return ModelRouter(targets, RetryPolicy(max_attempts=3, base_delay=1.0, jitter=0.0), sleep=sleep, rand=lambda: 0.0)


async def test_retries_honour_retry_after_then_succeed(model_server: ModelServer) -> None:
    sleep = RecordingSleep()
    provider = build("anthropic", model_server)
    router = router_for((provider, "claude-sonnet-4-6"), sleep=sleep)
    model_server.script(RateLimited(5), Overloaded(), Text("finally"))
    response = await router.complete(request_for(provider, [ChatMessage.user("hi")]))
    assert response.message.content == "finally"
    assert sleep.delays == [5.0, 2.0]  # retry-after honoured, then exponential backoff (1 s, 2 s, ...)
    assert len(model_server.requests) == 3
    await provider.aclose()


async def test_timeouts_are_retried(model_server: ModelServer) -> None:
    sleep = RecordingSleep()
    provider = build("openai", model_server, timeout=0.3)
    router = router_for((provider, "gpt-5"), sleep=sleep)
    model_server.script(Timeout(seconds=3), Text("after a timeout"))
    response = await router.complete(request_for(provider, [ChatMessage.user("hi")]))
    assert response.message.content == "after a timeout"
    assert sleep.delays == [1.0]
    await provider.aclose()


async def test_fallback_model_after_retries_run_out(model_server: ModelServer) -> None:
    sleep = RecordingSleep()
    primary, backup = build("anthropic", model_server), build("openai", model_server)
    router = router_for((primary, "claude-sonnet-4-6"), (backup, "gpt-5"), sleep=sleep)
    model_server.script(ServerError(), ServerError(), ServerError(), Text("from the backup"))
    response = await router.complete(request_for(primary, [ChatMessage.user("hi")], cache_ttl="5m"))
    assert response.message.content == "from the backup"
    assert [r.api for r in model_server.requests] == ["anthropic"] * 3 + ["openai"]
    assert model_server.requests[-1].model == "gpt-5"
    # The backup endpoint gets no cache breakpoints: caching is off for it.
    assert "cache_control" not in json.dumps(model_server.requests[-1].body)
    for p in (primary, backup):
        await p.aclose()


async def test_auth_failure_falls_back_without_retrying(model_server: ModelServer) -> None:
    sleep = RecordingSleep()
    primary, backup = build("anthropic", model_server), build("anthropic", model_server)
    router = router_for((primary, "claude-sonnet-4-6"), (backup, "claude-haiku-4-5"), sleep=sleep)
    model_server.script(AuthFailed(), Text("haiku here"))
    response = await router.complete(request_for(primary, [ChatMessage.user("hi")]))
    assert response.message.content == "haiku here" and sleep.delays == []
    for p in (primary, backup):
        await p.aclose()


async def test_every_model_failing_gives_a_plain_message(model_server: ModelServer) -> None:
    sleep = RecordingSleep()
    provider = build("anthropic", model_server)
    router = router_for((provider, "claude-sonnet-4-6"), sleep=sleep)
    model_server.script(Overloaded(), Overloaded(), Overloaded())
    with pytest.raises(ModelUnavailableError) as caught:
        await router.complete(request_for(provider, [ChatMessage.user("hi")]))
    assert "overloaded" in caught.value.user_message and "again" in caught.value.user_message
    assert len(caught.value.causes) == 1
    await provider.aclose()


async def test_context_length_is_not_retried(model_server: ModelServer) -> None:
    sleep = RecordingSleep()
    provider = build("anthropic", model_server)
    router = router_for((provider, "claude-sonnet-4-6"), sleep=sleep)
    model_server.script(ContextTooLong())
    with pytest.raises(ContextTooLongError):
        await router.complete(request_for(provider, [ChatMessage.user("hi")]))
    assert sleep.delays == [] and len(model_server.requests) == 1
    await provider.aclose()


def test_cost_from_price_table() -> None:
    prices = PriceTable()
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=2_000_000, cache_write_tokens=1_000_000)
    # sonnet: $3 in, $15 out, reads 0.30, 5m writes 3.75, 1h writes 6.00
    assert prices.cost("claude-sonnet-4-6", usage) == pytest.approx(3 + 1.5 + 0.6 + 3.75)
    assert prices.cost("anthropic/claude-sonnet-4-6", usage, cache_ttl="1h") == pytest.approx(3 + 1.5 + 0.6 + 6.0)
    assert prices.cost("gpt-4o-mini", Usage(input_tokens=1_000_000)) == pytest.approx(0.15)
    assert prices.cost("some-local-model", usage) is None

"""Streams that fail after they started, through the real SDKs.

Anthropic sends ``event: error`` after ``message_start`` (its stream was answered
with HTTP 200); OpenAI-compatible routers send a ``data: {"error": ...}`` chunk.
Neither carries a useful status, so the kind comes from the error body: an
overloaded or failing upstream is retried and falls back like a 529 or a 500.

A stream can also be cut off (the connection drops mid-answer) or carry an event
that cannot be read; against the fake model server, through the tool loop, both
are retried and fall back like a 5xx, and the usage the API reported before the
failure counts in the turn's usage and cost.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from agent.caching import CachePolicy
from agent.compressor import CompressionResult, ContextCompressor
from agent.errors import ErrorKind, ModelUnavailableError, ProviderError
from agent.loop import ToolLoop
from agent.messages import ChatMessage, ToolCall
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.base import ModelRequest, ModelResponse, Provider, ToolSpec
from agent.providers.openai_chat import OpenAIProvider
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from agent.summarizer import ModelSummarizer
from agent.tokens import estimate_message
from agent.usage import PriceTable, Usage
from tests.fakes.model_server import CutStream, MalformedEvent, ModelServer, RequestRecord, Text
from tests.fakes.model_server.stub import StubServer, chat_chunk, message_start, send_events


class FailingStreams:
    """A local server whose streams start, then report ``error`` as their next event."""

    def __init__(self) -> None:
        self.error: dict[str, Any] = {}
        self.server = StubServer(anthropic=self._anthropic, openai=self._openai)

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        return await send_events(request, [message_start("claude-sonnet-4-6"), ("error", {"type": "error", "error": self.error})])

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        started = chat_chunk("gpt-5", {"role": "assistant", "content": ""})
        return await send_events(request, [started, (None, {"error": self.error})])


@pytest_asyncio.fixture
async def streams() -> AsyncIterator[FailingStreams]:
    streams = FailingStreams()
    async with streams.server:
        yield streams


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"type": "overloaded_error", "message": "Overloaded"}, ErrorKind.OVERLOADED),
        ({"type": "api_error", "message": "Internal server error"}, ErrorKind.SERVER),
        ({"type": "rate_limit_error", "message": "Slow down"}, ErrorKind.RATE_LIMIT),
        ({"type": "invalid_request_error", "message": "input length and `max_tokens` exceed context limit: 1 > 0"},
         ErrorKind.CONTEXT_LENGTH),
    ],
)  # fmt: skip
async def test_anthropic_error_event_mid_stream(streams: FailingStreams, error: dict[str, Any], kind: ErrorKind) -> None:
    streams.error = error
    provider = AnthropicProvider(api_key="test", base_url=streams.server.url, stream=True, timeout=10)
    request = ModelRequest(model="claude-sonnet-4-6", system="s", messages=[ChatMessage.user("hi")])
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    await provider.aclose()
    assert caught.value.kind is kind


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"message": "Provider returned error", "code": 502}, ErrorKind.SERVER),
        ({"message": "Rate limit exceeded", "code": 429}, ErrorKind.RATE_LIMIT),
        ({"message": "something odd"}, ErrorKind.SERVER),
    ],
)
async def test_openai_compatible_error_chunk_mid_stream(streams: FailingStreams, error: dict[str, Any], kind: ErrorKind) -> None:
    streams.error = error
    provider = OpenAIProvider(api_key="test", base_url=streams.server.url + "/v1", stream=True, timeout=10)
    request = ModelRequest(model="gpt-5", system="s", messages=[ChatMessage.user("hi")])
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    await provider.aclose()
    assert caught.value.kind is kind


# -- streams cut off or broken mid-answer, through the tool loop -------------------------------------

MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5"}


def provider_for(kind: str, server: ModelServer, *, stream: bool = True) -> Provider:
    if kind == "anthropic":
        return AnthropicProvider(api_key="test", base_url=server.base_url, stream=stream, timeout=10)
    return OpenAIProvider(api_key="test", base_url=server.base_url + "/v1", stream=stream, timeout=10)


class Sleeps:
    """The router's pauses, recorded instead of waited for."""

    def __init__(self) -> None:
        self.delays: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.delays.append(seconds)


class Calls:
    """A turn observer that keeps what each model call reported."""

    def __init__(self) -> None:
        self.responses: list[ModelResponse] = []
        self.costs: list[float | None] = []

    async def on_message(self, message: ChatMessage) -> None:
        return None

    async def on_compaction(self, result: CompressionResult) -> None:
        return None

    async def on_model_call(self, response: ModelResponse, cost_usd: float | None) -> None:
        self.responses.append(response)
        self.costs.append(cost_usd)


class NoTools:
    def specs(self) -> list[ToolSpec]:
        return []

    async def call(self, call: ToolCall) -> str:
        raise AssertionError("no tool is offered")


def loop_over(*providers: Provider, sleeps: Sleeps) -> ToolLoop:
    """A tool loop whose router tries ``providers`` in order, three attempts each, as it would after 5xx."""
    targets = [ModelTarget(p, MODELS[p.name], CachePolicy(p.name == "anthropic", True)) for p in providers]
    router = ModelRouter(targets, RetryPolicy(max_attempts=3, base_delay=1.0, jitter=0.0), sleep=sleeps, rand=lambda: 0.0)
    engine = ContextCompressor(200_000, protect_last_n=4, summarizer=ModelSummarizer(router), estimate=estimate_message)
    return ToolLoop(router, engine, NoTools(), estimate=estimate_message)


def billed(record: RequestRecord) -> Usage:
    """What the server reported at the start of an Anthropic stream: the whole prompt, one output token."""
    assert record.figures is not None
    figures = record.figures
    return Usage(figures.uncached, 1, figures.cache_read, figures.cache_creation)


def answered(record: RequestRecord, kind: str) -> Usage:
    """The usage of a request whose answer arrived whole."""
    assert record.figures is not None and record.usage is not None
    figures, output = record.figures, record.usage.get("output_tokens", record.usage.get("completion_tokens"))
    return Usage(figures.uncached, output, figures.cache_read, figures.cache_creation)


LONG = "A first answer, long enough to come in several pieces before the line goes dead."
HISTORY = [ChatMessage.system("You are a test."), ChatMessage.user("hello")]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_stream_cut_mid_answer_is_retried_and_what_it_billed_counts(kind: str, model_server: ModelServer) -> None:
    sleeps, calls = Sleeps(), Calls()
    provider = provider_for(kind, model_server)
    # Anthropic: message_start (the prompt's usage), ping, the text block's start and one delta, then nothing.
    model_server.script(CutStream(Text(LONG), after=4), Text("the second try"))
    result = await loop_over(provider, sleeps=sleeps).run(HISTORY, observer=calls)
    await provider.aclose()
    assert result.reply == "the second try"
    assert sleeps.delays == [1.0]  # retried after the same pause as a 5xx
    cut, whole = model_server.requests
    first = billed(cut) if kind == "anthropic" else Usage()  # OpenAI reports usage only at the end
    assert result.usage == first + answered(whole, kind)
    prices = PriceTable()
    assert result.cost_usd == pytest.approx(prices.cost(MODELS[kind], result.usage))
    if kind == "anthropic":
        assert [r.stop_reason for r in calls.responses] == ["failed", "end_turn"]
        assert calls.responses[0].usage == first and calls.costs[0] == pytest.approx(prices.cost(MODELS[kind], first))


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_malformed_event_is_retried(kind: str, model_server: ModelServer) -> None:
    sleeps = Sleeps()
    provider = provider_for(kind, model_server)
    model_server.script(MalformedEvent(Text(LONG), after=2), Text("the second try"))
    result = await loop_over(provider, sleeps=sleeps).run(HISTORY)
    await provider.aclose()
    assert result.reply == "the second try" and sleeps.delays == [1.0]
    broken, whole = model_server.requests
    first = billed(broken) if kind == "anthropic" else Usage()  # Anthropic's message_start came before it
    assert result.usage == first + answered(whole, kind)


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_malformed_body_without_streaming_is_retried(kind: str, model_server: ModelServer) -> None:
    sleeps = Sleeps()
    provider = provider_for(kind, model_server, stream=False)
    model_server.script(MalformedEvent(Text(LONG)), Text("the second try"))
    result = await loop_over(provider, sleeps=sleeps).run(HISTORY)
    await provider.aclose()
    assert result.reply == "the second try" and sleeps.delays == [1.0]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_stream_that_ends_quietly_before_the_answer_did_is_a_cut(kind: str, model_server: ModelServer) -> None:
    """The body ends properly, but the answer's end (Anthropic's stop_reason, OpenAI's finish_reason)
    never came: half an answer is not passed off as a whole one."""
    sleeps = Sleeps()
    provider = provider_for(kind, model_server)
    model_server.script(CutStream(Text(LONG), after=4, abrupt=False), Text("the second try"))
    result = await loop_over(provider, sleeps=sleeps).run(HISTORY)
    await provider.aclose()
    assert result.reply == "the second try" and sleeps.delays == [1.0]


@pytest.mark.parametrize("kind", ["anthropic", "openai"])
async def test_a_connection_lost_after_the_answer_ended_keeps_the_answer(kind: str, model_server: ModelServer) -> None:
    """Cut before the last event (message_stop, [DONE]): the answer and its usage had all arrived, so
    the model is not asked (and paid) twice."""
    sleeps = Sleeps()
    provider = provider_for(kind, model_server)
    model_server.script(CutStream(Text("a whole answer"), after=-1))
    result = await loop_over(provider, sleeps=sleeps).run(HISTORY)
    await provider.aclose()
    assert result.reply == "a whole answer" and sleeps.delays == []
    (only,) = model_server.requests
    assert result.usage == answered(only, kind)


async def test_cut_streams_fall_back_to_the_next_model_and_every_billed_attempt_counts(model_server: ModelServer) -> None:
    sleeps, calls = Sleeps(), Calls()
    claude, gpt = provider_for("anthropic", model_server), provider_for("openai", model_server)
    model_server.script(*[CutStream(Text(LONG), after=3)] * 3, Text("from the fallback"))
    result = await loop_over(claude, gpt, sleeps=sleeps).run(HISTORY, observer=calls)
    for provider in (claude, gpt):
        await provider.aclose()
    assert result.reply == "from the fallback"
    assert [r.api for r in model_server.requests] == ["anthropic"] * 3 + ["openai"]
    assert sleeps.delays == [1.0, 2.0]  # the same attempts and backoff as 5xx
    *cuts, whole = model_server.requests
    assert result.usage == billed(cuts[0]) + billed(cuts[1]) + billed(cuts[2]) + answered(whole, "openai")
    assert [r.stop_reason for r in calls.responses] == ["failed", "failed", "failed", "stop"]


async def test_when_every_attempt_is_cut_the_user_is_told_and_the_billing_kept(model_server: ModelServer) -> None:
    sleeps, calls = Sleeps(), Calls()
    provider = provider_for("anthropic", model_server)
    model_server.script(*[CutStream(Text(LONG), after=1)] * 3)
    with pytest.raises(ModelUnavailableError) as caught:
        await loop_over(provider, sleeps=sleeps).run(HISTORY, observer=calls)
    await provider.aclose()
    assert caught.value.causes[-1].kind is ErrorKind.CONNECTION
    assert "cut off" in str(caught.value.causes[-1])
    assert "again" in caught.value.user_message
    assert [r.usage for r in calls.responses] == [billed(record) for record in model_server.requests]

"""The answer as the model writes it: ``TurnObserver.on_text`` through the real anthropic and openai
SDKs against the fake model server.

The observer hears the whole text of the model call so far each time it grows, never tool-call
arguments; an attempt that failed after showing text is withdrawn (``""``) before a retry or the
fallback model starts again; a listener that raises never breaks the turn; compaction summaries
are never shown.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from structlog.testing import capture_logs

from agent.caching import CachePolicy
from agent.compressor import CompressionResult, ContextCompressor
from agent.core import Agent, AgentSettings
from agent.loop import ToolLoop
from agent.messages import ChatMessage, ToolCall
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.base import ModelResponse, Provider, ToolSpec
from agent.providers.openai_chat import OpenAIProvider
from agent.providers.router import ModelRouter, ModelTarget, RetryPolicy
from agent.summarizer import ModelSummarizer
from agent.tokens import estimate_message
from tests.fakes.model_server import CutStream, ModelServer, RequestRecord, Text, ToolCalls, ToolUse
from tests.fakes.model_server.pacing import word_pieces
from tests.fakes.model_server.stub import StubServer, chat_chunk, message_start, send_events

MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-5"}
KINDS = ["anthropic", "openai"]
HISTORY = [ChatMessage.system("You are a test."), ChatMessage.user("hello")]
ANSWER = "The answer comes a word at a time, the way the model writes it, until it is whole."
LONG = "A first try that gets far enough to show some words before the line goes dead."
SECRET = "an-argument-nobody-should-see"


class Watcher:
    """A turn observer that keeps, in order, every text it was shown and every message."""

    def __init__(self) -> None:
        self.events: list[tuple[str, Any]] = []

    def on_text(self, text: str) -> None:
        self.events.append(("text", text))

    async def on_message(self, message: ChatMessage) -> None:
        self.events.append(("message", message))

    async def on_compaction(self, result: CompressionResult) -> None:
        self.events.append(("compaction", result))

    async def on_model_call(self, response: ModelResponse, cost_usd: float | None) -> None:
        return None

    @property
    def texts(self) -> list[str]:
        return [value for kind, value in self.events if kind == "text"]


class Lookup:
    """One tool, ``lookup``, that answers at once."""

    def specs(self) -> list[ToolSpec]:
        return [ToolSpec("lookup", "Look something up.")]

    async def call(self, call: ToolCall) -> str:
        return "found: the thing"


async def no_pause(seconds: float) -> None:
    return None


def provider_for(kind: str, base_url: str, *, stream: bool = True) -> Provider:
    if kind == "anthropic":
        return AnthropicProvider(api_key="test", base_url=base_url, stream=stream, timeout=10)
    return OpenAIProvider(api_key="test", base_url=base_url + "/v1", stream=stream, timeout=10)


def loop_over(*providers: Provider, attempts: int = 3) -> ToolLoop:
    targets = [ModelTarget(p, MODELS[p.name], CachePolicy(False, True)) for p in providers]
    router = ModelRouter(targets, RetryPolicy(max_attempts=attempts), sleep=no_pause, rand=lambda: 0.0)
    engine = ContextCompressor(200_000, protect_last_n=4, summarizer=ModelSummarizer(router), estimate=estimate_message)
    return ToolLoop(router, engine, Lookup(), estimate=estimate_message)


def prefixes(text: str) -> list[str]:
    """What the observer hears while a paced ``text`` is written: each word added to the ones before."""
    return list(itertools.accumulate(word_pieces(text)))


def grows_into(texts: Sequence[str], whole: str) -> bool:
    """Each text extends the one before, and the last is ``whole``."""
    return bool(texts) and texts[-1] == whole and all(b.startswith(a) and b != a for a, b in itertools.pairwise(texts))


@pytest.mark.parametrize("kind", KINDS)
async def test_the_observer_sees_the_answer_grow_into_its_whole_text(kind: str, model_server: ModelServer) -> None:
    provider, watcher = provider_for(kind, model_server.base_url), Watcher()
    model_server.script(Text(ANSWER, pace=2000))
    result = await loop_over(provider).run(HISTORY, observer=watcher)
    await provider.aclose()
    assert result.reply == ANSWER
    assert watcher.texts == prefixes(ANSWER)  # one growing text per word, the full text each time
    assert watcher.events[-1] == ("message", result.history[-1])  # the answer's message comes after its text


@pytest.mark.parametrize("kind", KINDS)
async def test_a_retried_attempt_withdraws_what_the_failed_one_showed(kind: str, model_server: ModelServer) -> None:
    provider, watcher = provider_for(kind, model_server.base_url), Watcher()
    model_server.script(CutStream(Text(LONG), after=5), Text(ANSWER))
    result = await loop_over(provider).run(HISTORY, observer=watcher)
    await provider.aclose()
    assert result.reply == ANSWER
    assert "" in watcher.texts, f"the failed attempt's text was never withdrawn: {watcher.texts}"
    cut = watcher.texts.index("")
    shown_before, shown_after = watcher.texts[:cut], watcher.texts[cut + 1 :]
    assert shown_before and LONG.startswith(shown_before[-1]) and grows_into(shown_before, shown_before[-1])
    assert grows_into(shown_after, ANSWER)


async def test_the_fallback_model_starts_its_text_again(model_server: ModelServer) -> None:
    claude, gpt = provider_for("anthropic", model_server.base_url), provider_for("openai", model_server.base_url)
    watcher = Watcher()
    model_server.script(CutStream(Text(LONG), after=6), Text(ANSWER))
    result = await loop_over(claude, gpt, attempts=1).run(HISTORY, observer=watcher)
    for provider in (claude, gpt):
        await provider.aclose()
    assert [r.api for r in model_server.requests] == ["anthropic", "openai"]
    assert result.reply == ANSWER
    assert "" in watcher.texts, f"the failed attempt's text was never withdrawn: {watcher.texts}"
    cut = watcher.texts.index("")
    assert watcher.texts[:cut] and LONG.startswith(watcher.texts[cut - 1])
    assert grows_into(watcher.texts[cut + 1 :], ANSWER)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_tool_calling_turn_shows_each_calls_text_and_never_the_arguments(kind: str, model_server: ModelServer) -> None:
    provider, watcher = provider_for(kind, model_server.base_url), Watcher()
    lead = "Let me look that up for you first."
    model_server.script(ToolCalls(ToolUse("lookup", {"query": SECRET}), text=lead, pace=2000), Text(ANSWER))
    result = await loop_over(provider).run(HISTORY, observer=watcher)
    await provider.aclose()
    assert result.reply == ANSWER
    kinds = [kind for kind, _ in watcher.events]
    assert kinds[0] == "text" and "text" in kinds[kinds.index("message") :], f"shown nothing while written: {kinds}"
    first_message, answer_text = kinds.index("message"), kinds.index("text", kinds.index("message"))
    assert [value for _, value in watcher.events[:first_message]] == prefixes(lead)
    call, result_message = watcher.events[first_message][1], watcher.events[first_message + 1][1]
    assert call.tool_calls and call.content == lead and result_message.role == "tool"
    assert grows_into([v for k, v in watcher.events[answer_text:] if k == "text"], ANSWER)
    assert not any(SECRET in text or "lookup" in text for text in watcher.texts)


@pytest.mark.parametrize("kind", KINDS)
async def test_a_failing_text_listener_never_breaks_the_turn(kind: str, model_server: ModelServer) -> None:
    class Broken(Watcher):
        def on_text(self, text: str) -> None:
            super().on_text(text)
            raise RuntimeError("the chat went away")

    provider, watcher = provider_for(kind, model_server.base_url), Broken()
    model_server.script(Text(ANSWER, pace=2000))
    with capture_logs() as logs:
        result = await loop_over(provider).run(HISTORY, observer=watcher)
    await provider.aclose()
    assert result.reply == ANSWER and [r.status for r in model_server.requests] == [200]  # not retried either
    assert watcher.texts == prefixes(ANSWER)  # still told every time
    warnings = [entry for entry in logs if entry["event"] == "model.text_listener_failed"]
    assert len(warnings) == 1 and warnings[0]["log_level"] == "warning"
    assert "the chat went away" in warnings[0]["error"]


def is_summary_call(record: RequestRecord) -> bool:
    return "handoff notes" in str(record.body.get("system", ""))


async def test_a_compaction_summary_is_not_streamed_to_the_observer(model_server: ModelServer, tmp_path: Path) -> None:
    """Through the agent session the gateway uses: its observer reaches the loop, and a compaction's
    summary call (before the answer) is not shown as if it were the answer."""
    summary = "## Goal\nA summary the user must never see streamed."
    model_server.responder = lambda record: Text(summary, pace=2000) if is_summary_call(record) else Text(ANSWER, pace=2000)
    history = [ChatMessage.system("You are a test.")]
    for index in range(30):
        history += [ChatMessage.user(f"question {index} " + "words " * 60), ChatMessage.assistant(f"answer {index} " + "text " * 60)]
    history.append(ChatMessage.user("the latest question"))
    window = int(sum(map(estimate_message, history)) * 1.5)  # over the threshold: compacted before the call
    provider = AnthropicProvider(api_key="test", base_url=model_server.base_url, timeout=10)
    router = ModelRouter([ModelTarget(provider, MODELS["anthropic"], CachePolicy(False, True))], RetryPolicy(max_attempts=1))
    agent = Agent(AgentSettings(home=tmp_path, context_length=window, protect_last_n=4), router)
    session = agent.open_session(session_id="S1", platform="telegram", memory=None)
    watcher = Watcher()
    result = await session.run_turn(history, user_time=1000.0, observer=watcher)
    await agent.aclose()
    assert result.reply == ANSWER and result.compactions == 1
    assert [is_summary_call(record) for record in model_server.requests] == [True, False]
    assert watcher.texts == prefixes(ANSWER)
    assert watcher.events[0][0] == "compaction"  # nothing shown before the answer began


@pytest.mark.parametrize("kind", KINDS)
async def test_without_streaming_the_observer_is_shown_nothing(kind: str, model_server: ModelServer) -> None:
    """A provider set not to stream calls ``on_text`` not at all: the answer comes as a message only."""
    provider, watcher = provider_for(kind, model_server.base_url, stream=False), Watcher()
    model_server.script(Text(ANSWER))
    result = await loop_over(provider).run(HISTORY, observer=watcher)
    await provider.aclose()
    assert result.reply == ANSWER and watcher.texts == []


THOUGHT = "private reasoning the user should not see"


async def thinking_claude(request: web.Request) -> web.StreamResponse:
    """An Anthropic answer with a thinking block before its text."""
    blocks = [
        (0, {"type": "thinking", "thinking": "", "signature": ""},
         [{"type": "thinking_delta", "thinking": THOUGHT}, {"type": "signature_delta", "signature": "sig"}]),
        (1, {"type": "text", "text": ""}, [{"type": "text_delta", "text": piece} for piece in word_pieces(ANSWER)]),
    ]  # fmt: skip
    events: list[tuple[str | None, Any]] = [message_start(MODELS["anthropic"])]
    for index, opening, deltas in blocks:
        events.append(("content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}))
        events += [("content_block_delta", {"type": "content_block_delta", "index": index, "delta": d}) for d in deltas]
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    end = {"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": None}, "usage": {"output_tokens": 9}}
    return await send_events(request, [*events, ("message_delta", end), ("message_stop", {"type": "message_stop"})])


async def reasoning_gpt(request: web.Request) -> web.StreamResponse:
    """An OpenAI-compatible answer with reasoning deltas first (``reasoning_content``: DeepSeek, vLLM;
    ``reasoning``: OpenRouter)."""
    deltas = [{"role": "assistant", "content": ""}, {"reasoning_content": THOUGHT}, {"reasoning": THOUGHT}]
    deltas += [{"content": piece} for piece in word_pieces(ANSWER)]
    chunks = [chat_chunk(MODELS["openai"], delta) for delta in deltas]
    return await send_events(request, [*chunks, chat_chunk(MODELS["openai"], {}, "stop")])


@pytest.mark.parametrize("kind", KINDS)
async def test_thinking_is_never_shown_as_text(kind: str) -> None:
    watcher = Watcher()
    async with StubServer(anthropic=thinking_claude, openai=reasoning_gpt) as server:
        provider = provider_for(kind, server.url)
        result = await loop_over(provider).run(HISTORY, observer=watcher)
        await provider.aclose()
    assert result.reply == ANSWER
    assert watcher.texts == prefixes(ANSWER)  # the answer's words only, none of the thinking

"""ContextCompressor failure paths: nothing is dropped without a summary unless the request must fit."""

from __future__ import annotations

import asyncio

import pytest
from structlog.testing import capture_logs

from agent.compression.framing import is_summary
from agent.compressor import ContextCompressor, SummaryRequest
from tests.agent.test_compressor_support import FakeClock, FakeSummarizer, conversation, estimate, events, make


async def test_a_failed_summary_returns_the_messages_unchanged_and_cools_down() -> None:
    summarizer = FakeSummarizer([ConnectionError("upstream reset")])
    compressor = make(summarizer)
    messages = conversation(20)
    with capture_logs() as logs:
        result = await compressor.compress(messages)

    assert not result.compacted and result.summary_failed and not result.used_local_summary
    assert result.messages == messages and all(a is b for a, b in zip(result.messages, messages, strict=True))
    assert result.dropped == 0 and result.error == "ConnectionError: upstream reset"
    assert compressor.cooling_down and compressor.compaction_count == 0
    (failed,) = events(logs, "compaction.summary_failed")
    assert failed["error"] == "ConnectionError: upstream reset" and failed["cooldown_s"] == 60.0
    assert not compressor.should_compress(15_000)


async def test_no_model_call_during_the_cooldown() -> None:
    clock = FakeClock()
    summarizer = FakeSummarizer([RuntimeError("boom")])
    compressor = make(summarizer, clock=clock)
    messages = conversation(20)
    await compressor.compress(messages)
    clock.advance(59)
    result = await compressor.compress(messages)
    assert summarizer.calls == 1
    assert not result.compacted and result.reason == "cooldown" and not result.summary_failed

    clock.advance(2)
    assert compressor.should_compress(15_000)
    result = await compressor.compress(messages)
    assert summarizer.calls == 2 and result.compacted


async def test_a_manual_compress_ignores_the_cooldown() -> None:
    summarizer = FakeSummarizer([RuntimeError("boom")])
    compressor = make(summarizer)
    await compressor.compress(conversation(20))
    result = await compressor.compress(conversation(20), force=True)
    assert summarizer.calls == 2 and result.compacted
    assert not compressor.cooling_down


async def test_repeated_failures_lengthen_the_cooldown() -> None:
    clock = FakeClock()
    summarizer = FakeSummarizer([RuntimeError("a"), RuntimeError("b"), RuntimeError("c")])
    compressor = make(summarizer, clock=clock)
    with capture_logs() as logs:
        for _ in range(3):
            await compressor.compress(conversation(20), force=True)
    assert [e["cooldown_s"] for e in events(logs, "compaction.summary_failed")] == [60.0, 120.0, 240.0]


async def test_when_the_request_cannot_fit_a_local_summary_stands_in() -> None:
    summarizer = FakeSummarizer([RuntimeError("model down")])
    compressor = make(summarizer)
    messages = conversation(20, output_chars=600)
    messages[15] = messages[15].with_content("Traceback (most recent call last):\nValueError: bad header in config")
    with capture_logs() as logs:
        result = await compressor.compress(messages, must_fit=True)

    assert result.compacted and result.summary_failed and result.used_local_summary
    assert result.reason == "summary_failed"
    text = result.summary or ""
    assert '"Request 3: please review src/module_3.py"' in text  # user requests
    assert "read_file x" in text  # tool names
    assert "src/module_3.py" in text  # files
    assert "ValueError: bad header in config" in text  # errors
    assert "without the summary model" in text
    summary = next(m for m in result.messages if is_summary(m))
    assert summary.meta["local_summary"] is True
    (local,) = events(logs, "compaction.local_summary")
    assert local["reason"] == "summary_failed" and local["error"] == "RuntimeError: model down"


async def test_the_local_summary_is_deterministic_and_used_during_the_cooldown() -> None:
    summarizer = FakeSummarizer([RuntimeError("model down")])
    compressor = make(summarizer)
    messages = conversation(20)
    await compressor.compress(messages)
    with capture_logs() as logs:
        first = await compressor.compress(messages, must_fit=True)
    second = await make(FakeSummarizer([RuntimeError("x")])).compress(messages, must_fit=True)
    assert summarizer.calls == 1  # still cooling down: no model call
    assert first.used_local_summary and not first.summary_failed and first.reason == "cooldown"
    assert first.summary == second.summary
    assert [e["reason"] for e in events(logs, "compaction.local_summary")] == ["cooldown"]


async def test_an_empty_summary_counts_as_a_failure() -> None:
    summarizer = FakeSummarizer(["  <think>hmm</think>  "])
    result = await make(summarizer).compress(conversation(20))
    assert not result.compacted and result.summary_failed
    assert result.error is not None and "no text" in result.error


async def test_a_hanging_summary_model_times_out() -> None:
    async def hang(request: SummaryRequest) -> str:
        await asyncio.Event().wait()  # a summary model that never answers
        return "never"

    compressor = ContextCompressor(20_000, protect_last_n=4, summarizer=hang, estimate=estimate, summary_timeout_s=0.01)
    result = await compressor.compress(conversation(20))
    assert not result.compacted and result.summary_failed
    assert result.error is not None and result.error.startswith("TimeoutError")


async def test_cancellation_is_not_mistaken_for_a_failure() -> None:
    async def cancelled(request: SummaryRequest) -> str:
        raise asyncio.CancelledError

    compressor = ContextCompressor(20_000, protect_last_n=4, summarizer=cancelled, estimate=estimate)
    with pytest.raises(asyncio.CancelledError):
        await compressor.compress(conversation(20))
    assert not compressor.cooling_down

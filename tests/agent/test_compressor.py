"""ContextCompressor: budgets, when it fires, and what a successful compaction produces."""

from __future__ import annotations

import asyncio
import re

import pytest
from structlog.testing import capture_logs

from agent.compression.framing import COMPACTION_NOTE, SUMMARY_HEADER, is_summary, summary_message
from agent.compression.summary import SECTIONS
from agent.compressor import CompressionResult, ContextCompressor, ContextEngine, SummaryRequest
from agent.messages import ChatMessage
from tests.agent.test_compressor_support import SYSTEM, FakeSummarizer, call, chat, conversation, estimate, events, make

# -- budgets ------------------------------------------------------------------------------


def test_budgets_for_a_200k_window() -> None:
    compressor = ContextCompressor(200_000, summarizer=FakeSummarizer())
    assert compressor.threshold_tokens == 100_000
    assert compressor.tail_budget == 20_000
    assert compressor.max_summary_tokens == 10_000
    assert compressor.summary_budget(5_000) == 2_000  # the floor
    assert compressor.summary_budget(30_000) == 6_000  # 20% of the content
    assert compressor.summary_budget(80_000) == 10_000  # 5% of the window


def test_budgets_for_a_1m_window() -> None:
    compressor = ContextCompressor(1_000_000, summarizer=FakeSummarizer())
    assert compressor.threshold_tokens == 500_000
    assert compressor.tail_budget == 100_000
    assert compressor.max_summary_tokens == 12_000
    assert compressor.summary_budget(55_000) == 11_000
    assert compressor.summary_budget(400_000) == 12_000  # the absolute ceiling


def test_small_windows_cap_the_summary_below_the_floor() -> None:
    compressor = ContextCompressor(16_000, summarizer=FakeSummarizer())
    assert compressor.max_summary_tokens == 800
    assert compressor.summary_budget(100) == 800


def test_target_ratio_is_clamped_and_nonsense_is_refused() -> None:
    assert ContextCompressor(100_000, target_ratio=0.95, summarizer=FakeSummarizer()).tail_budget == 40_000
    assert ContextCompressor(100_000, target_ratio=0.01, summarizer=FakeSummarizer()).tail_budget == 5_000
    with pytest.raises(ValueError, match="threshold"):
        ContextCompressor(100_000, threshold=1.5, summarizer=FakeSummarizer())
    with pytest.raises(ValueError, match="protect_last_n"):
        ContextCompressor(100_000, protect_last_n=0, summarizer=FakeSummarizer())


def test_the_default_engine_implements_the_interface() -> None:
    assert isinstance(make(), ContextEngine)
    with pytest.raises(TypeError):
        ContextEngine()  # type: ignore[abstract]


# -- when it fires ------------------------------------------------------------------------


def test_fires_at_the_threshold_using_reported_tokens() -> None:
    compressor = make()  # threshold 10,000
    assert not compressor.should_compress()  # nothing reported yet
    assert compressor.should_compress(10_000)
    assert not compressor.should_compress(9_999)
    compressor.update_from_usage(10_500)
    assert compressor.should_compress()
    compressor.update_from_usage(3_000)
    assert not compressor.should_compress()


def test_context_pressure_is_logged_once_at_85_percent_of_the_threshold() -> None:
    compressor = make()  # threshold 10,000, pressure at 8,500
    with capture_logs() as logs:
        compressor.update_from_usage(8_499)
        compressor.update_from_usage(8_500)
        compressor.update_from_usage(9_000)
        compressor.update_from_usage(1_000)
        compressor.update_from_usage(9_100)
    pressure = events(logs, "context.pressure")
    assert [(e["tokens"], e["threshold"]) for e in pressure] == [(8_500, 10_000), (9_100, 10_000)]
    assert pressure[0]["percent"] == 85


async def test_a_compaction_forgets_the_old_prompt_size() -> None:
    compressor = make()
    compressor.update_from_usage(12_000)
    assert compressor.should_compress()
    result = await compressor.compress(conversation(20))
    assert result.compacted
    assert compressor.last_prompt_tokens is None
    assert not compressor.should_compress()


async def test_compactions_that_do_not_help_stop_firing_until_the_prompt_fits() -> None:
    compressor = make()
    for _ in range(2):
        await compressor.compress(conversation(20))
        compressor.update_from_usage(15_000)  # still over the threshold afterwards
    assert not compressor.should_compress()
    compressor.update_from_usage(2_000)
    assert compressor.should_compress(15_000)


# -- a successful compaction ----------------------------------------------------------------


async def test_head_summary_and_tail_are_assembled() -> None:
    summarizer = FakeSummarizer(["## Goal\nReview every module."])
    compressor = make(summarizer)
    messages = conversation(20)
    with capture_logs() as logs:
        result = await compressor.compress(messages, current_tokens=12_345)

    assert isinstance(result, CompressionResult)
    assert result.compacted and not result.summary_failed and not result.used_local_summary
    assert result.reason == "compacted"
    out = result.messages
    index = next(i for i, m in enumerate(out) if is_summary(m))
    head, summary, tail = out[:index], out[index], out[index + 1 :]
    assert head[1:] == messages[1:index]
    assert head[0].content == f"{SYSTEM}\n\n{COMPACTION_NOTE}"
    assert tail == messages[len(messages) - len(tail) :]
    assert len(tail) >= 4
    assert tail[0].role != "tool"
    assert messages[-4] in tail  # the last user request
    assert summary.content.startswith(SUMMARY_HEADER)
    assert "Review every module." in summary.content
    assert summary.meta["summary"] is True
    assert result.summary == "## Goal\nReview every module."
    assert result.dropped == len(messages) - len(head) - len(tail)
    assert result.tokens_after < result.tokens_before
    assert compressor.compaction_count == 1

    (done,) = events(logs, "compaction.done")
    assert done["before"] == result.tokens_before and done["after"] == result.tokens_after
    assert done["summarized"] == result.dropped and done["reported"] == 12_345


async def test_the_summary_is_framed_as_reference_not_instructions() -> None:
    result = await make().compress(conversation(20))
    summary = next(m for m in result.messages if is_summary(m))
    text = summary.content.lower()
    assert "reference only" in text
    assert "not new instructions" in text
    assert "respond to the most recent user message" in text


async def test_the_summary_role_never_repeats_a_neighbour() -> None:
    result = await make().compress(conversation(20))
    out = result.messages
    index = next(i for i, m in enumerate(out) if is_summary(m))
    assert out[index].role not in {out[index - 1].role, out[index + 1].role}


async def test_the_prompt_asks_for_the_structured_sections_of_the_middle_only() -> None:
    summarizer = FakeSummarizer()
    messages = conversation(20)
    result = await make(summarizer).compress(messages, focus="the database migration")

    (request,) = summarizer.requests
    assert isinstance(request, SummaryRequest)
    for heading, _ in SECTIONS:
        assert heading in request.prompt
    assert "Request 5: please review src/module_5.py" in request.prompt  # a condensed turn
    assert messages[-4].content not in request.prompt  # the last user request stays in the tail
    assert "the database migration" in request.prompt and request.focus == "the database migration"
    assert f"about {request.max_tokens:,} tokens" in request.prompt
    assert request.max_tokens == 1_000  # 5% of a 20,000 window caps the budget
    assert request.previous_summary is None
    assert result.compacted


async def test_old_tool_output_reaches_the_summary_model_as_one_line() -> None:
    summarizer = FakeSummarizer()
    messages = conversation(20, output_chars=600)
    result = await make(summarizer).compress(messages)

    prompt = summarizer.last_prompt
    assert "def function_5():" not in prompt
    assert re.search(r"\[tool output cleared\] read_file path=src/module_5\.py -> 600 chars, \d+ lines\n", prompt)
    assert result.pruned > 0
    tail_results = [m for m in result.messages if m.role == "tool" and m in messages[-8:]]
    assert all("def function_" in m.content for m in tail_results)  # the tail keeps its output


async def test_short_tool_output_is_left_alone() -> None:
    summarizer = FakeSummarizer()
    result = await make(summarizer).compress(conversation(40, output_chars=150))
    assert result.compacted
    assert "def function_5():" in summarizer.last_prompt
    assert "[tool output cleared]" not in summarizer.last_prompt


async def test_a_second_compaction_updates_the_previous_summary() -> None:
    summarizer = FakeSummarizer(["## Goal\nFirst notes.", "## Goal\nUpdated notes."])
    compressor = make(summarizer)
    first = await compressor.compress(conversation(20))
    grown = first.messages + conversation(20, system="unused")[1:]
    second = await compressor.compress(grown)

    prompt = summarizer.last_prompt
    assert "## Goal\nFirst notes." in prompt
    assert "<previous-notes>" in prompt and "Update those notes with the newer turns" in prompt
    assert summarizer.requests[-1].previous_summary == "## Goal\nFirst notes."
    assert SUMMARY_HEADER not in prompt.split("<newer-turns>")[1]  # the old summary is not a turn
    assert [m.meta.get("summary_body") for m in second.messages if is_summary(m)] == ["## Goal\nUpdated notes."]
    assert compressor.compaction_count == 2
    assert compressor.previous_summary == "## Goal\nUpdated notes."


async def test_an_earlier_summary_inside_the_tail_is_replaced_not_kept_beside_the_new_one() -> None:
    # What a first compaction can leave when its cut moved past a tool group: turns between the
    # head and the summary. With only short turns after the summary, the next cut's tail (sized
    # by budget) starts at the old summary; the new one must absorb its notes, not sit before it.
    summarizer = FakeSummarizer(["## Goal\nUpdated notes."])
    big = call("c1")
    messages = [
        *chat(("q0", "a0")),
        ChatMessage.user("read the log"),
        ChatMessage.assistant("", [big]),
        ChatMessage.tool("c1", "log line\n" * 4_000, tool_name="read_file"),
        summary_message("## Goal\nFirst notes.", "user"),
        ChatMessage.assistant("", [call("c2")]),
        ChatMessage.tool("c2", "short", tool_name="read_file"),
        ChatMessage.assistant("done"),
        ChatMessage.user("one more thing"),
        ChatMessage.assistant("sure"),
    ]
    result = await make(summarizer, protect_last_n=2).compress(messages, force=True)
    assert result.compacted
    assert [m.meta.get("summary_body") for m in result.messages if is_summary(m)] == ["## Goal\nUpdated notes."]
    assert summarizer.requests[-1].previous_summary == "## Goal\nFirst notes."
    assert result.messages[-2:] == messages[-2:]


async def test_two_summaries_left_by_an_older_build_are_merged_into_one() -> None:
    summarizer = FakeSummarizer(["## Goal\nMerged."])
    stale = [
        ChatMessage.system(SYSTEM),
        *conversation(2, output_chars=12_000)[1:],
        summary_message("## Goal\nOld notes A.", "user"),
        ChatMessage.assistant("noted"),
        summary_message("## Goal\nOld notes B.", "user"),
        *conversation(6)[1:],
    ]
    result = await make(summarizer, protect_last_n=2).compress(stale, force=True)
    assert result.compacted
    assert [m.meta.get("summary_body") for m in result.messages if is_summary(m)] == ["## Goal\nMerged."]
    previous = summarizer.requests[-1].previous_summary or ""
    assert "Old notes A." in previous and "Old notes B." in previous


async def test_the_system_note_is_appended_on_the_first_compaction_only() -> None:
    compressor = make()
    first = await compressor.compress(conversation(20))
    second = await compressor.compress(first.messages + conversation(20)[1:])
    assert second.compacted
    assert second.messages[0] == first.messages[0]
    assert second.messages[0].content.count(COMPACTION_NOTE) == 1


async def test_a_fresh_compressor_finds_the_summary_in_the_messages() -> None:
    first = await make().compress(conversation(20))
    summarizer = FakeSummarizer()
    plain = [ChatMessage(role=m.role, content=m.content, tool_calls=m.tool_calls, tool_call_id=m.tool_call_id,
                         tool_name=m.tool_name) for m in first.messages]  # as if stored without meta
    await make(summarizer).compress(plain + conversation(20)[1:])
    assert summarizer.requests[0].previous_summary == "## Goal\nSummary number 1."


async def test_nothing_to_compress_leaves_messages_alone() -> None:
    summarizer = FakeSummarizer()
    messages = conversation(1)
    result = await make(summarizer).compress(messages, must_fit=True)
    assert not result.compacted and result.reason == "nothing_to_compress"
    assert result.messages == messages
    assert summarizer.calls == 0


async def test_a_second_compaction_while_one_runs_is_refused() -> None:
    summarising, release = asyncio.Event(), asyncio.Event()

    async def slow(request: SummaryRequest) -> str:
        summarising.set()
        await release.wait()
        return "## Goal\nnotes"

    compressor = ContextCompressor(20_000, protect_last_n=4, summarizer=slow, estimate=estimate)
    first = asyncio.create_task(compressor.compress(conversation(20)))
    await summarising.wait()  # the first compaction is under way
    second = await compressor.compress(conversation(20))
    release.set()
    assert second.reason == "busy" and not second.compacted
    assert (await first).compacted


def test_the_public_entry_point() -> None:
    import agent.compression
    import agent.compressor

    assert agent.compressor.__all__ == sorted(agent.compressor.__all__)
    assert {"ContextEngine", "ContextCompressor", "CompressionResult"} <= set(agent.compressor.__all__)
    assert agent.compressor.ContextCompressor is agent.compression.ContextCompressor


async def test_the_real_token_estimator_is_the_default() -> None:
    summarizer = FakeSummarizer()
    compressor = ContextCompressor(20_000, protect_last_n=4, summarizer=summarizer)
    result = await compressor.compress(conversation(30))
    assert result.compacted and result.tokens_after < result.tokens_before

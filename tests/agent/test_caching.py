"""Cache breakpoints (system_and_3), when caching is on, and the per-session TTL choice."""

from __future__ import annotations

import copy

from agent.caching import TtlAdvisor, apply_cache_markers, cache_policy, turn_cost
from agent.core import NewShare
from agent.messages import ChatMessage, ToolCall
from agent.tokens import estimate_message

FIVE = {"type": "ephemeral"}
HOUR = {"type": "ephemeral", "ttl": "1h"}


def marked(messages: list[dict]) -> list[int]:
    def has(m: dict) -> bool:
        content = m.get("content")
        block = isinstance(content, list) and content and "cache_control" in content[-1]
        return "cache_control" in m or bool(block)

    return [i for i, m in enumerate(messages) if has(m)]


def test_system_and_last_three() -> None:
    msgs = [{"role": "system", "content": "sys"}] + [
        {"role": r, "content": t} for r, t in [("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", "a2"), ("user", "u3")]
    ]
    out = apply_cache_markers(msgs)
    assert marked(out) == [0, 3, 4, 5]
    assert out[0]["content"] == [{"type": "text", "text": "sys", "cache_control": FIVE}]


def test_input_is_never_mutated() -> None:
    msgs = [{"role": "system", "content": "sys"}, {"role": "user", "content": [{"type": "text", "text": "x"}]}]
    before = copy.deepcopy(msgs)
    apply_cache_markers(msgs, ttl="1h")
    assert msgs == before


def test_envelope_layout_skips_empty_messages_and_uses_four_without_system() -> None:
    msgs = [
        {"role": "user", "content": "u1"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
        {"role": "user", "content": [{"type": "text", "text": "u2"}]},
    ]
    out = apply_cache_markers(msgs, ttl="1h", native=False)
    assert marked(out) == [0, 2, 3]
    assert out[2]["content"] == [{"type": "text", "text": "r", "cache_control": HOUR}]
    assert out[3]["content"][-1]["cache_control"] == HOUR


def test_native_layout_marks_tool_and_empty_assistant_at_top_level() -> None:
    msgs = [
        {"role": "system", "content": "sys"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c"}]},
        {"role": "tool", "tool_call_id": "c", "content": "r"},
        {"role": "user", "content": "u"},
    ]
    out = apply_cache_markers(msgs, native=True)
    assert out[1]["cache_control"] == FIVE and out[1]["content"] == ""
    assert out[2]["cache_control"] == FIVE and out[2]["content"] == "r"
    assert out[3]["content"] == [{"type": "text", "text": "u", "cache_control": FIVE}]


def test_blank_text_takes_no_breakpoint_on_either_layout() -> None:
    msgs = [{"role": "system", "content": "sys"}] + [
        {"role": r, "content": t} for r, t in [("user", "u1"), ("assistant", "a1"), ("user", "u2"), ("assistant", " \n"), ("user", "u3")]
    ]
    for native in (True, False):
        out = apply_cache_markers(msgs, native=native)
        assert marked(out) == [0, 2, 3, 5]  # the blank message's breakpoint went to the one before u2
        assert out[4] == msgs[4]


def test_never_more_than_four_breakpoints() -> None:
    msgs = [{"role": "system", "content": "s"}] + [{"role": "user", "content": str(i)} for i in range(20)]
    assert len(marked(apply_cache_markers(msgs))) == 4


def test_policy() -> None:
    assert cache_policy("anthropic", "claude-sonnet-4-6", None).native
    assert cache_policy("anthropic", "claude-sonnet-4-6", "https://proxy.example/v1").enabled
    envelope = cache_policy("openai", "anthropic/claude-sonnet-4.6", "https://openrouter.ai/api/v1")
    assert envelope.enabled and not envelope.native
    assert not cache_policy("openai", "gpt-5", None).enabled
    assert not cache_policy("openai", "claude-sonnet-4-6", "http://127.0.0.1:8000/v1").enabled
    assert not cache_policy("anthropic", "minimax-m2", None).enabled


def test_fixed_ttl_is_kept() -> None:
    advisor = TtlAdvisor("5m")
    for at in range(0, 100_000, 7200):
        advisor.observe(at)
    assert advisor.choose() == "5m"


def test_auto_starts_on_one_hour_for_a_new_session() -> None:
    assert TtlAdvisor("auto").choose() == "1h"


def test_auto_picks_five_minutes_for_a_rapid_chat() -> None:
    advisor = TtlAdvisor.from_timestamps("auto", [i * 40.0 for i in range(30)])
    assert advisor.choose() == "5m"


def test_auto_keeps_one_hour_for_coffee_break_gaps() -> None:
    advisor = TtlAdvisor.from_timestamps("auto", [i * 900.0 for i in range(30)])  # every 15 minutes
    assert advisor.choose() == "1h"


def test_auto_drops_to_five_minutes_when_the_user_returns_after_hours() -> None:
    advisor = TtlAdvisor.from_timestamps("auto", [i * 4 * 3600.0 for i in range(30)])
    assert advisor.choose() == "5m"


def test_cost_model_matches_the_documented_formula() -> None:
    assert turn_cost("5m", 1.0, 0.0) == 0.1
    assert turn_cost("1h", 0.0, 0.0) == 2.0
    assert turn_cost("5m", 0.5, 0.1) == 0.5 * (0.1 + 0.125) + 0.5 * 1.25 * 1.1


def test_unknown_ttl_is_refused_rather_than_written_as_one_hour() -> None:
    import pytest

    with pytest.raises(ValueError, match="'5m' or '1h'"):
        apply_cache_markers([{"role": "user", "content": "x"}], ttl="auto")  # type: ignore[arg-type]


def test_cold_start_and_expiry_are_tracked() -> None:
    advisor = TtlAdvisor("auto")
    assert advisor.is_cold(1000.0)
    advisor.record_write(1000.0, "5m")
    assert not advisor.is_cold(1200.0) and advisor.is_cold(1300.0)
    advisor.record_write(2000.0, "1h")
    assert not advisor.is_cold(5000.0) and advisor.is_cold(5600.0)


def test_equal_ttls_reduce_the_chain_to_the_single_ttl_cost() -> None:
    from agent.caching import chain_cost

    for ttl, alive in (("5m", 0.4), ("1h", 0.8)):
        f5, f60 = (alive, 0.9) if ttl == "5m" else (0.3, alive)
        assert abs(chain_cost(ttl, ttl, f5, f60, 0.1) - turn_cost(ttl, alive, 0.1)) < 1e-12  # type: ignore[arg-type]


def test_a_cold_turn_of_a_user_who_returns_after_hours_writes_five_minutes() -> None:
    # Mostly multi-hour gaps with occasional quick follow-ups: keeping a rewritten prefix an hour
    # rarely pays, so cold turns write 5m entries.
    times, at = [], 0.0
    for index in range(40):
        at += 30.0 if index % 3 == 0 else 5 * 3600.0
        times.append(at)
    advisor = TtlAdvisor.from_timestamps("auto", times)
    assert advisor.choose(0.1, cold=True) == "5m"



def test_shares_follow_the_window_as_old_gaps_leave_it() -> None:
    advisor = TtlAdvisor("auto")
    gaps = [60.0] * 30 + [1800.0] * 30 + [7200.0] * 30 + [60.0] * 20  # 110 gaps through a window of 50
    at = 0.0
    advisor.observe(at)
    w = TtlAdvisor.PRIOR_WEIGHT
    for count, gap in enumerate(gaps, start=1):
        at += gap
        advisor.observe(at)
        window = gaps[max(0, count - TtlAdvisor.WINDOW) : count]
        expected = (
            (sum(g < 300 for g in window) + w * TtlAdvisor.PRIOR_F5) / (len(window) + w),
            (sum(g < 3600 for g in window) + w * TtlAdvisor.PRIOR_F60) / (len(window) + w),
        )
        assert advisor.shares() == expected, count


def _share_by_hand(history: list[ChatMessage]) -> float:
    sizes = [estimate_message(m) for m in history]
    previous_user = max((i for i, m in enumerate(history[:-1]) if m.role == "user"), default=0)
    return min(1.0, sum(sizes[previous_user + 1 :]) / (sum(sizes) or 1))


def test_the_new_share_kept_across_turns_matches_counting_everything() -> None:
    share = NewShare()
    history = [ChatMessage.system("You are terse.")]
    for turn in range(30):
        history.append(ChatMessage.user(f"question {turn} " + "words " * (turn % 7)))
        assert share(list(history)) == _share_by_hand(history)
        if turn % 3 == 0:
            call = ToolCall(id=f"c{turn}", name="search", arguments='{"q": "x"}')
            history += [ChatMessage.assistant("", [call]), ChatMessage.tool(call.id, "result " * 40, "search")]
        history.append(ChatMessage.assistant(f"answer {turn}"))
    compacted = [history[0], ChatMessage.user("[summary of the conversation so far]"), *history[-4:]]
    compacted.append(ChatMessage.user("and now?"))
    assert share(compacted) == _share_by_hand(compacted)  # a rewritten history is counted afresh
    longer = [ChatMessage.system("Other."), *(ChatMessage.user("x " * n) for n in range(len(compacted) + 5))]
    assert share(longer) == _share_by_hand(longer)  # longer than what was counted, yet not its continuation
    fresh = [ChatMessage.system("Another prompt."), ChatMessage.user("hi")]
    assert share(fresh) == _share_by_hand(fresh) == estimate_message(fresh[1]) / sum(map(estimate_message, fresh))

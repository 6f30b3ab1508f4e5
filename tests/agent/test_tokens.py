"""Token estimates: accuracy across scripts, incremental tallies, calibration."""

from __future__ import annotations

import base64
import hashlib
import json
import math
import uuid

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.messages import ChatMessage, ToolCall
from agent.tokens import (
    CALIBRATION_BOUNDS,
    MESSAGE_OVERHEAD,
    MIN_CALIBRATION_TOKENS,
    TokenTally,
    estimate_message,
    estimate_request,
    estimate_text,
    estimate_tools,
)

# Token counts from tiktoken o200k_base, measured once by hand (the tests never load a tokenizer).
O200K_COUNTS = {
    "The quick brown fox jumps over the lazy dog, then naps in the afternoon sun.": 17,
    "Thanks for the detailed report! I restarted the service and the queue drained within a minute.": 18,
    'def add(a: int, b: int) -> int:\n    """Return the sum."""\n    return a + b\n': 25,
    '{"ok": true, "results": [{"id": 42, "path": "src/app.py", "size": 1834}]}': 30,
    "今天天气很好，我们一起去公园散步吧。": 13,
    "明日は雨が降るそうなので、傘を持って行ってください。": 18,
    "🎉🎉🔥👍🏽❤️🚀": 11,
    "👨\u200d👩\u200d👧": 8,
}




def noise(size: int, label: str) -> bytes:
    """``size`` bytes that look random and are the same on every machine and Python version."""
    blocks = (hashlib.sha256(f"{label}:{i}".encode()).digest() for i in range(math.ceil(size / 32)))
    return b"".join(blocks)[:size]


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def pem(data: bytes) -> str:
    body = base64.b64encode(data).decode()
    lines = [body[i : i + 64] for i in range(0, len(body), 64)]
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(lines) + "\n-----END CERTIFICATE-----"


JWT_PARTS = (b'{"alg":"HS256","typ":"JWT"}', b'{"sub":"1234567890","name":"Ada Lovelace","iat":1716239022,"scope":"read write"}')
# Pasted machine text, with its o200k_base token count (measured once by hand, like O200K_COUNTS).
BLOBS = {
    "base64": (base64.b64encode(noise(900, "file")).decode(), 828),
    "base64 in a sentence": (f"Can you decode this? {base64.b64encode(noise(240, 'short')).decode()} Thanks!", 225),
    "PEM": (pem(noise(600, "cert")), 573),
    "sha256 list": ("\n".join(hashlib.sha256(str(i).encode()).hexdigest() for i in range(12)), 458),
    "git commit": (f"commit {hashlib.sha1(b'one').hexdigest()}\nMerge: {hashlib.sha1(b'two').hexdigest()[:7]}\n\n    fix the retry", 35),
    "JWT": ("Authorization: Bearer " + ".".join([*map(b64url, JWT_PARTS), b64url(noise(32, "signature"))]), 127),
    "UUIDs": (json.dumps([{"id": str(uuid.UUID(bytes=noise(16, f"id{i}"))), "n": i} for i in range(8)]), 264),
}
# Long runs without spaces that are not blobs, with their o200k_base counts.
NOT_BLOBS = {
    "path": ("src/agent/providers/anthropic_messages_and_more.py", 11),
    "CamelCase": ("AbstractSingletonProxyFactoryBeanWithLongName", 8),
    "snake_case": ("this_is_a_very_long_snake_case_function_name", 11),
    "URL with a number": ("https://github.com/anthropics/claude-code/issues/12345/comments", 17),
    "long number": ("31415926535897932384626433832795028841971693993751", 17),
    "minified JS": (
        '!function(e,t){"object"==typeof exports&&"undefined"!=typeof module?module.exports=t():"function"=='
        'typeof define&&define.amd?define(t):(e=e||self).Widget=t()}(this,function(){"use strict";var e=function'
        "(e,t){return e+t};return{add:e}});",
        69,
    ),
}


@pytest.mark.parametrize(("text", "real"), BLOBS.values(), ids=BLOBS.keys())
def test_blobs_are_estimated_within_the_target_band(text: str, real: int) -> None:
    """Word weights put base64 at about 0.4 of its real count and hex at 0.7: a pasted blob would let
    a conversation grow past its compaction threshold unnoticed."""
    assert 0.8 <= estimate_text(text) / real <= 1.3


@pytest.mark.parametrize(("text", "real"), NOT_BLOBS.values(), ids=NOT_BLOBS.keys())
def test_long_words_paths_and_code_are_not_taken_for_blobs(text: str, real: int) -> None:
    # At a blob's rate (about 0.6 tokens a character) each of these would come out 2-3 times too high;
    # the usual weights are off by less on short identifiers.
    assert 0.6 <= estimate_text(text) / real <= 1.7


def test_a_blob_costs_the_same_wherever_it_is_pasted() -> None:
    blob = base64.b64encode(noise(3000, "big")).decode()
    alone, quoted = estimate_text(blob), estimate_text(f"Here it is:\n{blob}\nWhat is it?")
    assert alone <= quoted <= alone + 12


def chars_over_four(text: str) -> int:
    return math.ceil(len(text) / 4)


@pytest.mark.parametrize(("text", "real"), O200K_COUNTS.items(), ids=lambda v: str(v)[:12])
def test_estimate_is_within_the_target_band_of_the_real_count(text: str, real: int) -> None:
    assert 0.8 <= estimate_text(text) / real <= 1.3


def test_empty_text_is_zero_and_any_other_text_at_least_one() -> None:
    assert estimate_text("") == 0
    assert estimate_text("a") == 1
    assert estimate_text(" ") == 1


def test_english_prose_is_close_to_chars_over_four() -> None:
    text = "The quick brown fox jumps over the lazy dog, then naps in the afternoon sun."
    assert 0.7 * chars_over_four(text) <= estimate_text(text) <= 1.1 * chars_over_four(text)


def test_chinese_estimates_far_above_chars_over_four() -> None:
    text = "今天天气很好，我们一起去公园散步吧。"  # 18 characters, 13 real tokens
    assert estimate_text(text) >= 2.5 * chars_over_four(text)


def test_emoji_cost_more_per_character_than_cjk() -> None:
    emoji, cjk = "🎉🔥🚀😀" * 5, "天气很好" * 5
    assert estimate_text(emoji) > estimate_text(cjk) >= 2.5 * chars_over_four(cjk)


def test_zwj_sequences_count_their_joiners() -> None:
    assert estimate_text("👨\u200d👩\u200d👧") > estimate_text("👨👩👧")


def test_code_and_json_cost_more_per_character_than_prose() -> None:
    prose = "and the rest of the team agreed to move the meeting to the next week " * 4
    code = "if (x[i] >= y[j]) { z += f(x[i], y[j]); }\n" * 6
    assert estimate_text(code) / len(code) > 1.3 * estimate_text(prose) / len(prose)


def test_estimate_grows_linearly_with_repetition() -> None:
    piece = "Mixed 文本 with emoji 🎉 and code: f(x) = [1, 2, 3]\n"
    once, many = estimate_text(piece), estimate_text(piece * 50)
    assert 45 * once <= many <= 50 * once


def test_unusual_characters_do_not_break_the_estimate() -> None:
    assert estimate_text("broken \ud800 surrogate") > 0
    assert estimate_text("\x00\x01\x7f") > 0
    assert estimate_text("ｆｕｌｌ－ｗｉｄｔｈ") >= estimate_text("full-width")


def test_message_adds_framing_tool_calls_and_call_ids() -> None:
    text = "Let me check the weather."
    plain = ChatMessage.assistant(text)
    assert estimate_message(plain) == MESSAGE_OVERHEAD + estimate_text(text)
    call = ToolCall(id="call_1", name="get_weather", arguments='{"city": "Paris", "unit": "celsius"}')
    with_call = ChatMessage.assistant(text, [call])
    assert estimate_message(with_call) > estimate_message(plain) + estimate_text(call.arguments)
    result = ChatMessage.tool("call_1", "18 degrees and cloudy", tool_name="get_weather")
    assert estimate_message(result) > MESSAGE_OVERHEAD + estimate_text(result.content)


def test_reasoning_and_meta_are_not_counted() -> None:
    plain = ChatMessage.assistant("Done.")
    noisy = ChatMessage(role="assistant", content="Done.", reasoning="long private thoughts " * 50, meta={"x": 1})
    assert estimate_message(noisy) == estimate_message(plain)


def test_request_sums_system_prompt_messages_and_tools() -> None:
    tools = [{"name": "search", "description": "Search the web.", "parameters": {"type": "object", "properties": {}}}]
    messages = [ChatMessage.user("hello"), ChatMessage.assistant("hi there")]
    system = estimate_text("Be brief.") + MESSAGE_OVERHEAD
    expected = system + sum(map(estimate_message, messages)) + estimate_tools(tools)
    assert estimate_request("Be brief.", messages, tools) == expected
    assert estimate_request("", []) == 0
    assert estimate_tools(tools) > estimate_text("search Search the web.")


# -- the incremental tally -----------------------------------------------------

texts = st.text(st.characters(codec="utf-8"), max_size=200) | st.sampled_from(list(O200K_COUNTS))
tool_calls = st.builds(ToolCall, id=st.text(min_size=1, max_size=12), name=st.text(max_size=20), arguments=texts)
messages = st.one_of(
    st.builds(ChatMessage.user, texts),
    st.builds(ChatMessage.system, texts),
    st.builds(ChatMessage.assistant, texts, st.lists(tool_calls, max_size=3)),
    st.builds(ChatMessage.tool, st.text(min_size=1, max_size=12), texts),
)
conversations = st.lists(messages, max_size=30)


@settings(max_examples=60, deadline=None)
@given(conversations, st.integers(min_value=0, max_value=5_000))
def test_incremental_tally_equals_full_recount(history: list[ChatMessage], fixed: int) -> None:
    tally = TokenTally(fixed=fixed)
    for message in history:
        tally.add(message)
    recount = fixed + sum(map(estimate_message, history))
    assert tally.raw == tally.total == recount
    assert tally.message_count == len(history)
    assert TokenTally(history, fixed=fixed).raw == recount


@settings(max_examples=40, deadline=None)
@given(conversations, conversations)
def test_reset_recounts_from_scratch(before: list[ChatMessage], after: list[ChatMessage]) -> None:
    tally = TokenTally(before)
    tally.reset(after)
    assert tally.raw == TokenTally(after).raw
    assert tally.message_count == len(after)


def test_extend_and_add_agree_and_add_returns_the_message_estimate() -> None:
    history = [ChatMessage.user("你好"), ChatMessage.assistant("Hello! 👋")]
    one_by_one = TokenTally()
    assert [one_by_one.add(m) for m in history] == [estimate_message(m) for m in history]
    together = TokenTally()
    together.extend(history)
    assert together.raw == one_by_one.raw


def test_fixed_part_can_be_replaced() -> None:
    tally = TokenTally([ChatMessage.user("hi")], fixed=100)
    tally.set_fixed(250)
    assert tally.fixed == 250
    assert tally.raw == 250 + estimate_message(ChatMessage.user("hi"))


# -- calibration against reported usage ------------------------------------------


def big_tally() -> TokenTally:
    return TokenTally(fixed=10_000)


def test_calibration_moves_the_total_toward_reported_usage() -> None:
    tally = big_tally()
    tally.calibrate(13_000)
    assert tally.factor == pytest.approx(1.3)
    assert tally.total == 13_000
    tally.calibrate(11_000)  # a second, lower observation pulls it back part of the way
    assert 11_000 < tally.total < 13_000


def test_repeated_observations_converge_on_the_ratio() -> None:
    tally = big_tally()
    for _ in range(40):
        tally.calibrate(8_000)
    assert tally.factor == pytest.approx(0.8, rel=1e-3)


def test_calibration_is_bounded() -> None:
    low, high = CALIBRATION_BOUNDS
    tally = big_tally()
    tally.calibrate(10**9)
    assert tally.factor == high
    tally = big_tally()
    tally.calibrate(1)
    assert tally.factor == low


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 10**8), st.integers(0, 10**7)), max_size=20))
def test_factor_stays_within_bounds_whatever_is_reported(observations: list[tuple[int, int]]) -> None:
    tally = TokenTally()
    for reported, estimated in observations:
        factor = tally.calibrate(reported, estimated)
        assert CALIBRATION_BOUNDS[0] <= factor <= CALIBRATION_BOUNDS[1]


def test_calibration_uses_the_estimate_it_is_given() -> None:
    tally = big_tally()
    tally.calibrate(4_000, estimated=2_000)
    assert tally.factor == pytest.approx(2.0)
    assert tally.total == 20_000


def test_small_or_missing_usage_is_ignored() -> None:
    tally = TokenTally(fixed=MIN_CALIBRATION_TOKENS - 1)
    assert tally.calibrate(5_000) == 1.0
    assert big_tally().calibrate(0) == 1.0


def test_reset_keeps_the_calibration() -> None:
    tally = big_tally()
    tally.calibrate(15_000)
    tally.reset([ChatMessage.user("summary of the earlier conversation")])
    assert tally.factor == pytest.approx(1.5)
    assert tally.total == round(tally.raw * 1.5)

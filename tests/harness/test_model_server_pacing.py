"""Paced replies: the fake model server writes a text one word per delta at a set pace, in both APIs,
as the real SDKs read it; without a pace it streams as it always did."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.fakes.model_server.pacing import word_pieces
from tests.waiting import eventually

HELLO: Any = [{"role": "user", "content": "hello"}]
ANSWER = "Paced answers arrive word by word, as a model writes them."
WORDS = ["Paced", " answers", " arrive", " word", " by", " word,", " as", " a", " model", " writes", " them."]
TOOL: Any = {"name": "lookup", "description": "Look something up.", "input_schema": {"type": "object", "properties": {}}}
OPENAI_TOOL: Any = {"type": "function", "function": {"name": "lookup", "description": "Look.", "parameters": {"type": "object"}}}


class Waits:
    """The server's pauses between deltas, recorded instead of waited for."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    async def __call__(self, seconds: float) -> None:
        self.seconds.append(seconds)


async def claude_texts(client: anthropic.AsyncAnthropic, **extra: Any) -> list[str]:
    async with client.messages.stream(model="claude-test", max_tokens=256, messages=HELLO, **extra) as stream:
        return [event.text async for event in stream if event.type == "text"]


async def gpt_texts(client: openai.AsyncOpenAI, **extra: Any) -> list[str]:
    stream = await client.chat.completions.create(model="gpt-test", messages=HELLO, stream=True, **extra)
    return [c.choices[0].delta.content async for c in stream if c.choices and c.choices[0].delta.content]


def test_words_are_the_tokens_and_join_back_into_the_text() -> None:
    assert word_pieces(ANSWER) == WORDS
    assert word_pieces("  two\n\nwords  ") == ["  two", "\n\nwords  "]
    assert word_pieces("   ") == ["   "] and word_pieces("") == []


@pytest.mark.parametrize(
    ("reply", "claude_tools", "gpt_tools"),
    [
        (Text(ANSWER, pace=40), {}, {}),
        # A tool call's leading text is paced; its arguments are not.
        (ToolCalls(ToolUse("lookup", {"query": "a fairly long query"}), text=ANSWER, pace=40), {"tools": [TOOL]}, {"tools": [OPENAI_TOOL]}),
    ],
)
async def test_a_paced_text_streams_one_word_per_delta_at_its_pace(
    reply: Text | ToolCalls,
    claude_tools: dict[str, Any],
    gpt_tools: dict[str, Any],
    model_server: ModelServer,
    claude: anthropic.AsyncAnthropic,
    gpt: openai.AsyncOpenAI,
) -> None:
    waits = Waits()
    model_server.sleep = waits
    model_server.script(reply, reply)
    assert await claude_texts(claude, **claude_tools) == WORDS
    assert waits.seconds == [1 / 40] * (len(WORDS) - 1)  # the first word at once, then one every 1/40 s
    waits.seconds.clear()
    assert await gpt_texts(gpt, **gpt_tools) == WORDS
    assert waits.seconds == [1 / 40] * (len(WORDS) - 1)


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_each_paced_word_reaches_the_client_before_the_next_is_written(
    api: str, model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    """Lockstep: the server writes the next word only once the SDK has handed the previous one
    over, so a stream held back and sent in one go would hang here."""
    received: list[str] = []

    async def after_the_client_read_it(seconds: float) -> None:
        await eventually(lambda: len(received) == len(waits) + 1, "the SDK has every word written before this pause")
        waits.append(seconds)

    waits: list[float] = []
    model_server.sleep = after_the_client_read_it
    model_server.script(Text(ANSWER, pace=1000))
    if api == "anthropic":
        async with claude.messages.stream(model="claude-test", max_tokens=256, messages=HELLO) as stream:
            async for event in stream:
                if event.type == "text":
                    received.append(event.text)
    else:
        chunks = await gpt.chat.completions.create(model="gpt-test", messages=HELLO, stream=True)
        async for chunk in chunks:
            if chunk.choices and chunk.choices[0].delta.content:
                received.append(chunk.choices[0].delta.content)
    assert received == WORDS and len(waits) == len(WORDS) - 1


async def test_without_a_pace_the_text_streams_at_once_in_sixteen_character_pieces(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    waits = Waits()
    model_server.sleep = waits
    model_server.script(Text(ANSWER), Text(ANSWER))
    pieces = [ANSWER[i : i + 16] for i in range(0, len(ANSWER), 16)]
    assert await claude_texts(claude) == pieces
    assert await gpt_texts(gpt) == pieces
    assert waits.seconds == []


async def test_a_paced_answer_without_streaming_comes_whole_once_written(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    waits = Waits()
    model_server.sleep = waits
    model_server.script(Text(ANSWER, pace=10), Text(ANSWER, pace=10))
    message = await claude.messages.create(model="claude-test", max_tokens=256, messages=HELLO)
    completion = await gpt.chat.completions.create(model="gpt-test", messages=HELLO)
    assert message.content[0].text == ANSWER and completion.choices[0].message.content == ANSWER  # type: ignore[union-attr]
    assert waits.seconds == [pytest.approx((len(WORDS) - 1) / 10)] * 2


def test_a_pace_must_be_above_zero() -> None:
    for pace in (0, -5):
        with pytest.raises(ValueError, match="tokens per second"):
            Text("hi", pace=pace)
        with pytest.raises(ValueError, match="tokens per second"):
            ToolCalls(ToolUse("lookup"), text="hi", pace=pace)

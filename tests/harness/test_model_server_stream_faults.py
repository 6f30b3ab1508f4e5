"""Scripted stream faults (a connection dropped mid-answer, an event that is not JSON) as the real SDKs see them."""

from __future__ import annotations

from typing import Any

import anthropic
import openai
import pytest

from tests.fakes.model_server import CutStream, MalformedEvent, ModelServer, Text

HELLO: Any = [{"role": "user", "content": "hello"}]
ANSWER = Text("an answer long enough to stream in several pieces")


async def claude_events(client: anthropic.AsyncAnthropic, seen: list[str]) -> None:
    async with client.messages.stream(model="claude-test", max_tokens=32, messages=HELLO) as stream:
        async for event in stream:
            seen.append(event.type)


async def gpt_chunks(client: openai.AsyncOpenAI, seen: list[Any]) -> None:
    stream = await client.chat.completions.create(model="gpt-test", messages=HELLO, stream=True)
    async for chunk in stream:
        seen.append(chunk)


async def test_a_cut_stream_drops_the_connection_after_the_given_events(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(CutStream(ANSWER, after=3), CutStream(ANSWER, after=2))
    seen: list[Any] = []
    with pytest.raises(Exception, match="peer closed connection") as cut:  # the HTTP library's own error
        await claude_events(claude, seen)
    assert not isinstance(cut.value, anthropic.APIError)
    assert "message_start" in seen and "message_stop" not in seen
    chunks: list[Any] = []
    with pytest.raises(openai.APIConnectionError):  # the OpenAI SDK wraps it
        await gpt_chunks(gpt, chunks)
    assert len(chunks) == 2
    # The server accounts the request as answered: the prompt was processed (and would be billed).
    assert [r.status for r in model_server.requests] == [200, 200]
    assert all(r.usage for r in model_server.requests)


async def test_a_cut_that_is_not_abrupt_ends_the_body_early(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    model_server.script(CutStream(ANSWER, after=4, abrupt=False))
    seen: list[str] = []
    await claude_events(claude, seen)  # no error: the body simply ends
    assert "message_start" in seen and "message_delta" not in seen and "message_stop" not in seen


async def test_a_malformed_event_fails_the_sdks_decoding(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(MalformedEvent(ANSWER, after=2), MalformedEvent(ANSWER, after=2))
    with pytest.raises(ValueError):
        await claude_events(claude, [])
    with pytest.raises(ValueError):
        await gpt_chunks(gpt, [])


async def test_faults_without_streaming(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(CutStream(ANSWER), CutStream(ANSWER), MalformedEvent(ANSWER), MalformedEvent(ANSWER))
    with pytest.raises(anthropic.APIConnectionError):
        await claude.messages.create(model="claude-test", max_tokens=32, messages=HELLO)
    with pytest.raises(openai.APIConnectionError):
        await gpt.chat.completions.create(model="gpt-test", messages=HELLO)
    with pytest.raises(ValueError):
        await claude.messages.create(model="claude-test", max_tokens=32, messages=HELLO)
    with pytest.raises(ValueError):
        await gpt.chat.completions.create(model="gpt-test", messages=HELLO)

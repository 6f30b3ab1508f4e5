"""Scripted errors surface as the real SDKs' exception types."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import openai
import pytest

from tests.fakes.model_server import (
    AuthFailed,
    ContextTooLong,
    ModelServer,
    Overloaded,
    RateLimited,
    ServerError,
    Text,
    Timeout,
    Unavailable,
)

MODEL = "claude-test"
GPT = "gpt-test"
HELLO: Any = [{"role": "user", "content": "hello"}]


async def ask_claude(client: anthropic.AsyncAnthropic) -> anthropic.types.Message:
    return await client.messages.create(model=MODEL, max_tokens=32, messages=HELLO)


async def ask_gpt(client: openai.AsyncOpenAI) -> openai.types.chat.ChatCompletion:
    return await client.chat.completions.create(model=GPT, messages=HELLO)


async def test_rate_limit_carries_retry_after(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(RateLimited(7), RateLimited(2.5))
    with pytest.raises(anthropic.RateLimitError) as claude_error:
        await ask_claude(claude)
    with pytest.raises(openai.RateLimitError) as gpt_error:
        await ask_gpt(gpt)
    assert claude_error.value.response.headers["retry-after"] == "7"
    assert claude_error.value.type == "rate_limit_error"
    assert gpt_error.value.response.headers["retry-after"] == "2.5"
    assert gpt_error.value.code == "rate_limit_exceeded"


async def test_server_errors(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(ServerError(), ServerError())
    with pytest.raises(anthropic.InternalServerError) as claude_error:
        await ask_claude(claude)
    with pytest.raises(openai.InternalServerError) as gpt_error:
        await ask_gpt(gpt)
    assert claude_error.value.status_code == 500 == gpt_error.value.status_code
    assert claude_error.value.type == "api_error"


async def test_overloaded_is_529_on_anthropic(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(Overloaded(), Overloaded())
    with pytest.raises(anthropic.APIStatusError) as claude_error:
        await ask_claude(claude)
    with pytest.raises(openai.InternalServerError) as gpt_error:
        await ask_gpt(gpt)
    assert isinstance(claude_error.value, anthropic.InternalServerError)
    assert claude_error.value.status_code == 529 and claude_error.value.type == "overloaded_error"
    assert gpt_error.value.status_code == 503


async def test_service_unavailable(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(Unavailable(), Unavailable())
    with pytest.raises(anthropic.InternalServerError) as claude_error:
        await ask_claude(claude)
    with pytest.raises(openai.InternalServerError) as gpt_error:
        await ask_gpt(gpt)
    assert claude_error.value.status_code == 503 == gpt_error.value.status_code


async def test_authentication_errors(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(AuthFailed())
    with pytest.raises(anthropic.AuthenticationError):
        await ask_claude(claude)
    model_server.api_key = "the-right-key"
    with pytest.raises(openai.AuthenticationError) as gpt_error:
        await ask_gpt(gpt)
    assert gpt_error.value.code == "invalid_api_key"
    assert model_server.pending == 0


async def test_timeout_raises_api_timeout_quickly(model_server: ModelServer) -> None:
    model_server.script(Timeout(), Timeout())
    claude = anthropic.AsyncAnthropic(api_key="t", base_url=model_server.base_url, max_retries=0, timeout=0.3)
    gpt = openai.AsyncOpenAI(api_key="t", base_url=model_server.base_url + "/v1", max_retries=0, timeout=0.3)
    started = time.monotonic()
    try:
        with pytest.raises(anthropic.APITimeoutError):
            await ask_claude(claude)
        with pytest.raises(openai.APITimeoutError):
            await ask_gpt(gpt)
    finally:
        await claude.close()
        await gpt.close()
    assert time.monotonic() - started < 2.0
    assert [(record.reply, record.status) for record in model_server.requests] == [(Timeout(), None)] * 2
    assert all(record.stalled and record.usage is None for record in model_server.requests)


async def test_short_stall_then_default_reply(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    model_server.script(Timeout(0.05), Text("after"))
    slow = await ask_claude(claude)
    fast = await ask_claude(claude)
    assert slow.content[0].text == "ok: hello"
    assert model_server.requests[0].stalled and model_server.requests[0].status == 200
    assert fast.content[0].text == "after"


async def test_scripted_context_length_errors(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(ContextTooLong(), ContextTooLong(limit=4))
    with pytest.raises(anthropic.BadRequestError) as claude_error:
        await ask_claude(claude)
    with pytest.raises(openai.BadRequestError) as gpt_error:
        await ask_gpt(gpt)
    claude_tokens = model_server.requests[0].prompt_tokens
    gpt_tokens = model_server.requests[1].prompt_tokens
    assert claude_error.value.type == "invalid_request_error"
    assert claude_error.value.api_message == f"prompt is too long: {claude_tokens} tokens > {claude_tokens - 1} maximum"
    assert gpt_error.value.code == "context_length_exceeded" and gpt_error.value.param == "messages"
    assert "maximum context length is 4 tokens" in gpt_error.value.message
    assert f"resulted in {gpt_tokens} tokens" in gpt_error.value.message


async def test_context_limit_rejects_without_consuming_the_script(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.context_limit = {MODEL: 20, GPT: 20}
    model_server.script(Text("short enough"))
    long_prompt: Any = [{"role": "user", "content": "x" * 200}]
    with pytest.raises(anthropic.BadRequestError) as claude_error:
        await claude.messages.create(model=MODEL, max_tokens=8, messages=long_prompt)
    with pytest.raises(openai.BadRequestError) as gpt_error:
        await gpt.chat.completions.create(model=GPT, messages=long_prompt)
    assert claude_error.value.api_message is not None
    assert claude_error.value.api_message.endswith("tokens > 20 maximum")
    assert gpt_error.value.code == "context_length_exceeded"
    assert model_server.pending == 1
    assert (await ask_claude(claude)).content[0].text == "short enough"


async def test_errors_stream_requests_too(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    model_server.script(RateLimited(1))
    with pytest.raises(anthropic.RateLimitError):
        async with claude.messages.stream(model=MODEL, max_tokens=8, messages=HELLO) as stream:
            await stream.get_final_message()


async def test_sdk_retries_consume_the_script_in_order(model_server: ModelServer) -> None:
    model_server.script(RateLimited(0.01), RateLimited(0.01), Text("third time lucky"))
    client = anthropic.AsyncAnthropic(api_key="t", base_url=model_server.base_url, max_retries=2)
    try:
        message = await ask_claude(client)
    finally:
        await client.close()
    assert message.content[0].text == "third time lucky"
    assert [record.status for record in model_server.requests] == [429, 429, 200]
    assert [record.header("x-stainless-retry-count") for record in model_server.requests] == ["0", "1", "2"]

"""Prompt-cache accounting of the fake model server, seen through the real SDKs.

Expected token figures are computed here from the documented rule
(``ceil(len(canonical JSON of the block without cache_control) / 4)``), not
from the server's own code.
"""

from __future__ import annotations

import copy
import json
import math
from typing import Any

import anthropic
import openai
import pytest

from tests.fakes.model_server import ModelServer, ServerError, Text

MODEL = "claude-test"
GPT = "gpt-test"
SYSTEM_TEXT = "You are the Switchboard agent. Answer briefly and politely. " * 20
TOOLS = [
    {"name": f"tool_{n}", "description": f"Tool number {n}.", "input_schema": {"type": "object"}} for n in range(3)
]
Block = dict[str, Any]


def tokens_of(block: Block) -> int:
    """The documented per-block token count."""
    bare = {key: value for key, value in block.items() if key != "cache_control"}
    return math.ceil(len(json.dumps(bare, sort_keys=True, separators=(",", ":"), ensure_ascii=False)) / 4)


def text_block(text: str) -> Block:
    return {"type": "text", "text": text}


def marked(block: Block, ttl: str | None = None) -> Block:
    marker = {"type": "ephemeral"} if ttl is None else {"type": "ephemeral", "ttl": ttl}
    return {**block, "cache_control": marker}


def system(ttl: str | None = None) -> list[Block]:
    return [marked(text_block(SYSTEM_TEXT), ttl)]


def user(text: str) -> Block:
    return {"role": "user", "content": text}


def mark_last_messages(history: list[Block], count: int = 3) -> list[Block]:
    """A copy of ``history`` with a cache marker on the last block of the last ``count`` messages."""
    messages = copy.deepcopy(history)
    for message in messages[-count:]:
        content = message["content"]
        blocks = [text_block(content)] if isinstance(content, str) else content
        message["content"] = blocks[:-1] + [marked(blocks[-1])]
    return messages


async def ask(client: anthropic.AsyncAnthropic, **request: Any) -> anthropic.types.Message:
    return await client.messages.create(model=request.pop("model", MODEL), max_tokens=64, **request)


def figures(message: anthropic.types.Message) -> tuple[int, int, int]:
    usage = message.usage
    return usage.input_tokens, usage.cache_read_input_tokens or 0, usage.cache_creation_input_tokens or 0


SYSTEM_TOKENS = tokens_of(text_block(SYSTEM_TEXT))


async def test_first_request_writes_and_second_reads(claude: anthropic.AsyncAnthropic) -> None:
    first = await ask(claude, system=system(), messages=[user("hello")])
    second = await ask(claude, system=system(), messages=[user("a different question")])
    assert figures(first) == (tokens_of(text_block("hello")), 0, SYSTEM_TOKENS)
    assert figures(second) == (tokens_of(text_block("a different question")), SYSTEM_TOKENS, 0)


async def test_rolling_chat_reads_almost_everything_every_turn(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    """Markers on system + the last 3 messages: the last marker moves every turn,
    yet each turn reads the whole previous prompt (a "read only if the prefix up
    to the last marker was seen" rule would report zero reads here)."""
    history: list[Block] = []
    for turn in range(10):
        history.append(user(f"turn {turn}: " + "tell me more about the weather " * 3))
        request = {"system": system(), "messages": mark_last_messages(history)}
        if turn % 2:
            async with claude.messages.stream(model=MODEL, max_tokens=64, **request) as stream:
                reply = await stream.get_final_message()
        else:
            reply = await ask(claude, **request)
        history.append({"role": "assistant", "content": reply.content[0].text})
        assert reply.usage == anthropic.types.Usage.model_validate(model_server.last_request.usage)

    records = model_server.requests
    assert records[0].cache_read == 0 and records[0].cache_creation == records[0].prompt_tokens
    for previous, current in zip(records, records[1:]):
        assert current.cache_read == previous.prompt_tokens
        assert current.cache_creation == current.prompt_tokens - previous.prompt_tokens > 0
        assert current.usage is not None and current.usage["input_tokens"] == 0
        assert current.cache_read / current.prompt_tokens > 0.8
    reads = [record.cache_read for record in records]
    assert all(later > earlier for earlier, later in zip(reads, reads[1:]))


async def test_read_falls_back_to_an_earlier_breakpoint(claude: anthropic.AsyncAnthropic) -> None:
    tools = TOOLS[:-1] + [marked(TOOLS[-1])]
    tool_tokens = sum(tokens_of(tool) for tool in TOOLS)
    await ask(claude, tools=tools, system=system(), messages=[user("hi")])
    other_system = [marked(text_block("A completely different persona."))]
    second = await ask(claude, tools=tools, system=other_system, messages=[user("hi")])
    _, read, creation = figures(second)
    assert read == tool_tokens
    assert creation == tokens_of(other_system[0])


async def test_no_markers_means_no_caching(claude: anthropic.AsyncAnthropic) -> None:
    plain = [text_block(SYSTEM_TEXT)]
    first = await ask(claude, system=plain, messages=[user("hi")])
    second = await ask(claude, system=plain, messages=[user("hi")])
    assert figures(first) == figures(second) == (SYSTEM_TOKENS + tokens_of(text_block("hi")), 0, 0)


async def test_cache_is_per_model(claude: anthropic.AsyncAnthropic) -> None:
    await ask(claude, system=system(), messages=[user("hi")])
    other = await ask(claude, model="claude-other", system=system(), messages=[user("hi")])
    assert figures(other)[1:] == (0, SYSTEM_TOKENS)


async def test_five_minute_entries_expire(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    await ask(claude, system=system(), messages=[user("hi")])
    model_server.clock.advance(301)
    expired = await ask(claude, system=system(), messages=[user("hi")])
    assert figures(expired)[1:] == (0, SYSTEM_TOKENS)


async def test_reads_refresh_the_expiry(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    await ask(claude, system=system(), messages=[user("hi")])
    for _ in range(3):
        model_server.clock.advance(299)
        hit = await ask(claude, system=system(), messages=[user("hi")])
        assert figures(hit)[1:] == (SYSTEM_TOKENS, 0)


async def test_one_hour_marker_survives_five_minutes(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    await ask(claude, system=system("1h"), messages=[user("hi")])
    model_server.clock.advance(301)
    survived = await ask(claude, system=system("1h"), messages=[user("hi")])
    model_server.clock.advance(3601)
    expired = await ask(claude, system=system("1h"), messages=[user("hi")])
    assert figures(survived)[1:] == (SYSTEM_TOKENS, 0)
    assert figures(expired)[1:] == (0, SYSTEM_TOKENS)


def documented_total(request: dict[str, Any]) -> int:
    """Total prompt tokens of a request by the documented rule."""
    blocks = list(request.get("tools", [])) + list(request.get("system", []))
    for message in request["messages"]:
        content = message["content"]
        blocks += [text_block(content)] if isinstance(content, str) else content
    return sum(tokens_of(block) for block in blocks)


@pytest.mark.parametrize("shape", ["system", "tools", "messages", "everything"])
async def test_tokens_add_up(model_server: ModelServer, claude: anthropic.AsyncAnthropic, shape: str) -> None:
    history = [user("first question " * 5), {"role": "assistant", "content": "an answer"}, user("second")]
    for _ in range(3):
        request: dict[str, Any] = {"messages": history}
        if shape in ("system", "everything"):
            request["system"] = system()
        if shape in ("tools", "everything"):
            request["tools"] = TOOLS[:-1] + [marked(TOOLS[-1])]
        if shape in ("messages", "everything"):
            request["messages"] = mark_last_messages(history, 2)
        counted = await claude.messages.count_tokens(model=MODEL, **request)
        message = await ask(claude, **request)
        assert sum(figures(message)) == counted.input_tokens == documented_total(request)
        history = history + [{"role": "assistant", "content": message.content[0].text}, user("more")]
    assert model_server.requests_for("anthropic", "/v1/messages")[-1].cache_read > 0


async def test_too_many_markers_is_rejected(claude: anthropic.AsyncAnthropic) -> None:
    history = [user(f"message {n}") for n in range(5)]
    with pytest.raises(anthropic.BadRequestError) as error:
        await ask(claude, messages=mark_last_messages(history, 5))
    assert error.value.api_message == "A maximum of 4 blocks with cache_control may be provided. Found 5."


async def test_errors_do_not_write_the_cache(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    model_server.script(ServerError(), Text("fine"))
    with pytest.raises(anthropic.InternalServerError):
        await ask(claude, system=system(), messages=[user("hi")])
    retried = await ask(claude, system=system(), messages=[user("hi")])
    assert figures(retried)[1:] == (0, SYSTEM_TOKENS)


async def test_minimum_cacheable_length(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    model_server.anthropic_cache.min_cacheable_tokens = SYSTEM_TOKENS + 1
    first = await ask(claude, system=system(), messages=[user("hi")])
    second = await ask(claude, system=system(), messages=[user("hi")])
    assert figures(first)[1:] == figures(second)[1:] == (0, 0)


async def test_openai_caches_a_growing_conversation(model_server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    messages: list[Block] = [{"role": "system", "content": SYSTEM_TEXT}]
    previous_prompt = 0
    for turn in range(6):
        messages.append(user(f"turn {turn}: what next?"))
        stream = await gpt.chat.completions.create(
            model=GPT, messages=messages, stream=True, stream_options={"include_usage": True}  # type: ignore[arg-type]
        )
        chunks = [chunk async for chunk in stream]
        usage = chunks[-1].usage
        assert usage is not None and usage.prompt_tokens_details is not None
        assert usage.prompt_tokens_details.cached_tokens == previous_prompt
        assert usage.prompt_tokens == model_server.last_request.prompt_tokens > previous_prompt
        previous_prompt = usage.prompt_tokens
        text = "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices)
        messages.append({"role": "assistant", "content": text})


async def test_openai_cache_expires_and_ttl_is_configurable(
    model_server: ModelServer, gpt: openai.AsyncOpenAI
) -> None:
    messages = [{"role": "system", "content": SYSTEM_TEXT}, user("hi")]

    async def cached() -> int:
        completion = await gpt.chat.completions.create(model=GPT, messages=messages)  # type: ignore[arg-type]
        assert completion.usage is not None and completion.usage.prompt_tokens_details is not None
        return completion.usage.prompt_tokens_details.cached_tokens or 0

    assert await cached() == 0
    model_server.clock.advance(301)
    assert await cached() == 0
    model_server.openai_cache.ttl = 3600
    assert await cached() == model_server.last_request.prompt_tokens
    model_server.clock.advance(3000)
    assert await cached() == model_server.last_request.prompt_tokens

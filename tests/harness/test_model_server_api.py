"""The fake model server speaks both APIs well enough for the real SDKs."""

from __future__ import annotations

from typing import Any

import aiohttp
import anthropic
import openai

from tests.fakes.model_server import ModelServer, RequestRecord, Text, ToolCalls, ToolUse

MODEL = "claude-test"
GPT = "gpt-test"
MEMORY_TOOL = {
    "name": "memory",
    "description": "Store a note.",
    "input_schema": {"type": "object", "properties": {"action": {"type": "string"}}},
}
OPENAI_MEMORY_TOOL = {
    "type": "function",
    "function": {"name": "memory", "description": "Store a note.", "parameters": MEMORY_TOOL["input_schema"]},
}


async def test_anthropic_plain_text(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    model_server.script(Text("hello there"))
    message = await claude.messages.create(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    )
    assert [block.type for block in message.content] == ["text"]
    assert message.content[0].text == "hello there"
    assert message.stop_reason == "end_turn"
    assert message.model == MODEL
    assert message.usage.output_tokens == 3
    assert message.usage.cache_read_input_tokens == 0
    assert message.usage.cache_creation_input_tokens == 0


async def test_anthropic_stream_reassembles_text_and_usage(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    text = "a fairly long streamed answer that spans several deltas"
    model_server.script(Text(text))
    async with claude.messages.stream(
        model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        deltas = [piece async for piece in stream.text_stream]
        final = await stream.get_final_message()
    assert len(deltas) > 1 and "".join(deltas) == text
    assert final.content[0].text == text
    assert final.stop_reason == "end_turn"
    assert final.usage.input_tokens == model_server.last_request.usage["input_tokens"]
    assert final.usage.output_tokens == model_server.last_request.usage["output_tokens"]
    assert model_server.last_request.stream


async def test_anthropic_stream_event_order(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    model_server.script(ToolCalls(ToolUse("memory", {"action": "add"}), text="saving"))
    stream = await claude.messages.create(
        model=MODEL, max_tokens=64, stream=True, messages=[{"role": "user", "content": "hi"}]
    )
    kinds = [event.type async for event in stream]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == 2 == kinds.count("content_block_stop")


async def test_openai_plain_text(model_server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    model_server.script(Text("hello there"))
    completion = await gpt.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "hi"}])
    choice = completion.choices[0]
    assert choice.message.content == "hello there"
    assert choice.finish_reason == "stop"
    assert completion.usage is not None
    assert completion.usage.completion_tokens == 3
    assert completion.usage.total_tokens == completion.usage.prompt_tokens + 3


async def test_openai_stream_with_usage_chunk(model_server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    text = "a fairly long streamed answer that spans several chunks"
    model_server.script(Text(text))
    stream = await gpt.chat.completions.create(
        model=GPT,
        messages=[{"role": "user", "content": "hi"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    assert "".join(chunk.choices[0].delta.content or "" for chunk in chunks if chunk.choices) == text
    assert chunks[-2].choices[0].finish_reason == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None
    assert chunks[-1].usage.prompt_tokens == model_server.last_request.prompt_tokens


async def test_openai_stream_without_usage_has_no_usage_chunk(
    model_server: ModelServer, gpt: openai.AsyncOpenAI
) -> None:
    stream = await gpt.chat.completions.create(
        model=GPT, messages=[{"role": "user", "content": "hi"}], stream=True
    )
    chunks = [chunk async for chunk in stream]
    assert all(chunk.choices and chunk.usage is None for chunk in chunks)


async def test_anthropic_tool_round_trip(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    model_server.script(ToolUse("memory", {"action": "add", "text": "likes tea"}), Text("done"))
    messages: list[dict[str, Any]] = [{"role": "user", "content": "remember I like tea"}]
    first = await claude.messages.create(model=MODEL, max_tokens=64, tools=[MEMORY_TOOL], messages=messages)
    assert first.stop_reason == "tool_use"
    call = first.content[0]
    assert call.type == "tool_use" and call.name == "memory"
    assert call.input == {"action": "add", "text": "likes tea"}

    messages += [
        {"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": call.id, "content": "saved"}]},
    ]
    second = await claude.messages.create(model=MODEL, max_tokens=64, tools=[MEMORY_TOOL], messages=messages)
    assert second.stop_reason == "end_turn" and second.content[0].text == "done"
    record = model_server.last_request
    assert record.ends_with_tool_result
    assert record.messages[-1]["content"][0]["tool_use_id"] == call.id


async def test_anthropic_streamed_tool_input_is_reassembled(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    payload = {"action": "add", "text": "a note long enough to need several input_json_delta events"}
    model_server.script(ToolUse("memory", payload, id="toolu_fixed"))
    async with claude.messages.stream(
        model=MODEL, max_tokens=64, tools=[MEMORY_TOOL], messages=[{"role": "user", "content": "hi"}]
    ) as stream:
        final = await stream.get_final_message()
    assert final.stop_reason == "tool_use"
    assert final.content[0].id == "toolu_fixed" and final.content[0].input == payload


async def test_openai_tool_round_trip(model_server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    model_server.script(
        ToolCalls(ToolUse("memory", {"action": "add"}), ToolUse("memory", {"action": "list"})), Text("final")
    )
    messages: list[dict[str, Any]] = [{"role": "user", "content": "remember this"}]
    first = await gpt.chat.completions.create(model=GPT, messages=messages, tools=[OPENAI_MEMORY_TOOL])
    choice = first.choices[0]
    assert choice.finish_reason == "tool_calls"
    calls = choice.message.tool_calls or []
    assert [call.function.arguments for call in calls] == ['{"action":"add"}', '{"action":"list"}']

    messages.append(choice.message.model_dump(exclude_none=True))
    messages += [{"role": "tool", "tool_call_id": call.id, "content": "ok"} for call in calls]
    second = await gpt.chat.completions.create(model=GPT, messages=messages, tools=[OPENAI_MEMORY_TOOL])
    assert second.choices[0].message.content == "final"
    assert second.choices[0].finish_reason == "stop"
    assert model_server.last_request.ends_with_tool_result


async def test_openai_streamed_tool_calls(model_server: ModelServer, gpt: openai.AsyncOpenAI) -> None:
    payload = {"action": "add", "text": "long enough to span several argument deltas"}
    model_server.script(ToolUse("memory", payload))
    stream = await gpt.chat.completions.create(
        model=GPT, messages=[{"role": "user", "content": "hi"}], tools=[OPENAI_MEMORY_TOOL], stream=True
    )
    pieces = [
        call
        async for chunk in stream
        for call in (chunk.choices[0].delta.tool_calls or [] if chunk.choices else [])
    ]
    assert pieces[0].id and pieces[0].function and pieces[0].function.name == "memory"
    arguments = "".join(piece.function.arguments or "" for piece in pieces if piece.function)
    assert len(pieces) > 2 and arguments == ToolUse("memory", payload).arguments_json()


async def test_default_reply_echoes_last_user_text_even_with_tools(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    long_text = "please summarise the whole conversation we just had, in detail"
    message = await claude.messages.create(
        model=MODEL, max_tokens=64, tools=[MEMORY_TOOL], messages=[{"role": "user", "content": long_text}]
    )
    assert message.stop_reason == "end_turn"
    assert message.content[0].text == "ok: " + long_text[:40]
    completion = await gpt.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "hey"}])
    assert completion.choices[0].message.content == "ok: hey"


async def test_responder_computes_replies_after_the_script(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic
) -> None:
    def respond(record: RequestRecord) -> ToolUse | None:
        return None if record.ends_with_tool_result else ToolUse("memory", {"echo": record.last_user_text})

    model_server.responder = respond
    model_server.script(Text("scripted first"))
    first = await claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "a"}])
    second = await claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "b"}])
    assert first.content[0].text == "scripted first"
    assert second.content[0].input == {"echo": "b"}
    assert model_server.pending == 0


async def test_truncated_text_reports_max_tokens_and_length(
    model_server: ModelServer, claude: anthropic.AsyncAnthropic, gpt: openai.AsyncOpenAI
) -> None:
    model_server.script(Text("cut", truncated=True), Text("cut", truncated=True))
    message = await claude.messages.create(model=MODEL, max_tokens=1, messages=[{"role": "user", "content": "a"}])
    completion = await gpt.chat.completions.create(model=GPT, messages=[{"role": "user", "content": "a"}])
    assert message.stop_reason == "max_tokens"
    assert completion.choices[0].finish_reason == "length"


async def test_requests_are_recorded(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    model_server.script(Text("hi"))
    await claude.messages.create(model=MODEL, max_tokens=64, messages=[{"role": "user", "content": "hello"}])
    record = model_server.last_request
    assert (record.api, record.path, record.model, record.stream) == ("anthropic", "/v1/messages", MODEL, False)
    assert record.header("Authorization") == "Bearer test"
    assert record.body["max_tokens"] == 64
    assert record.reply == Text("hi") and record.status == 200
    assert record.usage == {
        "input_tokens": record.prompt_tokens,
        "output_tokens": 1,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }
    assert model_server.requests_for("anthropic") == [record]
    assert model_server.requests_for("openai") == []


async def test_count_tokens_endpoint(model_server: ModelServer, claude: anthropic.AsyncAnthropic) -> None:
    counted = await claude.messages.count_tokens(model=MODEL, messages=[{"role": "user", "content": "hello"}])
    # {"text":"hello","type":"text"} is 30 characters -> ceil(30 / 4) = 8 tokens.
    assert counted.input_tokens == 8
    assert model_server.pending == 0


async def test_x_api_key_header_is_accepted(model_server: ModelServer) -> None:
    body = {"model": MODEL, "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]}
    async with aiohttp.ClientSession() as session:
        async with session.post(f"{model_server.base_url}/v1/messages", json=body, headers={"x-api-key": "k"}) as ok:
            assert ok.status == 200
            assert (await ok.json())["content"][0]["text"] == "ok: hi"
        async with session.post(f"{model_server.base_url}/v1/messages", json=body) as missing:
            assert missing.status == 401
            assert (await missing.json())["error"]["type"] == "authentication_error"

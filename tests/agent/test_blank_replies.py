"""A blank assistant reply kept in the history, on every provider layout, through the real SDKs.

The gateway stores an answer as the model gave it, blank or not (the user was told "(I have
nothing to add.)"). The next requests must neither send it as a whitespace-only text block
(Anthropic refuses one, and OpenRouter passes a Claude request on to Anthropic) nor let it
take one of the four cache breakpoints and then vanish from the payload.
"""

from __future__ import annotations

from typing import Any

import pytest

from agent.messages import ChatMessage, ToolCall
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.base import ModelRequest, Provider, ToolSpec
from agent.providers.openai_chat import OpenAIProvider
from tests.fakes.model_server import ModelServer, Text

BLANK = " \n\n "
TOOLS = [ToolSpec("lookup", "Look a word up.", {"type": "object", "properties": {"word": {"type": "string"}}})]
CALL = ToolCall("call_1", "lookup", '{"word": "tea"}')
HISTORY = [
    ChatMessage.user("first question"),
    ChatMessage.assistant("first answer"),
    ChatMessage.user("second question"),
    ChatMessage.assistant(BLANK, [CALL]),  # text around a tool call may be blank too
    ChatMessage.tool("call_1", "a drink", "lookup"),
    ChatMessage.assistant(BLANK),  # the blank answer
    ChatMessage.user("third question"),
]


def text_blocks(body: dict[str, Any]) -> list[Any]:
    """Every text a request sends: message contents that are text, and text blocks."""
    texts: list[Any] = []
    for message in body["messages"]:
        content = message.get("content")
        if isinstance(content, str):
            texts.append(content)
        for block in content if isinstance(content, list) else ():
            if block.get("type") == "text":
                texts.append(block.get("text"))
    return texts


def breakpoints(body: dict[str, Any]) -> list[str]:
    """What each cache breakpoint is on: the text or tool result it closes, in request order."""
    found: list[str] = []
    system = body.get("system")
    for block in system if isinstance(system, list) else ():
        if "cache_control" in block:
            found.append(block["text"])
    for message in body["messages"]:
        content = message.get("content")
        if "cache_control" in message:
            found.append(str(content))
        for block in content if isinstance(content, list) else ():
            if "cache_control" in block:
                found.append(block["name"] if block["type"] == "tool_use" else str(block.get("text", block.get("content"))))
    return found


async def send(provider: Provider, model_server: ModelServer, **fields: Any) -> dict[str, Any]:
    model_server.script(Text("ok"))
    response = await provider.complete(ModelRequest(system="You are a test.", messages=HISTORY, tools=TOOLS, **fields))
    await provider.aclose()
    assert response.message.content == "ok"  # the fake, like Anthropic, refuses a whitespace-only text block
    return model_server.last_request.body


async def test_anthropic_keeps_four_breakpoints_and_sends_no_blank_text(model_server: ModelServer) -> None:
    provider = AnthropicProvider(api_key="test", base_url=model_server.base_url)
    body = await send(provider, model_server, model="claude-sonnet-4-6", cache_ttl="5m")
    assert all(str(text).strip() for text in text_blocks(body))
    # The breakpoint the blank answer would have taken moves to the message before it.
    assert breakpoints(body) == ["You are a test.", "lookup", "a drink", "third question"]


@pytest.mark.parametrize("model", ["gpt-5", "anthropic/claude-sonnet-4.6"])
async def test_openai_layouts_send_no_blank_text(model_server: ModelServer, model: str) -> None:
    """Plain Chat Completions, and the OpenRouter layout for Claude (breakpoints on OpenAI-style messages)."""
    provider = OpenAIProvider(api_key="test", base_url=model_server.base_url + "/v1")
    openrouter = model.startswith("anthropic/")
    fields = {"cache_ttl": "5m", "cache_native": False} if openrouter else {}
    body = await send(provider, model_server, model=model, **fields)
    assert all(str(text).strip() for text in text_blocks(body))
    assistants = [m for m in body["messages"] if m["role"] == "assistant"]
    assert [(m["content"], bool(m.get("tool_calls"))) for m in assistants] == [("first answer", False), (None, True)]
    if openrouter:  # a tool call without text has no content block to carry one: the user's question does
        assert breakpoints(body) == ["You are a test.", "second question", "a drink", "third question"]

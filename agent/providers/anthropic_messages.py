"""Claude through the Anthropic Messages API (``anthropic.AsyncAnthropic``).

The chat-completions dicts (with any cache breakpoints already placed) are
translated here: the system message becomes system content blocks, a user
message's pictures and PDFs ``image`` and ``document`` blocks before its text,
assistant tool calls become ``tool_use`` blocks, tool results become ``tool_result``
blocks inside a user turn (a tool's pictures as ``image`` blocks inside the result, a failed
call's result with ``is_error: true``), and consecutive same-role turns are merged, as the
Messages API requires. A breakpoint on a message as a whole moves onto that
message's last block.

A streamed answer counts once its stop reason arrived; a stream that ends before
that (dropped, closed early, or broken by an event that cannot be read) is a
failed call, retried like a 5xx, carrying the usage ``message_start`` reported.
While it streams, the text blocks' text so far goes to ``on_text`` (thinking and
tool-call input never do); a call that does not stream shows nothing.
"""

from __future__ import annotations

import json
from typing import Any

import anthropic

from agent.caching import visible_text
from agent.messages import ChatMessage, ToolCall
from agent.providers.base import ModelRequest, ModelResponse, Provider, chat_dicts
from agent.providers.errors import READ_FAILURES, failed_call
from agent.providers.text_feed import TextFeed, TextListener
from agent.usage import Usage


class AnthropicProvider(Provider):
    name = "anthropic"

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout: float = 120.0,
        stream: bool = True,
    ) -> None:
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key or "not-set", base_url=base_url, timeout=timeout, max_retries=0
        )
        self._stream = stream

    async def complete(self, request: ModelRequest, *, on_text: TextListener | None = None) -> ModelResponse:
        params = to_anthropic(request)
        if self._stream:
            return await self._streamed(params, request.model, TextFeed.of(on_text))
        try:
            message = await self._client.messages.create(**params)
        except (anthropic.APIError, *READ_FAILURES) as error:
            raise failed_call(error, sdk=anthropic, provider=self.name, model=request.model, started=False) from error
        return from_anthropic(message, request.model)

    async def _streamed(self, params: dict[str, Any], model: str, feed: TextFeed) -> ModelResponse:
        """The streamed answer, once its end (``message_delta`` with the stop reason) has arrived.

        A connection lost after that loses nothing (only ``message_stop`` was still to come). Lost
        before it, cut off cleanly, or broken by an unreadable event, the call failed, and what
        ``message_start`` and any ``message_delta`` reported as used goes with the error.
        ``feed`` hears the text so far after each text delta (every text block's, joined as
        :func:`from_anthropic` joins them).
        """
        stream: Any = None
        failure: Exception | None = None
        written = ""
        try:
            async with self._client.messages.stream(**params) as stream:
                async for event in stream:
                    if event.type == "text":
                        written += event.text
                        feed(written)
        except (anthropic.APIError, *READ_FAILURES) as error:
            failure = error
        message = _snapshot(stream)
        if message is not None and message.stop_reason is not None:
            return from_anthropic(message, model)
        billed = _usage(message.usage) if message is not None else Usage()
        error = failed_call(failure, sdk=anthropic, provider=self.name, model=model, started=message is not None, billed=billed)
        raise error from failure

    async def aclose(self) -> None:
        await self._client.close()


def to_anthropic(request: ModelRequest) -> dict[str, Any]:
    """The keyword arguments for ``messages.create`` / ``messages.stream``."""
    dicts = chat_dicts(request, style="anthropic")
    params: dict[str, Any] = {"model": request.model, "max_tokens": request.max_tokens}
    if dicts and dicts[0]["role"] == "system":
        params["system"] = _blocks(dicts.pop(0))
    params["messages"] = _turns(dicts)
    if request.tools:
        params["tools"] = [
            {"name": tool.name, "description": tool.description, "input_schema": tool.parameters}
            for tool in request.tools
        ]
        if request.tools_off:
            params["tool_choice"] = {"type": "none"}
    return params


def _turns(dicts: list[dict[str, Any]]) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = []
    for message in dicts:
        role = "assistant" if message["role"] == "assistant" else "user"
        blocks = _blocks(message)
        if not blocks:
            continue
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"].extend(blocks)
        else:
            turns.append({"role": role, "content": blocks})
    return turns


def _blocks(message: dict[str, Any]) -> list[dict[str, Any]]:
    """One message's content blocks; a message-level breakpoint lands on the last block."""
    role = message["role"]
    if role == "tool":
        blocks = [_tool_result(message)]
    else:
        blocks = _text_blocks(message.get("content"))
        for call in message.get("tool_calls") or ():
            function = call["function"]
            blocks.append({"type": "tool_use", "id": call["id"], "name": function["name"], "input": _arguments(function["arguments"])})
    if "cache_control" in message and blocks:
        blocks[-1]["cache_control"] = message["cache_control"]
    return blocks


def _tool_result(message: dict[str, Any]) -> dict[str, Any]:
    """A tool message as a ``tool_result`` block: its text, or its text and pictures as blocks."""
    content = message["content"]
    if isinstance(content, list) and any(block.get("type") != "text" for block in content):
        inner: list[dict[str, Any]] | str = _text_blocks(content)
    elif isinstance(content, list):  # text and the lines standing for pictures the model does not get
        inner = "\n\n".join(block.get("text", "") for block in content) or "(no output)"
    else:
        inner = content or "(no output)"
    block: dict[str, Any] = {"type": "tool_result", "tool_use_id": message["tool_call_id"], "content": inner}
    if message.get("is_error"):
        block["is_error"] = True
    return block


def _text_blocks(content: Any) -> list[dict[str, Any]]:
    if isinstance(content, list):
        return [dict(block) for block in content if block.get("type") != "text" or visible_text(block.get("text"))]
    # The API refuses a text block of nothing but whitespace (a blank answer stored earlier, say).
    return [{"type": "text", "text": content}] if visible_text(content) else []


def _arguments(raw: str) -> dict[str, Any]:
    try:
        value = json.loads(raw or "{}")
    except ValueError:
        return {"_unparsed_arguments": raw}
    return value if isinstance(value, dict) else {"value": value}


def from_anthropic(message: Any, model: str) -> ModelResponse:
    texts: list[str] = []
    calls: list[ToolCall] = []
    for block in message.content:
        if block.type == "text":
            texts.append(block.text)
        elif block.type == "tool_use":
            calls.append(ToolCall(id=block.id, name=block.name, arguments=json.dumps(block.input, ensure_ascii=False)))
    return ModelResponse(
        message=ChatMessage.assistant("".join(texts), calls),
        usage=_usage(message.usage),
        stop_reason=message.stop_reason or "end_turn",
        model=getattr(message, "model", None) or model,
    )


def _usage(usage: Any) -> Usage:
    return Usage(
        input_tokens=getattr(usage, "input_tokens", 0) or 0,
        output_tokens=getattr(usage, "output_tokens", 0) or 0,
        cache_read_tokens=getattr(usage, "cache_read_input_tokens", 0) or 0,
        cache_write_tokens=getattr(usage, "cache_creation_input_tokens", 0) or 0,
    )


def _snapshot(stream: Any) -> Any:
    """The message a stream has assembled so far; None before its ``message_start``."""
    if stream is None:
        return None
    try:
        return stream.current_message_snapshot
    except AssertionError:  # the SDK's way of saying that nothing has started
        return None

"""Chat Completions through ``openai.AsyncOpenAI``: OpenAI itself and every compatible
server (OpenRouter, vLLM, Ollama, LM Studio) reached through ``base_url``.

A user message's pictures go as ``image_url`` parts holding ``data:`` URLs, its PDFs
and text files as their text (``agent/providers/media_blocks.py``).
Streaming responses are reassembled here, tool-call argument fragments
included; usage comes from the final chunk (``stream_options.include_usage``).
A stream counts as answered once a ``finish_reason`` arrived: one that ends
before that (dropped, closed early, or broken by a chunk that cannot be read)
is a failed call, retried like a 5xx. While it streams, the answer's text so far
(``delta.content``, never tool-call arguments or reasoning) goes to ``on_text``;
a call that does not stream shows nothing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import openai

from agent.messages import ChatMessage, ToolCall
from agent.providers.base import ModelRequest, ModelResponse, Provider, chat_dicts
from agent.providers.errors import READ_FAILURES, failed_call
from agent.providers.text_feed import TextFeed, TextListener
from agent.usage import Usage

# Models that take max_completion_tokens instead of max_tokens.
_COMPLETION_TOKENS_PREFIXES = ("gpt-5", "gpt-4.1", "o1", "o3", "o4")


class OpenAIProvider(Provider):
    name = "openai"

    def __init__(
        self,
        *,
        api_key: str | None,
        base_url: str | None = None,
        timeout: float = 120.0,
        stream: bool = True,
    ) -> None:
        self._client = openai.AsyncOpenAI(
            api_key=api_key or "not-needed", base_url=base_url, timeout=timeout, max_retries=0
        )
        self._stream = stream

    async def complete(self, request: ModelRequest, *, on_text: TextListener | None = None) -> ModelResponse:
        params = to_openai(request)
        if self._stream:
            return await self._streamed(params, request.model, TextFeed.of(on_text))
        try:
            completion = await self._client.chat.completions.create(**params)
        except (openai.APIError, *READ_FAILURES) as error:
            raise failed_call(error, sdk=openai, provider=self.name, model=request.model, started=False) from error
        return from_openai(completion, request.model)

    async def _streamed(self, params: dict[str, Any], model: str, feed: TextFeed) -> ModelResponse:
        """The streamed answer, once its end (a ``finish_reason``) has arrived.

        A connection lost after that loses at most the usage chunk and ``[DONE]``. Lost before it,
        cut off cleanly, or broken by an unreadable chunk, the call failed, and usage reported by
        any chunk so far goes with the error. ``feed`` hears the text so far after each chunk.
        """
        assembled = _Assembly()
        failure: Exception | None = None
        try:
            stream = await self._client.chat.completions.create(**params, stream=True, stream_options={"include_usage": True})
            async for chunk in stream:
                if assembled.add(chunk):
                    feed(assembled.text)
        except (openai.APIError, *READ_FAILURES) as error:
            failure = error
        if assembled.finish_reason is not None:
            return assembled.response(model)
        error = failed_call(
            failure, sdk=openai, provider=self.name, model=model, started=assembled.started, billed=assembled.usage
        )
        raise error from failure

    async def aclose(self) -> None:
        await self._client.close()


def to_openai(request: ModelRequest) -> dict[str, Any]:
    messages = chat_dicts(request)
    for message in messages:
        if message["role"] == "assistant" and message.get("tool_calls") and not message.get("content"):
            message["content"] = None
    params: dict[str, Any] = {"model": request.model, "messages": messages}
    bare_model = request.model.lower().rsplit("/", 1)[-1]
    limit_key = "max_completion_tokens" if bare_model.startswith(_COMPLETION_TOKENS_PREFIXES) else "max_tokens"
    params[limit_key] = request.max_tokens
    if request.tools:
        params["tools"] = [
            {"type": "function", "function": {"name": t.name, "description": t.description, "parameters": t.parameters}}
            for t in request.tools
        ]
        if request.tools_off:
            params["tool_choice"] = "none"
    return params


def normalize_usage(usage: Any) -> Usage:
    """Split OpenAI's prompt_tokens into uncached, cache-read and (where reported) cache-written parts."""
    if usage is None:
        return Usage()
    prompt = getattr(usage, "prompt_tokens", 0) or 0
    details = getattr(usage, "prompt_tokens_details", None)
    cached = (getattr(details, "cached_tokens", 0) or 0) if details is not None else 0
    written = getattr(usage, "cache_creation_input_tokens", 0) or 0
    return Usage(
        input_tokens=max(0, prompt - cached - written),
        output_tokens=getattr(usage, "completion_tokens", 0) or 0,
        cache_read_tokens=cached,
        cache_write_tokens=written,
    )


def from_openai(completion: Any, model: str) -> ModelResponse:
    choice = completion.choices[0]
    calls = [
        ToolCall(id=call.id, name=call.function.name, arguments=call.function.arguments or "{}")
        for call in choice.message.tool_calls or ()
    ]
    return ModelResponse(
        message=ChatMessage.assistant(choice.message.content or "", calls),
        usage=normalize_usage(completion.usage),
        stop_reason=choice.finish_reason or "stop",
        model=completion.model or model,
    )


@dataclass
class _PartialCall:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Assembly:
    """Accumulates streamed chunks into one response."""

    text: str = ""
    calls: dict[int, _PartialCall] = field(default_factory=dict)
    finish_reason: str | None = None
    """None until the answer's end arrived."""
    usage: Usage = field(default_factory=Usage)
    model: str = ""
    started: bool = False

    def add(self, chunk: Any) -> bool:
        """Take in one chunk; True when it added to the answer's text."""
        grew = False
        self.started = True
        self.model = chunk.model or self.model
        if chunk.usage is not None:
            self.usage = normalize_usage(chunk.usage)
        for choice in chunk.choices or ():
            delta = choice.delta
            if delta.content:
                self.text += delta.content
                grew = True
            for part in delta.tool_calls or ():
                call = self.calls.setdefault(part.index, _PartialCall())
                call.id = part.id or call.id
                if part.function is not None:
                    call.name = part.function.name or call.name
                    call.arguments.append(part.function.arguments or "")
            if choice.finish_reason:
                self.finish_reason = choice.finish_reason
        return grew

    def response(self, model: str) -> ModelResponse:
        calls = [
            ToolCall(id=c.id, name=c.name, arguments="".join(c.arguments) or "{}")
            for _, c in sorted(self.calls.items())
        ]
        return ModelResponse(
            message=ChatMessage.assistant(self.text, calls),
            usage=self.usage,
            stop_reason=self.finish_reason or "stop",
            model=self.model or model,
        )

"""Errors reported inside a stream that had already started, through the real SDKs.

Anthropic sends ``event: error`` after ``message_start`` (its stream was answered
with HTTP 200); OpenAI-compatible routers send a ``data: {"error": ...}`` chunk.
Neither carries a useful status, so the kind comes from the error body: an
overloaded or failing upstream is retried and falls back like a 529 or a 500.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from aiohttp import web

from agent.errors import ErrorKind, ProviderError
from agent.messages import ChatMessage
from agent.providers.anthropic_messages import AnthropicProvider
from agent.providers.base import ModelRequest
from agent.providers.openai_chat import OpenAIProvider


class FailingStreams:
    """A local server whose streams start, then report ``error`` as their next event."""

    def __init__(self) -> None:
        self.error: dict[str, Any] = {}
        self.url = ""
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/v1/messages", self._anthropic)
        app.router.add_post("/v1/chat/completions", self._openai)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = site._server.sockets[0].getsockname()[:2]  # type: ignore[union-attr]
        self.url = f"http://{host}:{port}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()

    async def _stream(self, request: web.Request, events: list[str]) -> web.StreamResponse:
        response = web.StreamResponse(headers={"content-type": "text/event-stream"})
        await response.prepare(request)
        for event in events:
            await response.write(event.encode())
        await response.write_eof()
        return response

    async def _anthropic(self, request: web.Request) -> web.StreamResponse:
        started = {"type": "message_start", "message": {
            "id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6", "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}}  # fmt: skip
        failed = {"type": "error", "error": self.error}
        return await self._stream(request, [f"event: message_start\ndata: {json.dumps(started)}\n\n",
                                            f"event: error\ndata: {json.dumps(failed)}\n\n"])  # fmt: skip

    async def _openai(self, request: web.Request) -> web.StreamResponse:
        chunk = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-5",
                 "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}
        return await self._stream(request, [f"data: {json.dumps(chunk)}\n\n", f"data: {json.dumps({'error': self.error})}\n\n"])


@pytest_asyncio.fixture
async def streams() -> AsyncIterator[FailingStreams]:
    server = FailingStreams()
    await server.start()
    yield server
    await server.stop()


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"type": "overloaded_error", "message": "Overloaded"}, ErrorKind.OVERLOADED),
        ({"type": "api_error", "message": "Internal server error"}, ErrorKind.SERVER),
        ({"type": "rate_limit_error", "message": "Slow down"}, ErrorKind.RATE_LIMIT),
        ({"type": "invalid_request_error", "message": "input length and `max_tokens` exceed context limit: 1 > 0"},
         ErrorKind.CONTEXT_LENGTH),
    ],
)  # fmt: skip
async def test_anthropic_error_event_mid_stream(streams: FailingStreams, error: dict[str, Any], kind: ErrorKind) -> None:
    streams.error = error
    provider = AnthropicProvider(api_key="test", base_url=streams.url, stream=True, timeout=10)
    request = ModelRequest(model="claude-sonnet-4-6", system="s", messages=[ChatMessage.user("hi")])
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    await provider.aclose()
    assert caught.value.kind is kind


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ({"message": "Provider returned error", "code": 502}, ErrorKind.SERVER),
        ({"message": "Rate limit exceeded", "code": 429}, ErrorKind.RATE_LIMIT),
        ({"message": "something odd"}, ErrorKind.SERVER),
    ],
)
async def test_openai_compatible_error_chunk_mid_stream(streams: FailingStreams, error: dict[str, Any], kind: ErrorKind) -> None:
    streams.error = error
    provider = OpenAIProvider(api_key="test", base_url=streams.url + "/v1", stream=True, timeout=10)
    request = ModelRequest(model="gpt-5", system="s", messages=[ChatMessage.user("hi")])
    with pytest.raises(ProviderError) as caught:
        await provider.complete(request)
    await provider.aclose()
    assert caught.value.kind is kind

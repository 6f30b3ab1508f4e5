"""A bare local server for hand-written answer streams the fake model server does not script.

Some tests need events no scripted reply produces (an ``error`` event inside a started stream, a
thinking block, reasoning deltas). :class:`StubServer` serves both APIs' completion paths with the
test's own handlers, and :func:`send_events` writes their SSE events the way the fake model server
writes its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from aiohttp import web

from .wire import dumps, sse_text

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class StubServer:
    """Serves ``anthropic`` at ``/v1/messages`` and ``openai`` at ``/v1/chat/completions`` on an
    ephemeral local port (``url``; append ``/v1`` for the OpenAI client)."""

    def __init__(self, *, anthropic: Handler, openai: Handler) -> None:
        self.url = ""
        self._routes = {"/v1/messages": anthropic, "/v1/chat/completions": openai}
        self._runner: web.AppRunner | None = None

    async def start(self) -> None:
        app = web.Application()
        for path, handler in self._routes.items():
            app.router.add_post(path, handler)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.url = f"http://127.0.0.1:{self._runner.addresses[0][1]}"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> StubServer:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()


async def send_events(request: web.Request, events: Iterable[tuple[str | None, Any]]) -> web.StreamResponse:
    """Answer ``request`` with ``(event name or None, data)`` pairs as a complete SSE body."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    for name, data in events:
        await response.write(sse_text(name, dumps(data)))
    await response.write_eof()
    return response


def message_start(model: str) -> tuple[str, dict[str, Any]]:
    """Anthropic's first event of an answer to 5 prompt tokens, as a ``(name, data)`` pair."""
    message = {"id": "msg_stub", "type": "message", "role": "assistant", "model": model, "content": [],
               "stop_reason": None, "stop_sequence": None, "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip
    return "message_start", {"type": "message_start", "message": message}


def chat_chunk(model: str, delta: dict[str, Any], finish: str | None = None) -> tuple[None, dict[str, Any]]:
    """One Chat Completions stream chunk carrying ``delta``, as a ``(None, data)`` pair."""
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return None, {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": 1, "model": model, "choices": [choice]}

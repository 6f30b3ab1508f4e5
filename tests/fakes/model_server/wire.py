"""Small aiohttp helpers shared by both API dialects."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from aiohttp import web


def json_response(body: Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON response with the given status and extra headers."""
    return web.json_response(dict(body), status=status, headers=dict(headers or {}))


async def send_sse(
    request: web.Request,
    events: Iterable[tuple[str | None, str]],
    headers: Mapping[str, str] | None = None,
) -> web.StreamResponse:
    """Stream ``(event name or None, data text)`` pairs as Server-Sent Events."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    response.headers.update(dict(headers or {}))
    await response.prepare(request)
    for event, data in events:
        prefix = f"event: {event}\n" if event else ""
        await response.write(f"{prefix}data: {data}\n\n".encode())
    await response.write_eof()
    return response


def dumps(value: Any) -> str:
    """Compact JSON text for an SSE ``data:`` line."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

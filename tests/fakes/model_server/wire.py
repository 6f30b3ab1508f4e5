"""Small aiohttp helpers shared by both API dialects."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any, NamedTuple

from aiohttp import web

from .replies import CutStream, MalformedEvent, StreamFault


def json_response(body: Mapping[str, Any], status: int = 200, headers: Mapping[str, str] | None = None) -> web.Response:
    """A JSON response with the given status and extra headers."""
    return web.json_response(dict(body), status=status, headers=dict(headers or {}))


Sleep = Callable[[float], Awaitable[None]]


class SseEvent(NamedTuple):
    """One Server-Sent Event: its name (None: a bare ``data:`` line), its data text, and how long to
    wait before sending it (a paced text delta; 0 for everything else)."""

    name: str | None
    data: str
    wait: float = 0.0


async def send_sse(
    request: web.Request,
    events: Iterable[SseEvent],
    headers: Mapping[str, str] | None = None,
    fault: StreamFault | None = None,
    sleep: Sleep = asyncio.sleep,
) -> web.StreamResponse:
    """Stream ``events`` as Server-Sent Events, each after its wait, broken as ``fault`` says."""
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    response.headers.update(dict(headers or {}))
    await response.prepare(request)
    pairs = list(events)
    at = 0 if fault is None else fault.after if fault.after >= 0 else max(0, len(pairs) + fault.after)
    for index, (event, data, wait) in enumerate(pairs):
        if wait > 0:
            await sleep(wait)
        if fault is not None and index == at:
            if isinstance(fault, CutStream):
                return await end_early(request, response, fault)
            await response.write(sse_text(event, fault.data))
        await response.write(sse_text(event, data))
    if isinstance(fault, CutStream):  # cut after the last event: the body's end never comes
        return await end_early(request, response, fault)
    if isinstance(fault, MalformedEvent) and at >= len(pairs):
        await response.write(sse_text(None, fault.data))
    await response.write_eof()
    return response


def sse_text(event: str | None, data: str) -> bytes:
    """One Server-Sent Event on the wire."""
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {data}\n\n".encode()


async def send_broken_json(
    request: web.Request, body: Mapping[str, Any], headers: Mapping[str, str], fault: StreamFault
) -> web.StreamResponse:
    """A non-streamed reply broken as ``fault`` says: half the body then a drop, or text that is not JSON."""
    data = (fault.data if isinstance(fault, MalformedEvent) else dumps(body)).encode()
    response = web.StreamResponse(headers={**headers, "Content-Type": "application/json"})
    if isinstance(fault, CutStream):
        if fault.abrupt:
            response.content_length = len(data)  # the whole body is promised, half of it comes
        await response.prepare(request)
        await response.write(data[: len(data) // 2])
        return await end_early(request, response, fault)
    await response.prepare(request)
    await response.write(data)
    await response.write_eof()
    return response


async def end_early(request: web.Request, response: web.StreamResponse, fault: CutStream) -> web.StreamResponse:
    """End a response that is not finished: drop the socket under it (the client sees an incomplete
    body), or, for a cut that is not ``abrupt``, end the body as if it were complete."""
    if not fault.abrupt:
        await response.write_eof()
    elif request.transport is not None:
        request.transport.close()
    return response


def dumps(value: Any) -> str:
    """Compact JSON text for an SSE ``data:`` line."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)

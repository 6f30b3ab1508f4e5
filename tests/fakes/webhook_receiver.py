"""A receiver of alert webhooks: a real HTTP server on 127.0.0.1 that records every POST.

It can be told to fail the next posts (``fail_next(n, status)``): those are answered with that status
and recorded as attempts, not as alerts received. :attr:`WebhookReceiver.alerts` holds the JSON bodies
it accepted (2xx), :attr:`WebhookReceiver.attempts` every request, failed ones included.
"""

from __future__ import annotations

import asyncio
import json
from dataclasses import dataclass
from typing import Any

from aiohttp import web


@dataclass(frozen=True, slots=True)
class Post:
    path: str
    headers: dict[str, str]
    body: str
    status: int

    @property
    def json(self) -> dict[str, Any]:
        return json.loads(self.body)


class WebhookReceiver:
    def __init__(self) -> None:
        self.attempts: list[Post] = []
        self.port = 0
        self._failing: list[int] = []
        self._changed = asyncio.Condition()
        self._runner: web.AppRunner | None = None

    def url(self, path: str = "/alerts/T0KEN-in-the-path") -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def fail_next(self, count: int, status: int = 503) -> None:
        """Answer the next ``count`` posts with ``status`` instead of 200."""
        self._failing.extend([status] * count)

    @property
    def alerts(self) -> list[dict[str, Any]]:
        """The bodies of the posts answered 2xx, in order."""
        return [post.json for post in self.attempts if post.status < 300]

    async def wait_alerts(self, count: int, *, timeout: float = 60.0) -> list[dict[str, Any]]:
        """Wait until ``count`` posts were accepted (the timeout only stops a hang)."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: len(self.alerts) >= count), timeout)
        return self.alerts

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/{tail:.*}", self._receive)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _receive(self, request: web.Request) -> web.Response:
        status = self._failing.pop(0) if self._failing else 200
        self.attempts.append(Post(request.path, dict(request.headers), await request.text(), status))
        async with self._changed:
            self._changed.notify_all()
        return web.json_response({"ok": status < 300}, status=status)

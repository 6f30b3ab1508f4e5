"""The HTTP health endpoint: ``GET /health`` answers with the gateway's state as JSON.

200 while every started adapter runs and the database answers; 503 otherwise,
so Docker's HEALTHCHECK and load balancers can act on it.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

log = structlog.get_logger("gateway.health")

Snapshot = Callable[[], Awaitable[dict[str, Any]]]


class HealthServer:
    """A tiny aiohttp server; ``snapshot`` builds the JSON body on every request."""

    def __init__(self, snapshot: Snapshot, host: str, port: int) -> None:
        self._snapshot = snapshot
        self._host = host
        self._port = port
        self._runner: web.AppRunner | None = None
        self.url: str | None = None

    async def start(self) -> str:
        app = web.Application()
        app.router.add_get("/health", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}/health"
        log.info("health.listening", url=self.url)
        return self.url

    async def _handle(self, _: web.Request) -> web.Response:
        body = await self._snapshot()
        status = 200 if body.get("status") == "ok" else 503
        return web.Response(status=status, text=json.dumps(body), content_type="application/json")

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

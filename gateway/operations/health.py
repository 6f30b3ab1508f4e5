"""The HTTP endpoints for operators: ``GET /health`` (JSON) and ``GET /metrics`` (Prometheus).

/health answers 200 while every started adapter runs and the database
answers, 503 otherwise, so Docker's HEALTHCHECK and load balancers can act on it.
Both bodies are masked by the process-wide redactor on the way out: an adapter's
detail may quote an error that quotes a request URL, and a URL may hold a bot token.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiohttp import web

from adapters.http_listener import HttpListener, ListenerLimits
from gateway.operations.metrics import CONTENT_TYPE, Metrics
from gateway.operations.redaction import redact_values, redactor

log = structlog.get_logger("gateway.health")

Snapshot = Callable[[], Awaitable[dict[str, Any]]]


class HealthServer:
    """A tiny aiohttp server; ``snapshot`` builds the JSON body on every request."""

    def __init__(self, snapshot: Snapshot, host: str, port: int, *, metrics: Metrics | None = None,
                 limits: ListenerLimits = ListenerLimits()) -> None:  # fmt: skip
        self._snapshot = snapshot
        self._metrics = metrics
        self._host = host
        self._port = port
        self._limits = limits
        self._listener: HttpListener | None = None
        self.url: str | None = None

    async def start(self) -> str:
        """Listen; raises :class:`~adapters.http_listener.ListenError` (naming ``health.port``) when it cannot."""
        app = web.Application()
        app.router.add_get("/health", self._handle)
        if self._metrics is not None:
            app.router.add_get("/metrics", self._metrics_page)
        self._listener = HttpListener(app, name="health", host=self._host, port=self._port, setting="health.port",
                                      limits=self._limits)
        host, port = await self._listener.start()
        self.url = f"http://{host}:{port}/health"
        log.info("health.listening", url=self.url)
        return self.url

    async def _handle(self, _: web.Request) -> web.Response:
        body = redact_values(await self._snapshot())
        status = 200 if body.get("status") == "ok" else 503
        return web.Response(status=status, text=json.dumps(body), content_type="application/json")

    async def _metrics_page(self, _: web.Request) -> web.Response:
        assert self._metrics is not None
        page = redactor(self._metrics.render().decode())
        return web.Response(body=page.encode(), headers={"Content-Type": CONTENT_TYPE})

    async def stop(self) -> None:
        if self._listener is not None:
            await self._listener.stop()
            self._listener = None

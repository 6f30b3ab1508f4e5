"""The frame of an HTTP proxy on 127.0.0.1: every request, whatever its method and path, goes to
:meth:`CatchAllProxy._forward` through one client session of its own (``bench.stream``'s recording
proxy, the cluster tests' round-robin balancer)."""

from __future__ import annotations

import aiohttp
from aiohttp import web

HOP_BY_HOP = {"host", "content-length", "transfer-encoding", "connection", "content-encoding", "keep-alive"}
"""Headers that describe one connection, never passed on."""


class CatchAllProxy:
    def __init__(self) -> None:
        self.port = 0
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self) -> aiohttp.ClientSession:
        """The session requests are passed on with (made at :meth:`start`)."""
        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None), auto_decompress=True)

    async def start(self) -> None:
        self._session = self.client()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self.port = int(self._runner.addresses[0][1])

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    @property
    def session(self) -> aiohttp.ClientSession:
        assert self._session is not None, "the proxy is not started"
        return self._session

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        raise NotImplementedError

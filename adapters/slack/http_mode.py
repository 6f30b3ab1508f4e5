"""HTTP mode: Slack's Events API posts signed requests to an aiohttp endpoint we serve.

Bolt checks every request's signature and rejects one older than five minutes
(401); ``url_verification`` challenges are answered by Bolt too.
"""

from __future__ import annotations

import structlog
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

from adapters.base import AdapterError
from adapters.http_listener import HttpListener, ListenerLimits

log = structlog.get_logger(__name__)


class HttpReceiver:
    def __init__(self, app: AsyncApp, *, host: str, port: int, path: str,
                 limits: ListenerLimits = ListenerLimits()) -> None:  # fmt: skip
        self._app = app
        self._host = host
        self._port = port
        self._path = path
        self._limits = limits
        self._listener: HttpListener | None = None
        self.url: str | None = None
        """Where the endpoint listens, with the real port (useful when the config says port 0)."""

    async def start(self) -> None:
        web_app = web.Application()
        web_app.router.add_post(self._path, self._handle)
        listener = HttpListener(web_app, name="slack events", host=self._host, port=self._port, limits=self._limits)
        try:
            await listener.start()
        except OSError as error:
            raise AdapterError(
                f"cannot listen for Slack events on {self._host}:{self._port} ({error}); "
                "choose another platforms.slack.http_listen.port or stop what uses it"
            ) from error
        self._listener = listener
        host, port = listener.address or (self._host, self._port)
        self.url = f"http://{host}:{port}{self._path}"
        log.info("slack.http.listening", url=self.url)

    async def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.stop()

    async def _handle(self, request: web.Request) -> web.Response:
        bolt_request = await to_bolt_request(request)
        bolt_response = await self._app.async_dispatch(bolt_request)
        if bolt_response.status == 401:
            log.warning("slack.http.rejected", reason="bad signature or stale timestamp",
                        hint="check platforms.slack.signing_secret and the host clock", remote=request.remote)  # fmt: skip
        return await to_aiohttp_response(bolt_response)

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

log = structlog.get_logger(__name__)


class HttpReceiver:
    def __init__(self, app: AsyncApp, *, host: str, port: int, path: str) -> None:
        self._app = app
        self._host = host
        self._port = port
        self._path = path
        self._runner: web.AppRunner | None = None
        self.url: str | None = None
        """Where the endpoint listens, with the real port (useful when the config says port 0)."""

    async def start(self) -> None:
        web_app = web.Application()
        web_app.router.add_post(self._path, self._handle)
        runner = web.AppRunner(web_app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(runner, self._host, self._port).start()
        except OSError as error:
            await runner.cleanup()
            raise AdapterError(
                f"cannot listen for Slack events on {self._host}:{self._port} ({error}); "
                "choose another platforms.slack.http_listen.port or stop what uses it"
            ) from error
        self._runner = runner
        host, port = runner.addresses[0][:2]
        self.url = f"http://{host}:{port}{self._path}"
        log.info("slack.http.listening", url=self.url)

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def _handle(self, request: web.Request) -> web.Response:
        bolt_request = await to_bolt_request(request)
        bolt_response = await self._app.async_dispatch(bolt_request)
        if bolt_response.status == 401:
            log.warning("slack.http.rejected", reason="bad signature or stale timestamp",
                        hint="check platforms.slack.signing_secret and the host clock", remote=request.remote)  # fmt: skip
        return await to_aiohttp_response(bolt_response)

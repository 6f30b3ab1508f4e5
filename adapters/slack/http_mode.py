"""HTTP mode: Slack's Events API posts signed requests to an aiohttp endpoint we serve.

Every request's signature is checked, and one older than five minutes is
rejected (401), before its body is parsed; a signed body that is not a Slack
payload gets 400, marked not to be retried (see :mod:`adapters.slack.http_body`). Bolt checks the
signature again and answers ``url_verification`` challenges.
"""

from __future__ import annotations

import structlog
from aiohttp import web
from slack_bolt.adapter.aiohttp import to_aiohttp_response, to_bolt_request
from slack_bolt.async_app import AsyncApp

from adapters.http_listener import HttpListener, ListenerLimits
from adapters.slack import http_body

log = structlog.get_logger(__name__)

NO_RETRY = {"X-Slack-No-Retry": "1"}
"""Slack sends a request again after any answer but a 2xx, unless the answer says not to."""


class HttpReceiver:
    def __init__(self, app: AsyncApp, *, signing_secret: str, host: str, port: int, path: str,
                 limits: ListenerLimits = ListenerLimits()) -> None:  # fmt: skip
        self._app = app
        self._signing_secret = signing_secret
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
        listener = HttpListener(web_app, name="slack events", host=self._host, port=self._port, limits=self._limits,
                                setting="platforms.slack.http_listen.port")  # fmt: skip
        host, port = await listener.start()  # ListenError names the setting: the gateway stops (status 2)
        self._listener = listener
        self.url = f"http://{host}:{port}{self._path}"
        log.info("slack.http.listening", url=self.url)

    async def stop(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            await listener.stop()

    async def _handle(self, request: web.Request) -> web.Response:
        body = await request.read()
        if not http_body.signed(self._signing_secret, body, request.headers):
            log.warning("slack.http.rejected", reason="bad signature or stale timestamp",
                        hint="check platforms.slack.signing_secret and the host clock", remote=request.remote)  # fmt: skip
            return web.Response(status=401, text="invalid request signature")
        problem = http_body.problem(body, request.content_type)
        if problem is not None:
            log.warning("slack.http.rejected", reason=f"malformed body: {problem}", remote=request.remote)
            return web.Response(status=400, text=f"malformed request: {problem}", headers=NO_RETRY)
        try:
            bolt_request = await to_bolt_request(request)
        except Exception as error:  # noqa: BLE001 - Bolt reads ids out of the body before any listener runs
            log.warning("slack.http.rejected", reason=f"malformed body: Bolt cannot read it ({type(error).__name__})",
                        remote=request.remote)  # fmt: skip
            return web.Response(status=400, text="malformed request: a field has an unexpected type", headers=NO_RETRY)
        return await to_aiohttp_response(await self._app.async_dispatch(bolt_request))

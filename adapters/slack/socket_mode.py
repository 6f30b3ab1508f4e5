"""Socket Mode: the app opens a WebSocket to Slack (``apps.connections.open``) and acks events on it.

slack-sdk's client reconnects by itself; :meth:`SocketReceiver.connected`
tells /health whether a session is up right now.

An envelope whose payload slack-bolt itself cannot read (an ``event`` that is
no object, a ``type`` or ``team_id`` of the wrong kind: Bolt builds its context
from them before any listener runs, and fails; checked first with the HTTP
endpoint's :func:`~adapters.slack.http_body.payload_problem`) is acknowledged and logged as
``slack.event.rejected``: Slack would send it again and again, and it would
fail the same way each time. Anything a listener answers stays as Bolt decides
(no ack while intake is stopped or failed, so Slack delivers it again).
"""

from __future__ import annotations

import asyncio
import time
from typing import Final

import structlog
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.adapter.socket_mode.async_internals import run_async_bolt_app, send_async_response
from slack_bolt.async_app import AsyncApp
from slack_sdk.socket_mode.aiohttp import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import AdapterError, log_rejected
from adapters.slack.http_body import payload_problem
from adapters.slack.sending import startup_error

log = structlog.get_logger(__name__)

CONNECT_WAIT: Final = 15.0
"""Seconds start() waits for the first WebSocket session before reporting the adapter degraded."""


class _Handler(AsyncSocketModeHandler):
    """Bolt's Socket Mode handler, acknowledging what Bolt cannot read instead of leaving it to come back."""

    async def handle(self, client: SocketModeClient, req: SocketModeRequest) -> None:  # type: ignore[override]
        start = time.time()
        problem = payload_problem(req.payload) if req.type == "events_api" else None
        try:
            if problem is not None:
                raise ValueError(f"malformed payload: {problem}")
            response = await run_async_bolt_app(self.app, req)
        except Exception as error:  # noqa: BLE001 - the same payload would fail the same way every time
            payload = req.payload if isinstance(req.payload, dict) else {}
            log_rejected(log, "slack.event.rejected", error, envelope_id=req.envelope_id, type=req.type,
                         event_id=str(payload.get("event_id") or ""))  # fmt: skip
            await client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))
            return
        await send_async_response(client, req, response, start)


class SocketReceiver:
    def __init__(self, app: AsyncApp, client: AsyncWebClient, app_token: str) -> None:
        self._app = app
        self._client = client
        self._app_token = app_token
        self._handler: AsyncSocketModeHandler | None = None
        self._connecting: asyncio.Task[None] | None = None

    async def start(self) -> bool:
        """Connect; returns False when the first session is not up yet (the client keeps trying)."""
        # Asked here first so a wrong app token fails start() with a clear error: slack-sdk's own
        # connect loop would log the failure and retry forever.
        try:
            response = await self._client.apps_connections_open(app_token=self._app_token)
        except Exception as error:  # noqa: BLE001 - translated into an error that names the setting
            raise startup_error("apps.connections.open", "platforms.slack.app_token (xapp-…, connections:write)",
                                error) from error  # fmt: skip
        handler = _Handler(self._app, app_token=self._app_token, web_client=self._client)
        handler.client.wss_uri = response["url"]
        self._handler = handler
        self._connecting = asyncio.create_task(handler.connect_async(), name="slack-socket-connect")
        done, _ = await asyncio.wait({self._connecting}, timeout=CONNECT_WAIT)
        if self._connecting in done and self._connecting.exception() is not None:
            raise AdapterError(f"Slack Socket Mode could not connect: {self._connecting.exception()}")
        return await self.connected()

    async def connected(self) -> bool:
        handler = self._handler
        return handler is not None and await handler.client.is_connected()

    def looks_connected(self) -> bool:
        """A synchronous view of :meth:`connected` for status(): a session is open and not stale."""
        client = None if self._handler is None else self._handler.client
        session = None if client is None else client.current_session
        return client is not None and session is not None and not (client.closed or client.stale or session.closed)

    async def stop(self) -> None:
        handler, self._handler = self._handler, None
        if self._connecting is not None and not self._connecting.done():
            self._connecting.cancel()
            await asyncio.gather(self._connecting, return_exceptions=True)
        if handler is not None:
            await handler.close_async()
            log.info("slack.socket.closed")

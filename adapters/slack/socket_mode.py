"""Socket Mode: the app opens a WebSocket to Slack (``apps.connections.open``) and acks events on it.

slack-sdk's client reconnects by itself; :meth:`SocketReceiver.connected`
tells /health whether a session is up right now.
"""

from __future__ import annotations

import asyncio
from typing import Final

import structlog
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp
from slack_sdk.web.async_client import AsyncWebClient

from adapters.base import AdapterError
from adapters.slack.sending import startup_error

log = structlog.get_logger(__name__)

CONNECT_WAIT: Final = 15.0
"""Seconds start() waits for the first WebSocket session before reporting the adapter degraded."""


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
        handler = AsyncSocketModeHandler(self._app, app_token=self._app_token, web_client=self._client)
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

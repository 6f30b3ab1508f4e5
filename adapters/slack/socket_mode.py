"""Socket Mode: the app opens a WebSocket to Slack (``apps.connections.open``) and acks events on it.

slack-sdk's client reconnects by itself; :meth:`SocketReceiver.connected`
tells /health whether a session is up right now, and :meth:`SocketReceiver.reconnect`
asks it for a new session at once (the gateway's liveness probe found the socket deaf).

Slack greets every new WebSocket session with ``hello``, and it sends a session only the
events that happen while that session is up: whatever was sent while the client was
reconnecting (a refresh, a dropped connection, a stale one the client replaced) is not
delivered later. So every ``hello`` calls ``on_session`` with whether a session came before
it (then the adapter tells the gateway to catch up on the open conversations).

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
from collections.abc import Callable
from typing import Any, Final

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
    def __init__(
        self,
        app: AsyncApp,
        client: AsyncWebClient,
        app_token: str,
        *,
        on_session: Callable[[bool], None] = lambda _replaced: None,
    ) -> None:
        self._app = app
        self._client = client
        self._app_token = app_token
        self._on_session = on_session
        self._handler: AsyncSocketModeHandler | None = None
        self._connecting: asyncio.Task[None] | None = None
        self._reconnecting: asyncio.Task[None] | None = None
        self.sessions = 0
        """How many sessions Slack greeted with ``hello`` so far."""

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
        handler.client.message_listeners.append(self._on_message)
        self._handler = handler
        self._connecting = asyncio.create_task(handler.connect_async(), name="slack-socket-connect")
        done, _ = await asyncio.wait({self._connecting}, timeout=CONNECT_WAIT)
        if self._connecting in done and self._connecting.exception() is not None:
            raise AdapterError(f"Slack Socket Mode could not connect: {self._connecting.exception()}")
        return await self.connected()

    async def connected(self) -> bool:
        handler = self._handler
        return handler is not None and await handler.client.is_connected()

    async def _on_message(self, client: object, message: dict[str, Any], raw: str | None) -> None:
        if message.get("type") != "hello":
            return
        self.sessions += 1
        log.info("slack.socket.session", sessions=self.sessions)
        self._on_session(self.sessions > 1)

    def reconnect(self) -> None:
        """Replace the session with a new one (in the background; the old one closes when the new is asked for)."""
        handler = self._handler
        if handler is None or (self._reconnecting is not None and not self._reconnecting.done()):
            return
        self._reconnecting = asyncio.create_task(self._replace(handler), name="slack-socket-reconnect")

    async def _replace(self, handler: AsyncSocketModeHandler) -> None:
        try:
            await handler.client.connect_to_new_endpoint(force=True)
        except Exception as error:  # noqa: BLE001 - the client's own monitor keeps trying after this
            log.warning("slack.socket.reconnect_failed", error=str(error),
                        hint="slack_sdk keeps trying; see its log lines")  # fmt: skip

    def pong_age(self) -> float | None:
        """Seconds since the ping that Slack answered last was sent; None before the first answer."""
        client = None if self._handler is None else self._handler.client
        last = None if client is None else getattr(client, "last_ping_pong_time", None)
        return None if last is None else max(0.0, time.time() - float(last))

    def looks_connected(self) -> bool:
        """A synchronous view of :meth:`connected` for status(): a session is open and not stale."""
        client = None if self._handler is None else self._handler.client
        session = None if client is None else client.current_session
        return client is not None and session is not None and not (client.closed or client.stale or session.closed)

    async def stop(self) -> None:
        handler, self._handler = self._handler, None
        for task in (self._connecting, self._reconnecting):
            if task is not None and not task.done():
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)
        if handler is not None:
            await handler.close_async()
            log.info("slack.socket.closed")

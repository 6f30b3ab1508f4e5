"""Webhook mode: Telegram POSTs each update to our HTTP server.

A request must carry the configured secret in ``X-Telegram-Bot-Api-Secret-Token``
(Telegram sends what ``setWebhook(secret_token=...)`` registered); anything
else gets 403 and a log line. An accepted update is answered 200 only after
the gateway's intake stored it, so when storing fails Telegram delivers the
update again later instead of losing it. An update that cannot be read (see
:mod:`.updates`) is answered 200 after its ``telegram.update.rejected`` line:
Telegram delivers a webhook's updates in order, so answering it with an error
would hold back every update after it, and sending it again would not help.
A press of one of the bot's buttons (a ``callback_query``) is acknowledged, handed to the gateway
and answered 200 (:mod:`.buttons`).
"""

from __future__ import annotations

import hmac
from collections.abc import Awaitable, Callable
from typing import Any

import structlog
from aiogram import Bot
from aiohttp import web

from adapters.contract import Intake
from adapters.http_listener import HttpListener, ListenerLimits

from .buttons import is_press
from .convert import BotIdentity
from .updates import read_update, update_id_of

log = structlog.get_logger(__name__)

SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


class WebhookServer:
    def __init__(
        self,
        bot: Bot,
        identity: BotIdentity,
        intake: Intake,
        *,
        secret: str,
        path: str,
        host: str,
        port: int,
        on_inbound: Callable[[], None],
        on_reached: Callable[[], None] = lambda: None,
        limits: ListenerLimits = ListenerLimits(),
        on_press: Callable[[Any, Bot], Awaitable[None]] | None = None,
    ) -> None:
        """``on_press``: handles a press of one of the bot's buttons (:meth:`.buttons.Presses.handle`)."""
        self._bot = bot
        self._on_press = on_press
        self._identity = identity
        self._intake = intake
        self._secret = secret.encode()
        self._path = path or "/"
        self._host = host
        self._port = port
        self._on_inbound = on_inbound
        self._on_reached = on_reached
        """Called for every request that carries the secret: Telegram can reach us."""
        self._limits = limits
        self._listener: HttpListener | None = None
        self.bound_port: int | None = None
        self.received = 0
        """Requests with the secret that reached us so far (a liveness probe watches it move)."""
        self.held = 0
        """Such requests being handled right now: Telegram still counts their updates as pending."""

    async def start(self) -> None:
        app = web.Application(client_max_size=4 * 1024 * 1024)
        app.router.add_post(self._path, self._receive)
        listener = HttpListener(app, name="telegram webhook", host=self._host, port=self._port, limits=self._limits,
                                setting="platforms.telegram.webhook_listen.port", shutdown_timeout=5.0)  # fmt: skip
        _, self.bound_port = await listener.start()  # ListenError names the setting: the gateway stops (status 2)
        self._listener = listener

    async def stop(self) -> None:
        if self._listener is not None:
            listener, self._listener = self._listener, None
            await listener.stop()

    async def _receive(self, request: web.Request) -> web.Response:
        presented = request.headers.get(SECRET_HEADER, "").encode()
        if not hmac.compare_digest(presented, self._secret):
            log.warning("telegram.webhook.rejected", remote=request.remote, path=request.path,
                        reason="missing secret header" if not presented else "wrong secret header",
                        hint="only Telegram, with the secret given to setWebhook, may post here")  # fmt: skip
            return web.Response(status=403, text="forbidden")
        self._on_reached()
        self.received += 1
        self.held += 1
        try:
            return await self._handle(request)
        finally:
            self.held -= 1

    async def _handle(self, request: web.Request) -> web.Response:
        """Hand the update of a request that carries the secret to the intake; 200 once it is stored."""
        try:
            raw = await request.json()
        except ValueError as error:  # not JSON at all: cut short on the way, perhaps; a second delivery may do
            log.warning("telegram.webhook.bad_request", remote=request.remote, error=str(error)[:200])
            return web.Response(status=400, text="not a Telegram update")
        if is_press(raw):  # acknowledged and handed over, never stored: 200 whatever became of it
            if self._on_press is not None:
                await self._on_press(raw, self._bot)
            return web.Response(status=200)
        message = read_update(raw, self._bot, self._identity)
        if message is None:
            return web.Response(status=200)
        try:
            await self._intake(message)
        except Exception as error:  # noqa: BLE001 - a non-200 answer makes Telegram send the update again
            log.error("telegram.intake.failed", update_id=update_id_of(raw), error=str(error), exc_info=error,
                      hint="Telegram will deliver this update again")  # fmt: skip
            return web.Response(status=503, text="try again")
        self._on_inbound()
        return web.Response(status=200)

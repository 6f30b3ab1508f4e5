"""The webhook half of the fake Telegram: setWebhook, deleteWebhook, getWebhookInfo and delivery.

Like Telegram, it POSTs pending updates to the registered URL in order and
keeps an update until the bot answers 200. A failed delivery is remembered
the way getWebhookInfo reports it (``last_error_date`` in Unix seconds and
``last_error_message``). Test controls:

* :attr:`WebhookSide.webhook_unreachable` - a message such as ``"Connection
  refused"``: deliveries fail with it without reaching the bot (a proxy down,
  a wrong DNS name, a TLS problem).
* :attr:`WebhookSide.webhook_stopped` - Telegram stops calling the webhook without any error:
  updates pile up as pending (getWebhookInfo counts them, with no error), until setWebhook
  registers the webhook again.
* :attr:`WebhookSide.webhook_info` - fields that override what getWebhookInfo
  answers (``url``, ``pending_update_count``, ``last_error_date``,
  ``last_error_message``), for states the delivery loop does not produce.
* :meth:`WebhookSide.replace_webhook` - someone else sets (or, with None,
  deletes) the webhook for this token.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import aiohttp
from aiohttp import web

from .users import UserSide
from .wire import as_bool, as_json, error, ok

RETRY_PAUSE = 0.2
"""Seconds between delivery attempts of an update that was not answered 200."""


class WebhookSide(UserSide):
    def __init__(self) -> None:
        super().__init__()
        self.webhook: dict[str, Any] | None = None
        self.webhook_deliveries: list[tuple[int, int]] = []
        """(update_id, HTTP status) for every webhook POST made (status 0: no HTTP answer)."""
        self.webhook_unreachable: str | None = None
        self.webhook_stopped = False
        self.webhook_info: dict[str, Any] = {}
        self.last_webhook_error: tuple[int, str] | None = None
        """(Unix time, message) of the most recent failed delivery, as getWebhookInfo reports it."""

    async def replace_webhook(self, url: str | None) -> None:
        """Another client registers ``url`` as this token's webhook (None: it deletes the webhook)."""
        async with self.changed:
            self.webhook = None if url is None else {"url": url, "secret_token": None, "allowed_updates": None}
            self.changed.notify_all()

    # --- the Bot API -------------------------------------------------------------------------
    async def _api_deletewebhook(self, params: dict[str, Any]) -> web.Response:
        async with self.changed:
            self.webhook = None
            if as_bool(params.get("drop_pending_updates")):
                self.updates.clear()
            self.changed.notify_all()
        return ok(True)

    async def _api_setwebhook(self, params: dict[str, Any]) -> web.Response:
        if not params.get("url"):
            return error(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        async with self.changed:
            self.webhook = {"url": params["url"], "secret_token": params.get("secret_token"),
                            "allowed_updates": as_json(params.get("allowed_updates"))}  # fmt: skip
            self.webhook_stopped = False
            if as_bool(params.get("drop_pending_updates")):
                self.updates.clear()
            self.changed.notify_all()
        return ok(True)

    async def _api_getwebhookinfo(self, params: dict[str, Any]) -> web.Response:
        info: dict[str, Any] = {"url": self.webhook["url"] if self.webhook else "", "has_custom_certificate": False,
                                "pending_update_count": len(self.updates)}  # fmt: skip
        if self.last_webhook_error is not None:
            info["last_error_date"], info["last_error_message"] = self.last_webhook_error
        info.update(self.webhook_info)
        return ok(info)

    # --- delivery ----------------------------------------------------------------------------
    async def _push_webhooks(self) -> None:
        """POST pending updates to the webhook in order; an update stays until answered 200."""
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
            while True:
                async with self.changed:
                    await self.changed.wait_for(lambda: self.webhook is not None and bool(self.updates)
                                                and not self.webhook_stopped)  # fmt: skip
                    hook, update = dict(self.webhook or {}), self.updates[0]
                status, problem = await self._deliver(session, hook, update)
                async with self.changed:
                    self.webhook_deliveries.append((update["update_id"], status))
                    if status == 200:
                        self.acknowledge_below(update["update_id"] + 1)
                    else:
                        self.last_webhook_error = (int(time.time()), problem)
                    self.changed.notify_all()
                if status != 200:
                    await asyncio.sleep(RETRY_PAUSE)

    async def _deliver(self, session: aiohttp.ClientSession, hook: dict[str, Any],
                       update: dict[str, Any]) -> tuple[int, str]:  # fmt: skip
        """One POST: the HTTP status (0 when none came back) and, on failure, Telegram's wording for it."""
        if self.webhook_unreachable is not None:
            return 0, self.webhook_unreachable
        headers = {"X-Telegram-Bot-Api-Secret-Token": hook["secret_token"]} if hook.get("secret_token") else {}
        try:
            async with session.post(hook["url"], json=update, headers=headers) as response:
                return response.status, f"Wrong response from the webhook: {response.status} {response.reason}"
        except aiohttp.ClientConnectorError:
            return 0, "Connection refused"
        except (aiohttp.ClientError, TimeoutError) as problem:
            return 0, f"Connection failed: {type(problem).__name__}"

"""Webhook mode's liveness check: ask Telegram how delivery to our webhook is going.

In webhook mode nothing on our side notices when Telegram cannot reach us (a
wrong URL, a TLS problem, a proxy that is down): the server just stays quiet.
Every ``interval`` seconds the watchdog calls getWebhookInfo and acts on it:

* The registered URL is not ours (another client set a different webhook,
  or deleted it): register ours again with setWebhook.
* Telegram reports a delivery error newer than both our start and the last
  update that reached us, and updates are waiting: the adapter is DEGRADED,
  with Telegram's error message and where to look. The log gets one line per
  such episode, not one per check.
* Back to RUNNING as soon as an update reaches the webhook, or Telegram no
  longer reports a fresh error with updates waiting.

Telegram can also stop calling the webhook without reporting any error, the
updates just piling up; the adapter's liveness probe notices that (see
:mod:`.liveness`, which reads getWebhookInfo the same way) and asks the
watchdog to :meth:`~WebhookWatchdog.reregister`: setWebhook again, DEGRADED
until an update reaches the webhook or Telegram holds none.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from typing import Any

import structlog
from aiogram import Bot
from aiogram.exceptions import ClientDecodeError, TelegramAPIError
from aiogram.methods import GetWebhookInfo, SetWebhook
from aiogram.types import WebhookInfo

from adapters.contract import AdapterState

log = structlog.get_logger(__name__)

CALL_TIMEOUT = 30
Report = Callable[[AdapterState, str], None]


class WebhookWatchdog:
    def __init__(
        self,
        bot: Bot,
        registration: SetWebhook,
        *,
        interval: float,
        listen: str,
        running_detail: str,
        report: Report,
    ) -> None:
        self._bot = bot
        self._registration = registration
        self.interval = interval
        self._listen = listen
        self.running_detail = running_detail
        self._report = report
        self._reached_at = time.time()
        """Wall-clock time of our start, later of the last update that reached the webhook."""
        self._failing = False
        self._awaiting_flow = False
        """After :meth:`reregister`: recovered only by an update reaching us or none waiting, not by a quiet check."""
        self._task: asyncio.Task[None] | None = None
        self._reregistering: asyncio.Task[None] | None = None

    @property
    def url(self) -> str:
        """The webhook URL we register."""
        return self._registration.url

    def start(self) -> None:
        self._reached_at = time.time()
        self._task = asyncio.create_task(self._run(), name="telegram-webhook-watchdog")

    async def stop(self) -> None:
        for task in (self._task, self._reregistering):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        self._task = self._reregistering = None

    def reregister(self, reason: str) -> None:
        """Register our webhook with Telegram again, in the background (a probe found Telegram not calling it):
        DEGRADED with ``reason`` until an update reaches the webhook or Telegram holds none."""
        self._failing = self._awaiting_flow = True
        self._report(AdapterState.DEGRADED, f"{reason}; registering the webhook {self.url} again")
        if self._reregistering is None or self._reregistering.done():
            self._reregistering = asyncio.create_task(self._reregister(reason), name="telegram-webhook-reregister")

    async def _reregister(self, reason: str) -> None:
        problem = await self._set_ours()
        if problem is not None:
            log.error("telegram.webhook.reregister_failed", ours=self.url, reason=reason, error=problem)
            self._report(AdapterState.DEGRADED, f"{reason}; registering the webhook {self.url} again failed "
                         f"({problem}); the next failed probe tries again")  # fmt: skip
            return
        log.warning("telegram.webhook.reregistered", ours=self.url, reason=reason,
                    hint="Telegram held updates it did not deliver; health says degraded until they arrive")  # fmt: skip
        if self._failing:
            self._report(AdapterState.DEGRADED, f"{reason}; webhook {self.url} registered again, waiting for "
                         "Telegram to deliver")  # fmt: skip

    def note_delivery(self) -> None:
        """An update from Telegram reached the webhook: delivery works right now."""
        self._reached_at = time.time()
        if self._failing:
            self._recover("an update reached the webhook")

    def delivery_failing(self, info: WebhookInfo) -> bool:
        """Telegram reports a delivery error newer than our start and the last update that reached us, with
        updates waiting."""
        if not info.pending_update_count or info.last_error_date is None:
            return False
        # Telegram gives whole seconds; only an error after the second of our start or last update counts.
        return _unix(info.last_error_date) > math.floor(self._reached_at)

    def failure_detail(self, info: WebhookInfo) -> str:
        """What a failing delivery (:meth:`delivery_failing`) means and where to look."""
        message = info.last_error_message or "no error message given"
        return (f"Telegram cannot deliver updates to the webhook {self.url}: {message} "
                f"({info.pending_update_count} update(s) waiting); check that this URL, its TLS certificate "
                f"and any proxy in front of it reach the webhook server on {self._listen}")  # fmt: skip

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            try:
                await self.check()
            except Exception as error:  # noqa: BLE001 - one bad check must not end the watchdog
                log.error("telegram.webhook.check_crashed", error=str(error), exc_info=error)

    async def check(self) -> None:
        try:
            info: WebhookInfo = await self._bot(GetWebhookInfo(), request_timeout=CALL_TIMEOUT)
        except (TelegramAPIError, ClientDecodeError) as error:
            # Our own way to Telegram is in trouble; sending will say so too. Try again next time.
            log.warning("telegram.webhook.check_failed", error=str(error), retry_in_s=self.interval)
            return
        ours = self._registration.url
        if info.url != ours:
            await self._register_again(info.url)
            return
        if self.delivery_failing(info):
            self._fail(info)
        elif self._failing and not (self._awaiting_flow and info.pending_update_count):
            self._recover("Telegram reports no fresh delivery error" if not self._awaiting_flow
                          else "Telegram holds no update for the webhook")  # fmt: skip

    def _fail(self, info: WebhookInfo) -> None:
        message = info.last_error_message or "no error message given"
        detail = self.failure_detail(info)
        if not self._failing:
            self._failing = True
            log.warning("telegram.webhook.failing", url=self._registration.url, telegram=message,
                        pending=info.pending_update_count, listen=self._listen,
                        hint="check the proxy, TLS certificate and URL in front of webhook_listen")  # fmt: skip
        self._report(AdapterState.DEGRADED, detail)

    def _recover(self, why: str) -> None:
        self._failing = self._awaiting_flow = False
        log.info("telegram.webhook.recovered", reason=why)
        self._report(AdapterState.RUNNING, self.running_detail)

    async def _set_ours(self) -> str | None:
        """setWebhook with our registration; what went wrong, or None."""
        try:
            await self._bot(self._registration, request_timeout=CALL_TIMEOUT)
        except (TelegramAPIError, ClientDecodeError) as error:
            return str(error)
        return None

    async def _register_again(self, found: str) -> None:
        ours = self._registration.url
        problem = await self._set_ours()
        if problem is not None:
            log.error("telegram.webhook.reregister_failed", found=found or None, ours=ours, error=problem)
            self._report(AdapterState.DEGRADED, f"Telegram has {described(found)} registered instead of our "
                         f"webhook {ours}, and setting ours again failed ({problem}); retrying in {self.interval:g} s")
            return
        log.warning("telegram.webhook.reregistered", found=found or None, ours=ours,
                    hint="another client changed or deleted this bot's webhook; if a second instance uses the "
                    "same token, stop it or give it its own token")  # fmt: skip
        self._reached_at = time.time()
        self._failing = self._awaiting_flow = False
        self._report(AdapterState.RUNNING, self.running_detail)


def _unix(value: Any) -> float:
    """aiogram reads ``last_error_date`` as a datetime; the Bot API sends Unix seconds."""
    return float(value.timestamp()) if hasattr(value, "timestamp") else float(value)


def described(url: str) -> str:
    """A registered webhook URL in words (empty: none is registered)."""
    return f"the webhook {url}" if url else "no webhook"

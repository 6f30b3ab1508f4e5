"""The alert webhooks as a destination of the outbox: one JSON POST per alert, retried like a reply.

An alert for a webhook is an outbox row like a reply chunk (``platform`` :data:`WEBHOOK_PLATFORM`,
``chat_id`` the webhook's :func:`webhook_id`, the text the JSON body), and :class:`WebhookSender`
is registered with :class:`gateway.delivery.outbox.Delivery` as the sender of such rows. So a POST
gets what a reply gets: recorded before it is tried, tried again with backoff, deferred and tried
every ``gateway.undelivered_retry_every`` while the receiver is down (for up to
``gateway.undelivered_keep_hours``), sent after a restart if it had not gone out, and never twice
once a 2xx came back. The row holds neither the URL nor a header (secrets): only the webhook's id.

What a receiver gets (``Content-Type: application/json``, plus the configured headers, plus
``Idempotency-Key``: the same on every attempt at one alert)::

    {"id": "adapter_down:telegram@1764230000:fired", "condition": "adapter_down", "state": "fired",
     "severity": "critical", "platform": "telegram", "text": "...", "at": "2026-11-27T08:13:20Z",
     "held_back": {}, "gateway": {"version": "0.9.0", "host": "bot-1"}}

A 2xx is delivered; 408, 425, 429 and 5xx, a timeout or a connection that fails are tried again
(429 after its ``Retry-After``); any other answer (a wrong URL, a refused token) gives the alert up
with the status in the log (``delivery.failed``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import ClassVar

import aiohttp

from adapters.contract import (
    Adapter,
    Capabilities,
    DeliveryError,
    Intake,
    Markup,
    OutboundMessage,
    Rate,
    RateLimited,
    RateLimits,
    RecipientUnavailable,
    TransientDeliveryError,
)
from config.alerts import AlertWebhook

WEBHOOK_PLATFORM = "alert-webhook"
"""The outbox's ``platform`` of an alert POST (no chat platform has this name)."""
RETRY_STATUSES = frozenset({408, 425, 429})
DEFAULT_RETRY_AFTER = 30.0


def webhook_id(webhook: AlertWebhook) -> str:
    """The webhook's name in the outbox and the log: a digest of its URL, never the URL (a secret)."""
    return "wh-" + hashlib.sha256(webhook.url.encode()).hexdigest()[:12]


def masked_url(url: str) -> str:
    """What ``switchboard check`` shows of a webhook: its scheme and host, the rest masked."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0].rpartition("@")[2]  # user:password@ is never shown
    return f"{scheme}://{host}/[REDACTED]" if host else "[REDACTED]"


class WebhookSender(Adapter):
    """Sends the outbox rows of :data:`WEBHOOK_PLATFORM`: each one's text, a JSON body, to its webhook."""

    platform: ClassVar[str] = WEBHOOK_PLATFORM
    capabilities: ClassVar[Capabilities] = Capabilities(
        max_message_length=1_000_000, can_edit=False, markup=Markup.PLAIN, rates=RateLimits(per_chat=Rate(5, 1.0))
    )

    def __init__(self, webhooks: Sequence[AlertWebhook]) -> None:
        super().__init__()
        self.webhooks = {webhook_id(webhook): webhook for webhook in webhooks}
        self._session: aiohttp.ClientSession | None = None

    async def start(self, intake: Intake) -> None:  # it receives nothing
        return None

    async def stop_intake(self) -> None:
        return None

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def send(self, message: OutboundMessage) -> str:
        webhook = self.webhooks.get(message.chat_id)
        if webhook is None:
            raise RecipientUnavailable(f"webhook {message.chat_id} is no longer in alerts.webhooks")
        if self._session is None:
            self._session = aiohttp.ClientSession()
        name = f"webhook {message.chat_id}"
        headers = {"Content-Type": "application/json", **webhook.headers}
        if message.nonce:
            headers["Idempotency-Key"] = message.nonce
        try:
            async with self._session.post(webhook.url, data=message.text.encode(), headers=headers,
                                          timeout=aiohttp.ClientTimeout(total=webhook.timeout),
                                          allow_redirects=False) as response:  # fmt: skip
                status = response.status
                retry_after = response.headers.get("Retry-After", "")
        except TimeoutError as error:
            raise TransientDeliveryError(f"{name} did not answer within {webhook.timeout:g} s") from error
        except aiohttp.ClientError as error:
            raise TransientDeliveryError(f"{name} cannot be reached: {type(error).__name__}: {error}") from error
        if 200 <= status < 300:
            return f"http-{status}"
        if status == 429:
            raise RateLimited(_seconds(retry_after), f"{name} answered 429")
        if status >= 500 or status in RETRY_STATUSES:
            raise TransientDeliveryError(f"{name} answered {status}")
        raise DeliveryError(f"{name} answered {status}: check its URL and headers in alerts.webhooks")


def _seconds(retry_after: str) -> float:
    try:
        return max(0.0, float(retry_after))
    except ValueError:
        return DEFAULT_RETRY_AFTER

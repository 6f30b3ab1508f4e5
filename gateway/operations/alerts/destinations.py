"""Where alerts go, how many an hour, and how each one is handed to the outbox.

A chat (``platform:chat_id``) gets the alert as a message, through the outbox like a reply; a
webhook gets it as a JSON POST, through the outbox too (``gateway/operations/alerts/webhook.py``).
The outbox key of an alert at a destination is ``alert:<alert id>><destination>``: the same after a
restart, so an alert is queued once and, once delivered, never sent again.

When the database cannot record anything (the condition being alerted may be exactly that), the
alert is sent without it: to a chat in one attempt (``Delivery.send_unrecorded``), to a webhook in
up to :data:`UNRECORDED_ATTEMPTS`; lost if the process stops first.

:class:`HourlyBudget` keeps each destination to ``max_per_hour`` alerts in any hour. What it holds
back is counted by condition and summed up in the next alert that goes there.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import structlog

from adapters.contract import AdapterError, OutboundMessage
from gateway.delivery.outbox import Delivery, Spawn
from gateway.delivery.policy import ALERT_PREFIX, nonce_for
from gateway.operations.alerts import texts
from gateway.operations.alerts.webhook import WEBHOOK_PLATFORM, WebhookSender
from gateway.operations.redaction import redactor
from gateway.operations.version import version
from storage import OutboxChunk, StorageError, StorageEngine

log = structlog.get_logger("gateway.alerts")

HOUR = 3600.0
UNRECORDED_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class Alert:
    id: str
    """Stable across restarts: ``<condition key>@<when it fired>.<sequence>``, and ``:fired`` or ``:cleared``."""
    condition: str
    state: Literal["fired", "cleared"]
    severity: str
    platform: str | None
    text: str
    at: float
    """Wall-clock time it was raised."""


@dataclass(frozen=True, slots=True)
class Destination:
    platform: str
    """A chat platform, or :data:`WEBHOOK_PLATFORM`."""
    chat_id: str
    """The chat, or the webhook's id (``webhook.webhook_id``)."""

    @property
    def name(self) -> str:
        return f"{self.platform}:{self.chat_id}"

    @property
    def webhook(self) -> bool:
        return self.platform == WEBHOOK_PLATFORM

    @property
    def shown(self) -> str:
        """How the log names it (a webhook by its id: its URL is a secret)."""
        return f"webhook {self.chat_id}" if self.webhook else self.name


@dataclass
class HourlyBudget:
    """Alerts sent to each destination in the last hour, and those held back since the last one went."""

    max_per_hour: int
    sent: dict[str, list[float]] = field(default_factory=dict)
    held: dict[str, dict[str, int]] = field(default_factory=dict)

    def admit(self, destination: str, condition: str, now: float) -> dict[str, int] | None:
        """Count an alert to ``destination`` if the hour allows it, with what was held back before it
        (to be summed up in it); None: held back, and counted."""
        if not self.room(destination, now):
            counts = self.held.setdefault(destination, {})
            counts[condition] = counts.get(condition, 0) + 1
            return None
        self.sent.setdefault(destination, []).append(now)
        return self.held.pop(destination, {})

    def room(self, destination: str, now: float) -> bool:
        recent = [at for at in self.sent.get(destination, []) if now - at < HOUR]
        self.sent[destination] = recent
        return len(recent) < self.max_per_hour

    def to_dict(self) -> dict[str, Any]:
        return {"sent": self.sent, "held": self.held}


class Dispatch:
    """Hands one alert to one destination: recorded in the outbox, then delivered in the background."""

    def __init__(self, store: StorageEngine, delivery: Delivery, sender: WebhookSender, spawn: Spawn, *,
                 host: str | None = None, pause: Callable[[float], Any] = asyncio.sleep) -> None:  # fmt: skip
        self._store = store
        self._delivery = delivery
        self._sender = sender
        self._spawn = spawn
        self._host = host or socket.gethostname()
        self._pause = pause

    @property
    def host(self) -> str:
        return self._host

    async def send(self, alert: Alert, to: Destination, held: Mapping[str, int], max_per_hour: int) -> None:
        key = f"{ALERT_PREFIX}{alert.id}>{to.name}"
        if to.webhook:
            text = json.dumps(self.payload(alert, held), ensure_ascii=False)
            chunks = [OutboxChunk(text=text)]
        else:
            text = f"**{texts.headline(alert.state == 'fired', self._host)}:** {alert.text}"
            if held:
                text += "\n\n" + texts.held_back(held, max_per_hour)
            chunks = self._delivery.chunks(to.platform, text)
        try:
            records = await self._store.outbox_add(key, to.platform, to.chat_id, None, chunks)
        except StorageError as error:
            log.warning("alert.unrecorded", alert=alert.id, destination=to.shown, error=str(error)[:200],
                        hint="the database cannot record it: sent once without the outbox")  # fmt: skip
            self._spawn(self._unrecorded(key, to, text), name=f"alert:{to.name}")
            return
        self._spawn(self._delivery.deliver(records), name=f"alert:{to.name}")

    def payload(self, alert: Alert, held: Mapping[str, int]) -> dict[str, Any]:
        """The JSON body a webhook gets (its fields: ``gateway/operations/alerts/webhook.py``)."""
        return {
            "id": alert.id,
            "condition": alert.condition,
            "state": alert.state,
            "severity": alert.severity,
            "platform": alert.platform,
            "text": redactor.credentials(alert.text),
            "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(alert.at)),
            "held_back": dict(held),
            "gateway": {"version": version(), "host": self._host},
        }

    async def _unrecorded(self, key: str, to: Destination, text: str) -> None:
        if not to.webhook:
            await self._delivery.send_unrecorded(key=key, platform=to.platform, chat_id=to.chat_id, text=text)
            return
        message = OutboundMessage(chat_id=to.chat_id, text=text, nonce=nonce_for(key, 0))
        for attempt in range(1, UNRECORDED_ATTEMPTS + 1):
            try:
                await self._sender.send(message)
                log.info("alert.sent_unrecorded", destination=to.shown)
                return
            except AdapterError as error:
                log.warning("alert.webhook_failed", destination=to.shown, attempt=attempt, error=str(error))
                if not getattr(error, "retryable", False) or attempt == UNRECORDED_ATTEMPTS:
                    return
                await self._pause(2.0**attempt)

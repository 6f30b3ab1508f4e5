"""The Telegram adapter's liveness probe: does Telegram hold updates that never reached us?

Telegram keeps every update until the bot confirms it (getUpdates with a
higher offset, or a webhook's 200), and getWebhookInfo's
``pending_update_count`` says how many it holds, in polling mode too. A
connection that answers promptly but hears nothing shows there: updates pile
up while the poller (or webhook server) receives none. The probe

1. calls getMe, whose round trip is the probe's latency (and which fails
   with a clear reason when Telegram cannot be reached or the token was revoked);
2. reads getWebhookInfo: in webhook mode the registered URL must still be
   ours and Telegram must report no fresh delivery error (the watchdog's own
   reading, :mod:`.webhook_watch`);
3. subtracts the updates the receiver has in hand (fetched or being stored,
   not yet confirmed). When more wait, it gives the receiver ``grace`` seconds
   to take one (they may have arrived a moment ago); if none comes, the
   connection is deaf: a failed probe with ``missed=True``.

Nothing is lost in between: the updates wait at Telegram, so after the
reconnect the poller (or Telegram's next call of the webhook) fetches them,
each once (the offset and the inbox see to that). Telegram needs no catch-up.
"""

from __future__ import annotations

import asyncio
import time
from typing import Protocol

from aiogram import Bot
from aiogram.exceptions import ClientDecodeError, TelegramAPIError
from aiogram.methods import GetMe, GetWebhookInfo
from aiogram.types import WebhookInfo

from adapters.contract import Liveness

from .webhook_watch import WebhookWatchdog, described

CALL_TIMEOUT = 10
LOOK_EVERY = 0.05
"""Seconds between looks at the receiver while giving it time to take waiting updates."""


class Receiver(Protocol):
    """Where updates come in: the poller, or the webhook server."""

    @property
    def received(self) -> int:
        """Updates (or webhook requests) received so far."""

    @property
    def held(self) -> int:
        """Received updates Telegram still counts as pending (not yet confirmed)."""


async def probe(bot: Bot, receiver: Receiver, *, grace: float, watchdog: WebhookWatchdog | None = None) -> Liveness:
    """Check that Telegram holds no update ``receiver`` should have had (``watchdog``: webhook mode)."""
    how = "the webhook" if watchdog is not None else "getUpdates"
    started = time.monotonic()
    try:
        await bot(GetMe(), request_timeout=CALL_TIMEOUT)
    except (TelegramAPIError, ClientDecodeError) as error:
        return Liveness(False, f"getMe failed: {error}")
    latency = time.monotonic() - started
    seen = receiver.received
    try:
        info: WebhookInfo = await bot(GetWebhookInfo(), request_timeout=CALL_TIMEOUT)
    except (TelegramAPIError, ClientDecodeError) as error:
        return Liveness(False, f"getMe answered in {latency:.2f} s, but getWebhookInfo failed: {error}", latency)
    pending = info.pending_update_count
    if watchdog is not None and info.url != watchdog.url:
        return Liveness(False, f"Telegram has {described(info.url)} registered instead of our webhook "
                        f"{watchdog.url} ({pending} update(s) waiting)", latency, missed=pending > 0)  # fmt: skip
    if watchdog is not None and watchdog.delivery_failing(info):
        return Liveness(False, watchdog.failure_detail(info), latency, missed=True)
    waiting = pending - receiver.held
    if waiting <= 0:
        return Liveness(True, f"getWebhookInfo: {pending} pending, none beyond the {receiver.held} in hand; "
                        f"getMe answered in {latency:.2f} s", latency)  # fmt: skip
    if await _takes_one(receiver, seen, grace):
        return Liveness(True, f"getWebhookInfo: {pending} pending, and {how} is receiving them; getMe answered "
                        f"in {latency:.2f} s", latency)  # fmt: skip
    return Liveness(
        False,
        f"deaf: Telegram holds {waiting} update(s) that {how} did not deliver within {grace:g} s "
        f"(getWebhookInfo: {pending} pending, {receiver.held} in hand)",
        latency,
        missed=True,
    )


async def _takes_one(receiver: Receiver, seen: int, grace: float) -> bool:
    """Whether the receiver gets anything beyond ``seen`` within ``grace`` seconds."""
    deadline = time.monotonic() + grace
    while receiver.received == seen:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(LOOK_EVERY)
    return True

"""Fixtures of the end-to-end liveness tests: the Discord emulator, the alert webhook receiver, and the
real gateway with Telegram (``start_telegram``, as the Telegram adapter's tests start it)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio

from tests.adapters.telegram.conftest import start_telegram
from tests.fakes.discord_api import DiscordEmulator
from tests.fakes.webhook_receiver import WebhookReceiver


@pytest_asyncio.fixture
async def emulator() -> AsyncIterator[DiscordEmulator]:
    fake = DiscordEmulator()
    await fake.start()
    try:
        yield fake
    finally:
        await fake.stop()


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    hook = WebhookReceiver()
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()


__all__ = ["emulator", "receiver", "start_telegram"]

"""Fixtures of the end-to-end liveness tests, taken from the tests of each part: the Discord emulator, the
alert webhook receiver, and the real gateway with Telegram (``start_telegram``)."""

from __future__ import annotations

from tests.adapters.discord.conftest import emulator
from tests.adapters.telegram.conftest import start_telegram
from tests.gateway.test_alerts_e2e import receiver

__all__ = ["emulator", "receiver", "start_telegram"]

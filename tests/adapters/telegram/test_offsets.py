"""The adapter confirms an update to Telegram only after the intake has returned for it.

These drive the real adapter against the emulator with a stand-in for the
gateway's intake (the adapter's only inbound dependency), so a test can hold
the intake open or make it fail and watch what Telegram is told.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio
from structlog.testing import capture_logs

from adapters.contract import AdapterState, ChatType, InboundMessage
from adapters.telegram import TelegramAdapter, TelegramSettings
from adapters.telegram.polling import PollingSettings
from tests.adapters.telegram.conftest import ALICE
from tests.fakes.telegram_api import Chat, TelegramAPI
from tests.waiting import eventually


class SlowIntake:
    """Stores messages like the gateway would, but only when the test lets it; may fail first."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.calls: list[InboundMessage] = []
        self.stored: list[InboundMessage] = []
        self.failures = 0

    async def __call__(self, message: InboundMessage) -> None:
        self.calls.append(message)
        if self.failures:
            self.failures -= 1
            raise OSError("disk full")
        await self.release.wait()
        self.stored.append(message)


@pytest_asyncio.fixture
async def adapter(telegram_api: TelegramAPI) -> AsyncIterator[TelegramAdapter]:
    polling = PollingSettings(poll_timeout=1, stall_timeout=30, retry_base=0.2, retry_max=0.5)
    adapter = TelegramAdapter(TelegramSettings(token=telegram_api.token, api_base_url=telegram_api.base_url, polling=polling))
    yield adapter
    await adapter.close()


async def test_an_update_is_confirmed_only_after_the_intake_stored_it(
    adapter: TelegramAdapter, telegram_api: TelegramAPI
) -> None:
    intake = SlowIntake()
    await adapter.start(intake)
    update = await telegram_api.say(ALICE, "hold on")
    await eventually(lambda: intake.calls, "the intake to be called")
    polls = len(telegram_api.calls_to("getUpdates"))
    await asyncio.sleep(1.5)  # longer than a poll: no further getUpdates may confirm it meanwhile
    assert telegram_api.confirmed_below <= update["update_id"]
    assert len(telegram_api.calls_to("getUpdates")) == polls

    intake.release.set()
    await eventually(lambda: telegram_api.confirmed_below > update["update_id"], "the update to be confirmed")
    [message] = intake.stored
    assert (message.event_id, message.chat_type, message.user_id) == (str(update["update_id"]), ChatType.DM, str(ALICE.id))


async def test_an_update_the_intake_could_not_store_is_fetched_again(
    adapter: TelegramAdapter, telegram_api: TelegramAPI
) -> None:
    intake = SlowIntake()
    intake.failures = 1
    intake.release.set()
    await adapter.start(intake)
    group = Chat.supergroup(-100321)
    update = await telegram_api.say(ALICE, "@switchboard_test_bot important", chat=group)
    await eventually(lambda: intake.stored, "the second attempt to store it")
    assert [m.event_id for m in intake.calls] == [str(update["update_id"])] * 2
    assert intake.stored[0].mentioned and intake.stored[0].chat_type is ChatType.GROUP
    await eventually(lambda: adapter.status().state is AdapterState.RUNNING, "recovery")
    assert telegram_api.confirmed_below <= update["update_id"] + 1


async def test_a_store_that_keeps_failing_logs_one_traceback_not_one_per_attempt(
    adapter: TelegramAdapter, telegram_api: TelegramAPI
) -> None:
    """A full disk fails every attempt: each is a line (with the wait), only the first carries the traceback."""
    intake = SlowIntake()
    intake.failures = 4
    intake.release.set()
    with capture_logs() as logs:
        await adapter.start(intake)
        await telegram_api.say(ALICE, "hello")
        await eventually(lambda: intake.stored, "the attempt after the failures")
    failed = [entry for entry in logs if entry["event"] == "telegram.intake.failed"]
    assert len(failed) == 4
    assert ["exc_info" in entry for entry in failed] == [True, False, False, False]
    assert failed[-1]["retry_in_s"] >= 0.75 * 0.5  # the pause grew to retry_max (less its jitter)

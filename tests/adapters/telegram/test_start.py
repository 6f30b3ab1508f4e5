"""Starting when Telegram is briefly unreachable, and when it refuses the token."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from adapters.contract import AdapterError, AdapterState
from adapters.telegram import TelegramAdapter, TelegramSettings
from tests.adapters.telegram.conftest import ALICE, StartTelegram
from tests.adapters.telegram.test_polling import health_matches, polling_timings
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import TelegramAPI
from tests.fakes.telegram_api.wire import Failure
from tests.waiting import eventually


async def test_telegram_unreachable_at_start_is_retried_in_the_background(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    telegram_api.fail("getMe", Failure.server_error(), Failure.server_error())
    await telegram_api.say(ALICE, "anyone there?")
    with capture_logs() as logs:
        run = await start_telegram(tune=polling_timings(retry_base=0.05))
        # The gateway is up while Telegram is not; /health says why instead of the bot being deaf.
        sent = await telegram_api.wait_sent(1)
    assert [m.visible for m in sent] == ["re: anyone there?"]
    assert len(telegram_api.calls_to("getMe")) >= 3
    events = [entry["event"] for entry in logs]
    assert "telegram.start_deferred" in events and "telegram.connected" in events
    await eventually(health_matches(run, "running", "long polling"), "telegram to report running")


async def test_a_start_that_never_reaches_telegram_stays_degraded_not_failed(
    start_telegram: StartTelegram, telegram_api: TelegramAPI
) -> None:
    telegram_api.fail("getMe", *[Failure.server_error()] * 1000)
    run = await start_telegram(tune=polling_timings(retry_base=0.05, retry_max=0.1))
    await eventually(lambda: len(telegram_api.calls_to("getMe")) >= 3, "a few attempts")
    status = run.adapter.status()
    assert status.state is AdapterState.DEGRADED and "getMe failed" in status.detail, status
    await eventually(health_matches(run, "degraded", "trying again"), "/health to show the retrying")


async def test_a_rejected_token_fails_at_once_with_what_to_do(telegram_api: TelegramAPI) -> None:
    adapter = TelegramAdapter(TelegramSettings(token="123456789:WRONG-token", api_base_url=telegram_api.base_url))

    async def intake(message: object) -> None:
        raise AssertionError("nothing should arrive")

    with pytest.raises(AdapterError, match="401.*@BotFather"):
        await adapter.start(intake)  # type: ignore[arg-type]
    assert adapter.status().state is AdapterState.FAILED
    assert len(telegram_api.calls_to("getMe")) == 1
    await adapter.close()

"""Webhook mode's watchdog: getWebhookInfo tells when Telegram cannot reach us or our webhook was replaced."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import pytest
from structlog.testing import capture_logs

from adapters.telegram import TelegramAdapter
from tests.adapters.telegram.conftest import ALICE, StartTelegram, TelegramRun
from tests.adapters.telegram.test_webhook import SECRET, free_port, webhook_config
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import TelegramAPI
from tests.waiting import eventually

TLS_PROBLEM = "SSL error {error:0A000086:SSL routines::certificate verify failed}"


def check_every(seconds: float) -> Callable[[TelegramAdapter], None]:
    def tune(adapter: TelegramAdapter) -> None:
        adapter.settings = dataclasses.replace(adapter.settings, webhook_check_interval=seconds)

    return tune


async def telegram_status(run: TelegramRun) -> dict[str, object]:
    status: dict[str, object] = (await run.health())["adapters"]["telegram"]
    return status


def health_is(run: TelegramRun, state: str, *words: str) -> Callable[[], object]:
    async def check() -> bool:
        status = await telegram_status(run)
        return status["state"] == state and all(word in str(status["detail"]) for word in words)

    return check


async def more_checks(api: TelegramAPI, count: int) -> None:
    """Wait until the watchdog has asked getWebhookInfo ``count`` more times."""
    seen = len(api.calls_to("getWebhookInfo"))
    await eventually(lambda: len(api.calls_to("getWebhookInfo")) >= seen + count, f"{count} more webhook checks")


async def test_telegram_failing_to_reach_the_webhook_degrades_health_once_and_recovers(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    port = free_port()
    with capture_logs() as logs:
        run = await start_telegram(telegram=webhook_config(port), tune=check_every(0.05))
        await more_checks(telegram_api, 3)
        assert (await telegram_status(run))["state"] == "running"

        # Telegram's deliveries fail (as when the proxy in front has a bad certificate); a user writes.
        telegram_api.webhook_unreachable = TLS_PROBLEM
        await telegram_api.say(ALICE, "can you hear me?")
        await eventually(health_is(run, "degraded", TLS_PROBLEM, "1 update(s) waiting", f"127.0.0.1:{port}",
                                         "TLS certificate and any proxy"), "the failing webhook in health")  # fmt: skip
        await more_checks(telegram_api, 5)
        assert (await telegram_status(run))["state"] == "degraded"
        failing = [entry for entry in logs if entry["event"] == "telegram.webhook.failing"]
        assert len(failing) == 1
        assert failing[0]["log_level"] == "warning" and failing[0]["telegram"] == TLS_PROBLEM

        # The path is fixed: Telegram delivers the waiting update, and health says running again.
        telegram_api.webhook_unreachable = None
        [reply] = await telegram_api.wait_sent(1)
        await eventually(health_is(run, "running", "webhook"), "recovery in health")
    assert reply.visible == "re: can you hear me?"
    # The update itself ends the episode (Telegram still counts it as waiting until we answer it).
    recovered = [entry for entry in logs if entry["event"] == "telegram.webhook.recovered"]
    assert [entry["reason"] for entry in recovered] == ["an update reached the webhook"]
    assert len([entry for entry in logs if entry["event"] == "telegram.webhook.failing"]) == 1


async def test_only_a_fresh_error_with_updates_waiting_counts_and_a_cleared_one_recovers(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("unused")
    run = await start_telegram(telegram=webhook_config(free_port()), tune=check_every(0.05))
    before_start = int(time.time()) - 600

    # An error from before this start (Telegram keeps the last one around) is old news.
    telegram_api.webhook_info = {"pending_update_count": 4, "last_error_date": before_start,
                                 "last_error_message": "Connection timed out"}  # fmt: skip
    await more_checks(telegram_api, 5)
    assert (await telegram_status(run))["state"] == "running"

    # A fresh error with nothing waiting is not a deaf bot either.
    fresh = math.floor(time.time()) + 1
    telegram_api.webhook_info = {"pending_update_count": 0, "last_error_date": fresh,
                                 "last_error_message": "Connection timed out"}  # fmt: skip
    await more_checks(telegram_api, 5)
    assert (await telegram_status(run))["state"] == "running"

    telegram_api.webhook_info["pending_update_count"] = 4
    await eventually(health_is(run, "degraded", "Connection timed out", "4 update(s) waiting"), "degraded")

    # Telegram no longer reports updates stuck behind an error: running again.
    telegram_api.webhook_info = {"pending_update_count": 0}
    await eventually(health_is(run, "running", "webhook"), "recovery once the error cleared")


@pytest.mark.parametrize("intruder", ["https://someone-else.example/hook", None], ids=["replaced", "deleted"])
async def test_a_webhook_replaced_or_deleted_by_someone_else_is_registered_again(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer, intruder: str | None
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    port = free_port()
    ours = f"http://127.0.0.1:{port}/telegram-hook"
    with capture_logs() as logs:
        # The interval comes from config.yaml here (the smallest it allows), so the setting is wired through.
        run = await start_telegram(telegram={**webhook_config(port), "webhook_check_interval": 1})
        assert run.adapter.settings.webhook_check_interval == 1
        assert len(telegram_api.calls_to("setWebhook")) == 1

        await telegram_api.replace_webhook(intruder)
        await eventually(lambda: len(telegram_api.calls_to("setWebhook")) == 2, "setWebhook again")
        await eventually(lambda: telegram_api.webhook is not None and telegram_api.webhook["url"] == ours,
                         "our webhook back in place")  # fmt: skip
        await telegram_api.say(ALICE, "after the takeover")
        [reply] = await telegram_api.wait_sent(1)
    assert reply.visible == "re: after the takeover"
    assert telegram_api.webhook is not None and telegram_api.webhook["secret_token"] == SECRET
    again = [entry for entry in logs if entry["event"] == "telegram.webhook.reregistered"]
    assert len(again) == 1
    assert again[0]["found"] == intruder and again[0]["ours"] == ours
    assert (await telegram_status(run))["state"] == "running"

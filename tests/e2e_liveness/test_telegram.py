"""Telegram going deaf, end to end: the real Gateway's liveness monitor probes the real Telegram adapter
(aiogram against the emulator), reconnects it, and the updates Telegram kept meanwhile are answered once
each. Nothing is read back: Telegram keeps undelivered updates itself, so the catch-up finds nothing.
"""

from __future__ import annotations

from typing import Any

import pytest
from structlog.testing import capture_logs

from adapters.contract import AdapterState
from tests.adapters.telegram.conftest import ALICE, BOB, StartTelegram
from tests.adapters.telegram.test_liveness import deaf_with_waiting, probe_grace
from tests.adapters.telegram.test_webhook import free_port, webhook_config
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import TelegramAPI
from tests.gateway.conftest import settled
from tests.waiting import eventually

QUICK = {"idle_probe_after": 1, "check_every": 0.1, "probe_timeout": 10}
BOT_API_USED = {"getMe", "getUpdates", "deleteWebhook", "setWebhook", "getWebhookInfo", "setMyCommands",
                "sendMessage", "sendChatAction", "sendMessageDraft", "editMessageText"}  # fmt: skip
"""Every Bot API method the gateway may call here: polling or the webhook, the probe, and replies."""


def events(logs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [entry for entry in logs if entry["event"] == name]


@pytest.mark.parametrize("mode", ["polling", "webhook"])
async def test_a_deaf_telegram_is_probed_and_reconnected_and_what_waited_is_answered_once_without_catching_up(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer, mode: str
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    telegram = webhook_config(free_port()) if mode == "webhook" else {}
    run = await start_telegram(telegram=telegram, tune=probe_grace(0.5), liveness=QUICK)
    await telegram_api.say(ALICE, "hello")
    await telegram_api.wait_sent(1)
    await settled(run.store)

    with capture_logs() as logs:
        if mode == "webhook":
            telegram_api.webhook_stopped = True  # Telegram stops calling the webhook, without an error
            await telegram_api.say(ALICE, "are you there?")
            await telegram_api.say(BOB, "hello?")
        else:  # getUpdates answers, empty, while the updates wait
            await deaf_with_waiting(telegram_api, (ALICE, "are you there?"), (BOB, "hello?"))
        await telegram_api.wait_sent(3)
        await settled(run.store)
        await eventually(lambda: run.adapter.status().state is AdapterState.RUNNING, "running again")

    (failed, *_) = events(logs, "adapter.probe_failed")
    assert failed["platform"] == "telegram" and failed["missed"] is True
    assert "deaf: Telegram holds 2 update(s)" in failed["detail"], failed["detail"]
    assert events(logs, "adapter.reconnecting")[0]["reason"].startswith("liveness probe failed: deaf")
    assert sorted(message.visible for message in telegram_api.sent) == ["re: are you there?", "re: hello", "re: hello?"]
    asked = [str(request.body["messages"][-1]["content"]) for request in model_server.requests]
    assert sum("are you there?" in one for one in asked) == 1 and sum("hello?" in one for one in asked) == 1
    # Nothing read back: no history call reached Telegram, and a catch-up (if the reconnect led to one) found none.
    assert {call.method for call in telegram_api.calls} <= BOT_API_USED, {call.method for call in telegram_api.calls}
    catchups = [line for line in events(logs, "adapter.catchup") if line["platform"] == "telegram"]
    assert all((line["found"], line["new"]) == (0, 0) for line in catchups), catchups
    assert not events(logs, "inbound.duplicate")

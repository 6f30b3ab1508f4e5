"""Telegram's command menu (the list behind "/"): set at start from the gateway's own command table."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from gateway.commands.parsing import KNOWN
from tests.adapters.telegram.conftest import ALICE, StartTelegram
from tests.adapters.telegram.test_webhook import free_port, webhook_config
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import TelegramAPI
from tests.fakes.telegram_api.wire import Failure
from tests.waiting import eventually

SCOPES = ("all_private_chats", "all_group_chats")


@pytest.mark.parametrize("mode", ["polling", "webhook"])
async def test_the_menu_lists_every_command_the_gateway_answers_in_dms_and_groups(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer, mode: str
) -> None:
    model_server.responder = lambda record: Text("the model answered")
    await start_telegram(telegram=webhook_config(free_port()) if mode == "webhook" else {})
    await eventually(lambda: all(scope in telegram_api.commands for scope in SCOPES), "the command menu")
    private, groups = (telegram_api.commands[scope] for scope in SCOPES)
    assert {name for name, _ in private} == set(KNOWN)  # no alias, nothing the gateway does not answer
    assert {name for name, _ in groups} <= set(KNOWN) and "new" in {name for name, _ in groups}
    assert all(description.strip() for _, description in private + groups)
    if mode == "webhook":
        return
    # Each entry, tapped in a DM, is answered as a command: none of them reaches the model.
    for name, _ in private:
        await telegram_api.say(ALICE, f"/{name}")
    await telegram_api.wait_sent(len(private))
    assert model_server.requests == []


async def test_a_refused_menu_is_logged_and_the_bot_answers_anyway(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    telegram_api.fail("setMyCommands", Failure(400, "Bad Request: BOT_COMMAND_INVALID"), Failure.server_error())
    with capture_logs() as logs:
        run = await start_telegram()
        await eventually(lambda: len(telegram_api.calls_to("setMyCommands")) == 2, "both menus to be tried")
        await telegram_api.say(ALICE, "still there?")
        [reply] = await telegram_api.wait_sent(1)
        await eventually(lambda: any(e["event"] == "telegram.commands.not_set" for e in logs), "the log line")
    assert reply.visible == "re: still there?"
    assert run.adapter.status().state == "running"
    refused = [entry for entry in logs if entry["event"] == "telegram.commands.not_set"]
    assert len(refused) == 2 and all(entry["log_level"] == "warning" for entry in refused)
    assert "BOT_COMMAND_INVALID" in refused[0]["error"] and "typed" in refused[0]["hint"]
    assert telegram_api.commands == {}

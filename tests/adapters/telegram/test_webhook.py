"""Webhook mode: the emulator POSTs updates like Telegram; only requests with the right secret get in."""

from __future__ import annotations

import socket
import sqlite3
from contextlib import closing

import aiohttp
from structlog.testing import capture_logs

from tests.adapters.telegram.conftest import ALICE, StartTelegram, TelegramRun
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import Chat, TelegramAPI
from tests.fakes.telegram_api.wire import as_bool

SECRET = "hook-secret-0123456789"


def free_port() -> int:
    with closing(socket.socket()) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def webhook_config(port: int) -> dict[str, object]:
    return {
        "mode": "webhook", "webhook_url": f"http://127.0.0.1:{port}/telegram-hook", "webhook_secret": SECRET,
        "webhook_listen": {"host": "127.0.0.1", "port": port},
    }  # fmt: skip


def stored_events(run: TelegramRun) -> set[str]:
    with closing(sqlite3.connect(run.loaded.db_path)) as db:
        return {row[0] for row in db.execute("SELECT event_id FROM inbox WHERE platform = 'telegram'")}


async def post(url: str, update: dict[str, object], headers: dict[str, str]) -> int:
    async with aiohttp.ClientSession() as session, session.post(url, json=update, headers=headers) as response:
        return response.status


def hand_made_update(update_id: int, text: str) -> dict[str, object]:
    chat = {"id": ALICE.id, "type": "private", "first_name": ALICE.first_name}
    message = {"message_id": 900 + update_id, "date": 1, "chat": chat, "from": ALICE.to_json(), "text": text}
    return {"update_id": update_id, "message": message}


async def test_updates_posted_by_telegram_with_the_secret_are_answered(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    port = free_port()
    run = await start_telegram(telegram=webhook_config(port))

    assert telegram_api.webhook is not None
    assert telegram_api.webhook["url"] == f"http://127.0.0.1:{port}/telegram-hook"
    assert telegram_api.webhook["secret_token"] == SECRET
    [set_call] = telegram_api.calls_to("setWebhook")
    assert not as_bool(set_call.params.get("drop_pending_updates"))
    assert telegram_api.calls_to("getUpdates") == []

    update = await telegram_api.say(ALICE, "through the webhook")
    [reply] = await telegram_api.wait_sent(1)
    assert reply.visible == "re: through the webhook"
    assert (update["update_id"], 200) in telegram_api.webhook_deliveries
    assert (await run.health())["adapters"]["telegram"]["state"] == "running"


async def test_requests_without_the_right_secret_are_refused_and_logged(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    telegram_api.add_chat(Chat.private(ALICE))
    port = free_port()
    run = await start_telegram(telegram=webhook_config(port))
    url = f"http://127.0.0.1:{port}/telegram-hook"

    with capture_logs() as logs:
        wrong = await post(url, hand_made_update(501, "let me in"), {"X-Telegram-Bot-Api-Secret-Token": "guess"})
        missing = await post(url, hand_made_update(502, "me too"), {})
    assert (wrong, missing) == (403, 403)
    rejected = [entry for entry in logs if entry["event"] == "telegram.webhook.rejected"]
    assert [entry["reason"] for entry in rejected] == ["wrong secret header", "missing secret header"]

    # The right secret: answered 200 only once the update is in the inbox.
    good = await post(url, hand_made_update(503, "with the secret"), {"X-Telegram-Bot-Api-Secret-Token": SECRET})
    assert good == 200
    assert stored_events(run) == {"503"}
    [reply] = await telegram_api.wait_sent(1)
    assert reply.visible == "re: with the secret"
    assert not any("let me in" in r.last_user_text or "me too" in r.last_user_text for r in model_server.requests)

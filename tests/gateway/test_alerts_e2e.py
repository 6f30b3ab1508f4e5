"""Operator alerts through the real Gateway: each condition alerts once when it begins and once when it
ends, an outage does not flood, a webhook that fails is tried again, a chat gets the alert through the
real Telegram adapter (aiogram against the emulator), and a restart sends nothing twice."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from adapters.contract import RecipientUnavailable
from config import load_config
from config.plan import build_plan
from gateway.adapter_loader import load_adapters
from gateway.agent_factory import build_agent
from gateway.app import Gateway
from gateway.operations.alerts.conditions import DiskUsage
from gateway.runner import search_function
from storage import Store
from tests.fakes.model_server import AuthFailed, InvalidRequest, ModelServer, Text
from tests.fakes.telegram_api import TelegramAPI
from tests.fakes.telegram_api.builders import Chat, User
from tests.fakes.telegram_api.wire import Failure
from tests.fakes.webhook_receiver import WebhookReceiver
from tests.gateway.conftest import GatewayFactory, delivered, write_config
from tests.gateway.test_compaction_e2e import SMALL_WINDOW, is_summary, oversized, stored_session, summary_or_echo
from tests.gateway.test_database_faults import FAST_WRITER, QUICK_RETRIES, lock_held
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines  # end-to-end turns: run once on SQLite and once on PostgreSQL

OPS_CHAT = 4242
HOOK_TOKEN = "Bearer hook-secret-9f8e7d6c5b4a"


@pytest_asyncio.fixture
async def receiver() -> AsyncIterator[WebhookReceiver]:
    hook = WebhookReceiver()
    await hook.start()
    try:
        yield hook
    finally:
        await hook.stop()


def alerts_config(receiver: WebhookReceiver, **more: Any) -> dict[str, Any]:
    return {"webhooks": [{"url": receiver.url(), "headers": {"Authorization": HOOK_TOKEN}}],
            "degraded_after_minutes": 0, **more}  # fmt: skip


class Disk:
    """The home's file system as the alerts read it: a free share the test sets (no test fills a real disk)."""

    def __init__(self, free: float = 0.5) -> None:
        self.free = free

    def __call__(self, _path: Path) -> DiskUsage:
        return DiskUsage(total=100 * 2**30, used=round((1 - self.free) * 100 * 2**30), free=round(self.free * 100 * 2**30))


@asynccontextmanager
async def telegram_gateway(home: Path, model_server: ModelServer, api: TelegramAPI, alerts: dict[str, Any],
                           *, disk: Disk | None = None, clock: Callable[[], float] | None = None,
                           ) -> AsyncIterator[Gateway]:  # fmt: skip
    """The real gateway with the real Telegram adapter (polling the emulator), built as ``switchboard run`` does."""
    path = write_config(home, model_server, {
        "platforms": {"telegram": {"token": api.token, "api_base_url": api.base_url, "allowed_users": ["1"],
                                   "poll_timeout": 1, "stall_timeout": 2},
                      "slack": {"enabled": False}, "discord": {"enabled": False}},
        "alerts": {"chats": [f"telegram:{OPS_CHAT}"], **alerts},
    })  # fmt: skip
    loaded = load_config(path, {"SWITCHBOARD_HOME": str(home)}, create_home=True)
    api.add_chat(Chat.private(User(id=OPS_CHAT, first_name="Ops")))  # the operator's DM with the bot
    store = await Store.open(loaded.db_path)
    gateway = Gateway(loaded, store, load_adapters(build_plan(loaded).enabled, loaded),
                      build_agent(loaded, search=search_function(store)), **({"clock": clock} if clock else {}))  # fmt: skip
    if disk is not None:
        gateway.alerts.watch.disk_usage = disk
    await gateway.start()
    try:
        yield gateway
    finally:
        await gateway.shutdown()


def ops_messages(api: TelegramAPI) -> list[str]:
    return [message.visible for message in api.sent_to(OPS_CHAT)]


async def checked_until(gateway: Gateway, condition: Callable[[], bool], what: str) -> None:
    """Run the alert checks (as the gateway's own loop does every 15 s) until ``condition`` holds."""

    async def check() -> bool:
        await gateway.alerts.check()
        return condition()

    await eventually(check, what)


async def test_telegram_degraded_alerts_the_chat_and_the_webhook_once_then_recovers_once(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI, receiver: WebhookReceiver
) -> None:
    async with telegram_gateway(tmp_path / "home", model_server, telegram_api, alerts_config(receiver)) as gateway:
        telegram_api.stall()  # getUpdates hangs: after stall_timeout the adapter says it is degraded
        await checked_until(gateway, lambda: len(receiver.alerts) == 1, "the webhook to get the alert")
        await telegram_api.wait_sent(1, where=lambda m: m.chat_id == OPS_CHAT)
        for _ in range(5):  # still degraded: nothing more
            await gateway.alerts.check()
        telegram_api.unstall()
        await checked_until(gateway, lambda: len(receiver.alerts) == 2, "the webhook to get the recovery")
        await telegram_api.wait_sent(2, where=lambda m: m.chat_id == OPS_CHAT)
        for _ in range(5):
            await gateway.alerts.check()
        await asyncio.sleep(0.2)  # a chance for a wrong third alert to arrive before counting
    fired, cleared = receiver.alerts
    assert (fired["condition"], fired["state"], fired["severity"], fired["platform"]) == ("adapter_down", "fired", "critical", "telegram")
    assert (cleared["condition"], cleared["state"], cleared["id"]) == ("adapter_down", "cleared", fired["id"].replace(":fired", ":cleared"))
    assert set(fired) == {"id", "condition", "state", "severity", "platform", "text", "at", "held_back", "gateway"}
    assert "Telegram has been degraded" in fired["text"] and "What to do" in fired["text"]
    assert receiver.attempts[0].headers["Authorization"] == HOOK_TOKEN
    assert receiver.attempts[0].headers["Idempotency-Key"] != receiver.attempts[1].headers["Idempotency-Key"]
    shown = ops_messages(telegram_api)
    assert len(shown) == 2 and shown[0].startswith("Switchboard alert (") and "Telegram has been degraded" in shown[0]
    assert shown[1].startswith("Switchboard recovered (") and "Telegram is running again" in shown[1]
    assert gateway.metrics.alerts.totals == {("adapter_down", "fired"): 1.0, ("adapter_down", "cleared"): 1.0}


async def test_an_outage_does_not_flood_and_what_was_held_back_is_summed_up_later(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI, receiver: WebhookReceiver
) -> None:
    disk, now = Disk(), [time.time()]
    async with telegram_gateway(tmp_path / "home", model_server, telegram_api, alerts_config(receiver, max_per_hour=2),
                                disk=disk, clock=lambda: now[0]) as gateway:  # fmt: skip
        for _ in range(3):  # the disk fills and empties three times: six alerts, two go
            disk.free = 0.01
            await gateway.alerts.check()
            disk.free = 0.5
            await gateway.alerts.check()
        await receiver.wait_alerts(2)
        await telegram_api.wait_sent(2, where=lambda m: m.chat_id == OPS_CHAT)
        assert gateway.metrics.alerts.totals[("disk_low", "suppressed")] == 8  # four alerts, two destinations
        assert b"\nswitchboard_disk_free_ratio 0.5\n" in gateway.metrics.render()
        now[0] += 3601  # an hour later the held-back alerts are summed up, once
        await gateway.alerts.check()
        await gateway.alerts.check()
        await receiver.wait_alerts(3)
        await telegram_api.wait_sent(3, where=lambda m: m.chat_id == OPS_CHAT)
    states = [(a["condition"], a["state"]) for a in receiver.alerts]
    assert states == [("disk_low", "fired"), ("disk_low", "cleared"), ("held_back", "fired")]
    assert "4 more alerts were held back" in receiver.alerts[2]["text"] and "4 x disk nearly full" in receiver.alerts[2]["text"]
    assert "4 more alerts were held back" in ops_messages(telegram_api)[2]
    assert len(receiver.alerts) == 3 and len(ops_messages(telegram_api)) == 3


async def test_a_failing_webhook_is_tried_again_until_it_takes_the_alert(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI, receiver: WebhookReceiver
) -> None:
    disk = Disk(free=0.01)
    receiver.fail_next(2, status=503)
    async with telegram_gateway(tmp_path / "home", model_server, telegram_api, alerts_config(receiver), disk=disk) as gateway:
        await checked_until(gateway, lambda: bool(receiver.attempts), "a first post")
        (alert,) = await receiver.wait_alerts(1)
        assert [post.status for post in receiver.attempts] == [503, 503, 200]
        assert len({post.headers["Idempotency-Key"] for post in receiver.attempts}) == 1  # one alert, three tries
        assert alert["condition"] == "disk_low" and "of the disk holding" in alert["text"]
        await delivered(gateway._store)  # and the outbox row says so


async def test_an_alert_waits_for_its_chat_platform_and_a_restart_sends_nothing_twice(
    tmp_path: Path, model_server: ModelServer, telegram_api: TelegramAPI, receiver: WebhookReceiver
) -> None:
    home, disk = tmp_path / "home", Disk(free=0.01)
    telegram_api.fail("sendMessage", Failure.too_many_requests(900))  # Telegram holds the chat 15 minutes
    async with telegram_gateway(home, model_server, telegram_api, alerts_config(receiver), disk=disk) as gateway:
        await checked_until(gateway, lambda: len(receiver.alerts) == 1, "the webhook to get the alert")
        await eventually(lambda: telegram_api.rate_limited == 1, "Telegram to refuse the alert")
        assert ops_messages(telegram_api) == []
    # The next start: the alert kept in the outbox goes out; the disk is still full, which is no news.
    async with telegram_gateway(home, model_server, telegram_api, alerts_config(receiver), disk=disk) as gateway:
        await telegram_api.wait_sent(1, where=lambda m: m.chat_id == OPS_CHAT)
        for _ in range(3):
            await gateway.alerts.check()
        disk.free = 0.5
        await checked_until(gateway, lambda: len(receiver.alerts) == 2, "the recovery")
        await telegram_api.wait_sent(2, where=lambda m: m.chat_id == OPS_CHAT)
    async with telegram_gateway(home, model_server, telegram_api, alerts_config(receiver), disk=disk) as gateway:
        for _ in range(3):
            await gateway.alerts.check()
        await asyncio.sleep(0.2)  # a chance for a wrong resend to arrive before counting
    assert [(a["condition"], a["state"]) for a in receiver.alerts] == [("disk_low", "fired"), ("disk_low", "cleared")]
    shown = ops_messages(telegram_api)
    assert len(shown) == 2 and "of the disk holding" in shown[0] and "has room again" in shown[1]


async def test_model_failures_alert_once_and_clear_when_a_turn_is_answered(
    start_gateway: GatewayFactory, model_server: ModelServer, receiver: WebhookReceiver
) -> None:
    running = await start_gateway({"alerts": alerts_config(receiver, model_failures=2)})
    model_server.script(AuthFailed(), AuthFailed())
    await running.adapter.inject("one", chat_id="c1")
    await running.adapter.inject("two", chat_id="c2")
    await running.adapter.wait_sent(2)  # both told the model is unavailable
    await checked_until(running.gateway, lambda: len(receiver.alerts) == 1, "the model alert")
    model_server.responder = lambda record: Text("fine again")
    await running.adapter.inject("three", chat_id="c3")
    await running.adapter.wait_sent(3)
    await checked_until(running.gateway, lambda: len(receiver.alerts) == 2, "the model's recovery")
    fired, cleared = receiver.alerts
    assert (fired["condition"], fired["state"], cleared["state"]) == ("model_failures", "fired", "cleared")
    assert "2 turns failed" in fired["text"]
    assert "one" not in fired["text"].split() and "two" not in fired["text"].split()  # no message text


@pytest.mark.sqlite_only  # holds state.db's write lock from outside
async def test_the_database_failing_writes_is_alerted_without_the_outbox_and_cleared_through_it(
    start_gateway: GatewayFactory, model_server: ModelServer, receiver: WebhookReceiver
) -> None:
    running = await start_gateway({**QUICK_RETRIES, "alerts": alerts_config(receiver)}, store_retry=FAST_WRITER)
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    model_server.gate = gate = asyncio.Event()
    await running.adapter.inject("first")
    await eventually(lambda: len(model_server.requests) == 1, "the turn to wait for the model")
    async with lock_held(running.home / "state.db"):
        gate.set()
        await eventually(lambda: running.gateway.database.problem() is not None, "the turn to meet the lock")
        await checked_until(running.gateway, lambda: len(receiver.alerts) == 1, "the database alert")
    await eventually(lambda: running.gateway.database.problem() is None, "the turn to go through")
    await checked_until(running.gateway, lambda: len(receiver.alerts) == 2, "the database's recovery")
    fired, cleared = receiver.alerts
    assert (fired["condition"], fired["state"], cleared["state"]) == ("database", "fired", "cleared")
    rows = [row for n in range(1, 20) if (row := await running.store.outbox_get(n)) is not None]
    alert_rows = [row.turn_id.split(">")[0] for row in rows if row.turn_id.startswith("alert:")]
    assert alert_rows == [f"alert:{cleared['id']}"]  # the first could not be recorded: it went without the outbox
    assert "locked by another process" in fired["text"] and "What to do" in fired["text"]


async def test_compaction_failing_repeatedly_for_a_session_is_alerted_and_clears_when_it_works(
    start_gateway: GatewayFactory, model_server: ModelServer, receiver: WebhookReceiver
) -> None:
    running = await start_gateway({**SMALL_WINDOW, "alerts": alerts_config(receiver, compaction_failures=2)})
    model_server.responder = lambda record: InvalidRequest() if is_summary(record) else summary_or_echo(record)
    session = await stored_session(running.store, oversized())
    await running.adapter.inject("and now?")
    await running.adapter.wait_sent(2)  # the notice that compaction failed, and the answer
    await running.store.add_usage(session.id, last_prompt_tokens=3500)  # still too large: hygiene tries again
    await running.adapter.inject("and again?")
    await running.adapter.wait_sent(3)
    await checked_until(running.gateway, lambda: len(receiver.alerts) == 1, "the compaction alert")
    model_server.responder = summary_or_echo
    await running.adapter.inject("and once more?")
    await running.adapter.wait_sent(4)
    await checked_until(running.gateway, lambda: len(receiver.alerts) == 2, "the compaction's recovery")
    fired, cleared = receiver.alerts
    assert (fired["condition"], fired["state"], fired["platform"]) == ("compaction_failing", "fired", "loopback")
    assert "`loopback:dm:chat-1` failed 2 times in a row" in fired["text"] and cleared["state"] == "cleared"
    assert running.gateway.metrics.compaction_failures.totals[()] == 2


async def test_replies_given_up_are_counted_alerted_and_cleared_once_replies_go_out_again(
    start_gateway: GatewayFactory, model_server: ModelServer, receiver: WebhookReceiver
) -> None:
    running = await start_gateway({"alerts": alerts_config(receiver)})
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    running.adapter.failures = [RecipientUnavailable("the bot was removed from the chat")]
    await running.adapter.inject("hello", chat_id="gone")
    await eventually(lambda: running.gateway.metrics.delivery_failed.totals, "the reply to be given up")
    assert running.gateway.metrics.delivery_failed.totals == {("loopback",): 1.0}
    rendered = running.gateway.metrics.render().decode()
    assert 'switchboard_delivery_failed_total{platform="loopback"} 1.0' in rendered
    (ratio,) = [float(line.split()[1]) for line in rendered.splitlines() if line.startswith("switchboard_disk_free_ratio ")]
    assert 0.0 < ratio < 1.0  # the home's real file system
    await checked_until(running.gateway, lambda: len(receiver.alerts) == 1, "the alert")
    await running.adapter.inject("hello again", chat_id="here")
    await running.adapter.wait_sent(1)
    await checked_until(running.gateway, lambda: len(receiver.alerts) == 2, "the recovery")
    fired, cleared = receiver.alerts
    assert (fired["condition"], fired["state"], fired["platform"], cleared["state"]) == (
        "replies_given_up", "fired", "loopback", "cleared")
    assert fired["text"].startswith("1 reply message was given up on loopback") and "hello" not in fired["text"]


async def test_a_webhook_that_refuses_the_alert_gives_it_up_at_once_without_counting_a_reply_given_up(
    start_gateway: GatewayFactory, model_server: ModelServer, receiver: WebhookReceiver
) -> None:
    receiver.fail_next(1, status=404)  # a wrong URL: trying again will not help
    running = await start_gateway({"alerts": alerts_config(receiver)})
    running.gateway.alerts.watch.disk_usage = Disk(free=0.01)
    await checked_until(running.gateway, lambda: bool(receiver.attempts), "the post")
    await delivered(running.store)
    row = await running.store.outbox_get(1)
    assert row is not None and row.status == "failed" and "answered 404" in (row.last_error or "")
    assert receiver.url() not in (row.last_error or "") and "T0KEN" not in row.turn_id + row.chat_id
    assert len(receiver.attempts) == 1 and running.gateway.metrics.delivery_failed.totals == {}

"""Telegram's liveness probe and reconnect, through real aiogram against the emulator: a connection that
answers but hears nothing is found deaf (getWebhookInfo counts the updates it never got), a reconnect
brings them, each once, and a quiet but healthy connection passes."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable

import pytest_asyncio
from structlog.testing import capture_logs

from adapters.contract import AdapterState, InboundMessage, Liveness
from adapters.telegram import TelegramAdapter, TelegramSettings
from adapters.telegram.polling import PollingSettings
from tests.adapters.telegram.conftest import ALICE, BOB, Listening, StartTelegram
from tests.adapters.telegram.test_webhook import free_port, stored_events, webhook_config
from tests.adapters.telegram.test_webhook_watch import check_every, more_checks
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import Failure, TelegramAPI
from tests.waiting import eventually

DEAF = "the liveness probe found Telegram holding updates polling never got"


def probe_grace(seconds: float) -> Callable[[TelegramAdapter], None]:
    def tune(adapter: TelegramAdapter) -> None:
        adapter.settings = dataclasses.replace(adapter.settings, probe_grace=seconds)

    return tune


def state_is(adapter: TelegramAdapter, state: AdapterState, *words: str) -> Callable[[], bool]:
    def check() -> bool:
        status = adapter.status()
        return status.state is state and all(word in status.detail for word in words)

    return check


async def deaf_with_waiting(api: TelegramAPI, *messages: tuple[object, str], **deafness: bool) -> None:
    """Make the poller's connection deaf, then have users write: the updates wait at Telegram."""
    await eventually(lambda: api.calls_to("getUpdates"), "the poller's first getUpdates")
    api.deafen(**deafness)
    polls = len(api.calls_to("getUpdates"))
    for user, text in messages:
        await api.say(user, text)  # type: ignore[arg-type]
    # The deaf connection has been asked again since the updates arrived, and gave nothing.
    await eventually(lambda: len(api.calls_to("getUpdates")) >= polls + 2, "deaf polls")


@pytest_asyncio.fixture
async def polling(listening: Listening) -> Listening:
    """The adapter alone, long polling (1 s), keeping what it receives, with a short probe grace."""
    probe_grace(0.5)(listening.adapter)
    return listening


async def test_a_deaf_poller_fails_the_probe_and_a_reconnect_brings_the_waiting_updates_once_each(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    run = await start_telegram(tune=probe_grace(0.5))
    await telegram_api.say(ALICE, "hello")
    await telegram_api.wait_sent(1)

    await deaf_with_waiting(telegram_api, (ALICE, "are you there?"), (BOB, "hello?"))
    assert run.adapter.status().state is AdapterState.RUNNING  # answering getUpdates promptly, it looks fine
    found = await run.adapter.probe_liveness([])
    assert not found.ok and found.missed, found
    assert "deaf: Telegram holds 2 update(s) that getUpdates did not deliver" in found.detail
    assert found.latency is not None
    assert len(telegram_api.sent) == 1

    with capture_logs() as logs:
        await run.adapter.reconnect(DEAF)
        assert state_is(run.adapter, AdapterState.DEGRADED, DEAF)()
        await telegram_api.wait_sent(3)
        await eventually(state_is(run.adapter, AdapterState.RUNNING, "long polling"), "running again")
    assert sorted(m.visible for m in telegram_api.sent[1:]) == ["re: are you there?", "re: hello?"]
    assert [e["reason"] for e in logs if e["event"] == "telegram.polling.restarted"] == [DEAF]
    # Telegram has been told both are done; later polls bring nothing again, and the probe passes.
    last = telegram_api.all_updates[-1]["update_id"]
    await eventually(lambda: telegram_api.confirmed_below > last, "the updates confirmed")
    assert (await run.adapter.probe_liveness([])).ok
    polls = len(telegram_api.calls_to("getUpdates"))
    await eventually(lambda: len(telegram_api.calls_to("getUpdates")) >= polls + 2, "two more polls")
    assert len(telegram_api.sent) == 3
    assert len(stored_events(run)) == 3


async def test_after_a_reconnect_health_stays_degraded_until_the_waiting_updates_flow(
    polling: Listening, telegram_api: TelegramAPI
) -> None:
    adapter = polling.adapter
    await deaf_with_waiting(telegram_api, (ALICE, "still deaf?"), until_undeafened=True)
    await adapter.reconnect(DEAF)
    # The new connection answers too, still with nothing: Telegram says one update waits, so not running.
    await eventually(state_is(adapter, AdapterState.DEGRADED, DEAF, "still returns nothing", "holds 1 update(s)"),
                     "degraded after reconnecting")  # fmt: skip
    checks = len(telegram_api.calls_to("getWebhookInfo"))
    await eventually(lambda: len(telegram_api.calls_to("getWebhookInfo")) > checks + 1, "more flow checks")
    assert adapter.status().state is AdapterState.DEGRADED
    assert polling.received == []

    await telegram_api.undeafen()
    [message] = await polling.next()
    assert message.text == "still deaf?"
    await eventually(state_is(adapter, AdapterState.RUNNING, "long polling"), "running once updates flow")


async def test_a_quiet_healthy_poller_passes_the_probe(polling: Listening, telegram_api: TelegramAPI) -> None:
    await eventually(lambda: telegram_api.answered, "polling to work")
    found = await polling.adapter.probe_liveness([])
    assert found.ok and not found.missed, found
    assert "getWebhookInfo: 0 pending" in found.detail and found.latency is not None


async def test_an_update_being_stored_is_not_taken_for_deafness(telegram_api: TelegramAPI) -> None:
    """Telegram counts an update as pending until the next getUpdates confirms it; while the intake is
    still storing it (a slow disk), that is the poller's, not a missed one."""
    storing, release = asyncio.Event(), asyncio.Event()

    async def slow(message: InboundMessage) -> None:
        storing.set()
        await release.wait()

    settings = TelegramSettings(token=telegram_api.token, api_base_url=telegram_api.base_url,
                                polling=PollingSettings(poll_timeout=1), probe_grace=0.2)  # fmt: skip
    async with TelegramAdapter(settings) as adapter:
        await adapter.start(slow)
        await telegram_api.say(ALICE, "slow to store")
        await storing.wait()
        found = await adapter.probe_liveness([])
        release.set()
    assert found.ok, found
    assert "1 pending, none beyond the 1 in hand" in found.detail


async def test_a_probe_that_cannot_reach_telegram_fails_with_the_reason(
    polling: Listening, telegram_api: TelegramAPI
) -> None:
    telegram_api.fail("getMe", Failure.server_error())
    found = await polling.adapter.probe_liveness([])
    assert found == Liveness(False, found.detail) and found.detail.startswith("getMe failed:")
    assert "Bad Gateway" in found.detail
    telegram_api.fail("getWebhookInfo", Failure.server_error())
    found = await polling.adapter.probe_liveness([])
    assert not found.ok and not found.missed and "getWebhookInfo failed" in found.detail


async def test_a_webhook_telegram_stopped_calling_fails_the_probe_and_registering_it_again_brings_the_updates(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    run = await start_telegram(telegram=webhook_config(free_port()), tune=probe_grace(0.5))
    await telegram_api.say(ALICE, "hello")
    await telegram_api.wait_sent(1)
    assert (await run.adapter.probe_liveness([])).ok

    telegram_api.webhook_stopped = True
    await telegram_api.say(ALICE, "anyone?")
    await telegram_api.say(BOB, "hello?")
    found = await run.adapter.probe_liveness([])
    assert not found.ok and found.missed, found
    assert "deaf: Telegram holds 2 update(s) that the webhook did not deliver" in found.detail
    registrations = len(telegram_api.calls_to("setWebhook"))

    await run.adapter.reconnect("the probe found the webhook deaf")
    assert state_is(run.adapter, AdapterState.DEGRADED, "the probe found the webhook deaf")()
    await telegram_api.wait_sent(3)
    await eventually(state_is(run.adapter, AdapterState.RUNNING, "webhook"), "running again")
    assert len(telegram_api.calls_to("setWebhook")) == registrations + 1
    assert sorted(m.visible for m in telegram_api.sent[1:]) == ["re: anyone?", "re: hello?"]
    await eventually(lambda: not telegram_api.updates, "Telegram holding nothing")
    assert (await run.adapter.probe_liveness([])).ok
    assert len(telegram_api.sent) == 3


async def test_a_webhook_replaced_by_another_client_fails_the_probe(
    start_telegram: StartTelegram, telegram_api: TelegramAPI
) -> None:
    run = await start_telegram(telegram=webhook_config(free_port()))
    await telegram_api.replace_webhook("https://elsewhere.example/hook")
    found = await run.adapter.probe_liveness([])
    assert not found.ok and "https://elsewhere.example/hook registered instead of our webhook" in found.detail


async def test_a_failed_reregistration_keeps_the_webhook_degraded_through_quiet_checks(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    """The watchdog's regular check sees no delivery error while Telegram silently holds updates: after a
    reconnect was asked for, only an update reaching the webhook (or none waiting) means running again."""
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    run = await start_telegram(telegram=webhook_config(free_port()), tune=check_every(0.05))
    telegram_api.webhook_stopped = True
    await telegram_api.say(ALICE, "anyone?")
    telegram_api.fail("setWebhook", Failure.server_error())
    with capture_logs() as logs:
        await run.adapter.reconnect("the probe found the webhook deaf")
        await eventually(state_is(run.adapter, AdapterState.DEGRADED, "again failed", "Bad Gateway"), "refused")
    assert [e["error"] for e in logs if e["event"] == "telegram.webhook.reregister_failed"] == [
        "Telegram server says - Bad Gateway"
    ]
    await more_checks(telegram_api, 3)
    assert run.adapter.status().state is AdapterState.DEGRADED

    await run.adapter.reconnect("the probe found the webhook deaf")
    [reply] = await telegram_api.wait_sent(1)
    assert reply.visible == "re: anyone?"
    await eventually(state_is(run.adapter, AdapterState.RUNNING, "webhook"), "running again")

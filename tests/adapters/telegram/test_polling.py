"""Long polling that stays honest: nothing dropped at start or restart, stalls and 409s visible in /health."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from structlog.testing import capture_logs

from adapters.telegram import TelegramAdapter
from adapters.telegram.polling import PollingSettings
from tests.adapters.telegram.conftest import ALICE, BOB, StartTelegram, TelegramRun
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import Call, Failure, TelegramAPI
from tests.waiting import eventually


def polling_timings(**changes: float) -> Callable[[TelegramAdapter], None]:
    def tune(adapter: TelegramAdapter) -> None:
        adapter.settings = dataclasses.replace(adapter.settings, polling=dataclasses.replace(adapter.settings.polling, **changes))

    return tune


def health_matches(run: TelegramRun, state: str, words: str) -> Callable[[], object]:
    async def check() -> bool:
        status = (await run.health())["adapters"]["telegram"]
        return status["state"] == state and words in status["detail"]

    return check


async def test_messages_sent_while_the_gateway_was_down_are_answered_at_start(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    await telegram_api.say(ALICE, "are you up?")
    await telegram_api.say(BOB, "hello from before")
    await start_telegram()
    sent = await telegram_api.wait_sent(2)
    assert sorted((m.chat_id, m.visible) for m in sent) == [(ALICE.id, "re: are you up?"), (BOB.id, "re: hello from before")]


async def test_a_restart_neither_loses_nor_repeats_messages(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("re: " + record.last_user_text)
    first = await start_telegram()
    done = await telegram_api.say(ALICE, "before the restart")
    await telegram_api.wait_sent(1)
    await eventually(lambda: _inbox_settled(first), "the first message to be finished")
    await first.gateway.shutdown()
    # Stopping told Telegram the update is handled, so the next start does not even fetch it again.
    assert telegram_api.confirmed_below > done["update_id"]

    await telegram_api.say(ALICE, "while it was down")
    await start_telegram()
    await telegram_api.say(ALICE, "after the restart")
    await telegram_api.wait_for(lambda: "after the restart" in " ".join(m.visible for m in telegram_api.sent))
    texts = [m.visible for m in telegram_api.sent]
    assert texts[0] == "re: before the restart"
    assert " ".join(texts[1:]).count("while it was down") == 1
    assert len(model_server.requests) == len(texts)


async def _inbox_settled(run: TelegramRun) -> bool:
    return not await run.store.inbox_unfinished()


async def test_a_409_conflict_is_reported_in_health_and_the_log_and_retried_slowly(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("back")
    telegram_api.conflict = True
    with capture_logs() as logs:
        run = await start_telegram(tune=polling_timings(conflict_retry=0.5))
        await eventually(health_matches(run, "failed", "another process is polling this bot token"), "a 409 in health")
        await eventually(lambda: len(telegram_api.calls_to("getUpdates")) >= 3, "two retries")
        attempts = telegram_api.calls_to("getUpdates")
        assert all(later.at - earlier.at >= 0.5 for earlier, later in zip(attempts, attempts[1:]))

        telegram_api.conflict = False
        await telegram_api.say(ALICE, "hello again")
        [reply] = await telegram_api.wait_sent(1)
        await eventually(health_matches(run, "running", "long polling"), "recovery in health")
    assert reply.visible == "back"
    conflicts = [entry for entry in logs if entry["event"] == "telegram.polling.conflict"]
    assert conflicts and conflicts[0]["log_level"] == "error"
    assert "stop the other instance" in conflicts[0]["hint"]
    assert any(entry["event"] == "telegram.polling.recovered" for entry in logs)


async def test_the_watchdog_restarts_polling_on_a_new_connection_when_getupdates_stalls(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("still here")
    with capture_logs() as logs:
        run = await start_telegram(telegram={"poll_timeout": 1, "stall_timeout": 2})
        await eventually(lambda: len(telegram_api.calls_to("getUpdates")) >= 2, "polling to run")
        telegram_api.stall()
        await eventually(health_matches(run, "degraded", "getUpdates made no progress"), "the stall in health")
        stalled_port = telegram_api.calls_to("getUpdates")[-1].client_port

        await telegram_api.say(ALICE, "are you there?")
        telegram_api.unstall()
        [reply] = await telegram_api.wait_sent(1)
        await eventually(health_matches(run, "running", "long polling"), "recovery in health")
    assert reply.visible == "still here"
    assert any(entry["event"] == "telegram.polling.stalled" for entry in logs)
    assert telegram_api.calls_to("getUpdates")[-1].client_port != stalled_port


def _long_poll(call: Call) -> bool:
    return call.method == "getUpdates" and float(call.params.get("timeout") or 0) > 0


async def test_health_is_running_again_on_the_first_getupdates_that_works_not_after_a_long_poll(
    start_telegram: StartTelegram, telegram_api: TelegramAPI
) -> None:
    # Telegram answers 502 twice, then works again. With a 50 s long poll and no news, waiting for
    # that poll to come back would leave /health degraded for 50 s after Telegram recovered.
    telegram_api.fail("getUpdates", Failure.server_error(), Failure.server_error())
    with capture_logs() as logs:
        run = await start_telegram(telegram={"poll_timeout": 50, "stall_timeout": 120},
                                   tune=polling_timings(retry_base=0.05, retry_max=0.1))  # fmt: skip
        # "getUpdates timeout" is in the detail only once a getUpdates has come back after the start.
        await eventually(health_matches(run, "running", "getUpdates timeout 50 s"), "recovery in health")
        failed = telegram_api.calls_to("getUpdates")[:2]
        answered = [call for call in telegram_api.answered if _long_poll(call) and call not in failed]
        assert not answered, "running came only once a long poll had come back"
        # Long polling goes on: the next request waits the full 50 s for news.
        await eventually(lambda: any(_long_poll(call) for call in telegram_api.calls), "a long poll")
    errors = [entry for entry in logs if entry["event"] == "telegram.polling.error"]
    assert len(errors) == 2
    assert any(entry["event"] == "telegram.polling.recovered" for entry in logs)


def test_the_pause_stays_at_its_ceiling_through_a_long_outage() -> None:
    """Failures are counted for as long as an outage lasts (1,025 of them at 60 s is 17 hours): the pause
    stays at its ceiling instead of the formula overflowing and ending the polling loop."""
    settings = PollingSettings()
    assert 0.75 * settings.retry_max <= settings.backoff(1025) <= settings.retry_max

"""Connection supervision: resume after a drop, final failures reported and not retried, restarts with backoff."""

from __future__ import annotations

import pytest
from structlog.testing import capture_logs

from adapters.contract import AdapterError, AdapterState
from adapters.discord import DiscordAdapter
from adapters.discord.adapter import DiscordSettings
from adapters.discord.supervisor import Backoff
from tests.adapters.discord.conftest import ALICE, Collected, StartGateway
from tests.fakes.discord_api import MESSAGE_CONTENT_INTENT, DiscordEmulator
from tests.waiting import eventually


def adapter_for(emulator: DiscordEmulator, **settings: object) -> DiscordAdapter:
    values: dict = {"token": emulator.token, "api_base_url": emulator.api_base_url, "gateway_url": emulator.gateway_url}
    values.update(settings)
    return DiscordAdapter(DiscordSettings(**values), backoff=Backoff(first=0.05, limit=0.2))


async def test_a_dropped_websocket_resumes_and_no_message_is_lost(
    start_gateway: StartGateway, emulator: DiscordEmulator
) -> None:
    run = await start_gateway()
    gateway = emulator.gateway
    assert gateway is not None
    await emulator.dm(ALICE, "before the drop")
    await emulator.wait_sent(1)
    session_id = gateway.current.id if gateway.current else None

    await gateway.drop(hold=True)
    await eventually(lambda: run.discord.status().state is AdapterState.DEGRADED)
    missed = await emulator.dm(ALICE, "sent while the bot was away")  # kept by the session for replay
    gateway.release()

    sent = await emulator.wait_sent(2)
    assert str(sent[1].reference["message_id"]) == missed["id"]
    (resume,) = gateway.resumes
    assert resume["session_id"] == session_id and resume["token"] == emulator.token
    assert len(gateway.identifies) == 1  # resumed, not identified afresh
    await eventually(lambda: run.discord.status().state is AdapterState.RUNNING)
    assert "resumed" in run.discord.status().detail


async def test_a_4014_close_fails_clearly_without_retrying_and_other_adapters_keep_answering(
    start_gateway: StartGateway, emulator: DiscordEmulator
) -> None:
    with capture_logs() as logs:
        run = await start_gateway(with_loopback=True, message_content_intent=True)
    gateway = emulator.gateway
    assert gateway is not None and gateway.closes == [4014]
    assert gateway.identifies[0]["intents"] & MESSAGE_CONTENT_INTENT

    status = run.discord.status()
    assert status.state is AdapterState.FAILED
    assert "Privileged Gateway Intents -> Message Content Intent" in status.detail
    assert "message_content_intent: false" in status.detail
    failed = [entry for entry in logs if entry["event"] == "adapter.start_failed"]
    assert failed and "4014" in failed[0]["error"]
    assert any(entry["event"] == "discord.failed" and entry["retrying"] is False for entry in logs)

    assert run.loopback is not None
    await run.loopback.inject("still there?")
    (reply,) = await run.loopback.wait_sent(1)
    assert reply.text.startswith("ok: still there?")
    health = await run.gateway.snapshot()
    assert health["adapters"]["discord"]["state"] == "failed"
    assert health["adapters"]["loopback"]["state"] == "running"
    # By now a retry loop would have identified again: the one attempt stays the only one.
    assert len(gateway.identifies) == 1 and gateway.connections == 1
    assert run.discord.restarts == 0  # type: ignore[attr-defined]


async def test_a_rejected_token_at_the_gateway_4004_is_final(emulator: DiscordEmulator) -> None:
    assert emulator.gateway is not None
    emulator.gateway.reject_next_identify = 4004
    adapter = adapter_for(emulator)
    try:
        with pytest.raises(AdapterError, match="4004.*Reset Token"):
            await adapter.start(Collected())
        assert adapter.status().state is AdapterState.FAILED
        assert "DISCORD_BOT_TOKEN" in adapter.status().detail
        assert adapter.restarts == 0 and len(emulator.gateway.identifies) == 1
    finally:
        await adapter.close()
    assert adapter.status().state is AdapterState.FAILED  # closing keeps the reason visible


async def test_a_token_refused_at_login_is_final(emulator: DiscordEmulator) -> None:
    adapter = adapter_for(emulator, token="not-the-token")
    try:
        with pytest.raises(AdapterError, match="rejected the bot token"):
            await adapter.start(Collected())
        assert adapter.restarts == 0
        assert emulator.world.rest_calls == [("GET", "/users/@me")]  # one login attempt, no gateway connection
    finally:
        await adapter.close()


async def test_a_transient_login_failure_is_retried_in_the_background(emulator: DiscordEmulator) -> None:
    emulator.world.login_failures = 2
    adapter = adapter_for(emulator)
    intake = Collected()
    try:
        with capture_logs() as logs:
            await adapter.start(intake)  # the first failure does not fail the start
            assert adapter.status().state in (AdapterState.DEGRADED, AdapterState.RUNNING)
            await eventually(lambda: adapter.status().state is AdapterState.RUNNING)
        assert adapter.restarts == 2
        restarts = [entry for entry in logs if entry["event"] == "discord.restarting"]
        assert [entry["attempt"] for entry in restarts] == [1, 2]
        assert "DiscordServerError" in restarts[0]["reason"]
        await emulator.dm(ALICE, "hello after the outage")
        (message,) = await intake.wait(1)
        assert message.text == "hello after the outage"
    finally:
        await adapter.close()
    assert adapter.status().state is AdapterState.STOPPED


async def test_a_session_that_cannot_be_resumed_is_identified_afresh(
    start_gateway: StartGateway, emulator: DiscordEmulator
) -> None:
    run = await start_gateway()
    gateway = emulator.gateway
    assert gateway is not None
    await gateway.drop(hold=True)
    gateway.forget_sessions()
    gateway.release()
    await eventually(lambda: len(gateway.identifies) == 2)
    assert len(gateway.resumes) == 1  # tried to resume first, was refused, then identified
    await eventually(lambda: run.discord.status().state is AdapterState.RUNNING)
    message = await emulator.dm(ALICE, "on the new session")
    (sent,) = await emulator.wait_sent(1)
    assert str(sent.reference["message_id"]) == message["id"]
    assert run.discord.restarts == 0  # type: ignore[attr-defined]  # discord.py handled it; no client rebuild


def test_the_reconnect_delay_stays_at_its_ceiling_through_a_long_outage() -> None:
    """The attempt count grows for as long as the outage lasts (1,025 attempts at up to 5 min is days): the delay
    stays at its ceiling instead of the formula overflowing and ending the supervisor."""
    backoff = Backoff()
    assert backoff.limit / 2 <= backoff.delay(1025) <= backoff.limit

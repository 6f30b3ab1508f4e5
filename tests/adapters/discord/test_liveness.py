"""Noticing a Discord connection that hears nothing, rebuilding it on request, and reporting the gaps a new session
leaves (real discord.py against the emulator's deaf mode and lost sessions)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field

import pytest_asyncio

from adapters.contract import AdapterState, CatchUpPoint, ChatType, OutboundMessage
from adapters.discord import DiscordAdapter
from adapters.discord.adapter import DiscordSettings
from adapters.discord.supervisor import Backoff
from tests.adapters.discord.conftest import ALICE, Collected
from tests.fakes.discord_api import DiscordEmulator
from tests.waiting import eventually

@dataclass
class Watched:
    adapter: DiscordAdapter
    intake: Collected
    gaps: list[str] = field(default_factory=list)


async def watched(emulator: DiscordEmulator, **settings: object) -> Watched:
    values: dict = {"token": emulator.token, "api_base_url": emulator.api_base_url, "gateway_url": emulator.gateway_url}
    values.update(settings)
    adapter = DiscordAdapter(DiscordSettings(**values), backoff=Backoff(first=0.05, limit=0.2), probe_grace=0.05)
    run = Watched(adapter, Collected())
    adapter.on_gap = run.gaps.append
    await adapter.start(run.intake)
    return run


@pytest_asyncio.fixture
async def run(emulator: DiscordEmulator) -> AsyncIterator[Watched]:
    running = await watched(emulator)
    try:
        yield running
    finally:
        await running.adapter.close()


def dm_point(emulator: DiscordEmulator, after: str | None) -> CatchUpPoint:
    return CatchUpPoint(emulator.world.dm_channel_for(ALICE), ChatType.DM, after=after)


async def test_a_healthy_connection_passes_the_probe(emulator: DiscordEmulator, run: Watched) -> None:
    first = await emulator.dm(ALICE, "hello")
    await run.intake.wait(1)
    await eventually(lambda: run.adapter.status().state is AdapterState.RUNNING)
    before = len(emulator.world.rest_calls)

    result = await run.adapter.probe_liveness([dm_point(emulator, first["id"])])

    assert result.ok and not result.missed, result.detail
    assert result.latency is not None and result.latency >= 0
    assert "heartbeat" in result.detail and "GET /users/@me" in result.detail
    channel = emulator.world.dm_channel_for(ALICE)
    assert emulator.world.rest_calls[before:] == [("GET", "/users/@me"), ("GET", f"/channels/{channel}/messages")]


async def test_a_deaf_connection_fails_the_probe_with_missed(emulator: DiscordEmulator, run: Watched) -> None:
    assert emulator.gateway is not None
    first = await emulator.dm(ALICE, "hello")
    await run.intake.wait(1)
    emulator.gateway.deaf = True
    unheard = await emulator.dm(ALICE, "are you there?")
    assert emulator.gateway.swallowed == [unheard["id"]]

    result = await run.adapter.probe_liveness([dm_point(emulator, first["id"])])

    assert not result.ok and result.missed, result.detail
    assert unheard["id"] in result.detail and emulator.world.dm_channel_for(ALICE) in result.detail
    assert "are you there" not in result.detail  # ids only, never what users wrote
    assert len(run.intake.messages) == 1


async def test_the_bots_own_message_after_an_unheard_one_does_not_hide_it(
    emulator: DiscordEmulator, run: Watched
) -> None:
    assert emulator.gateway is not None
    first = await emulator.dm(ALICE, "hello")
    await run.intake.wait(1)
    emulator.gateway.deaf = True
    unheard = await emulator.dm(ALICE, "still there?")
    # The bot itself wrote there since (an operator alert, say): the newest message is its own.
    await run.adapter.send(OutboundMessage(chat_id=emulator.world.dm_channel_for(ALICE), text="an alert"))

    result = await run.adapter.probe_liveness([dm_point(emulator, first["id"])])

    assert result.missed and unheard["id"] in result.detail, result.detail


async def test_messages_it_received_or_stored_do_not_count_as_missed(emulator: DiscordEmulator, run: Watched) -> None:
    await emulator.dm(ALICE, "one")
    second = await emulator.dm(ALICE, "two")
    await run.intake.wait(2)
    # The gateway knows only the first; the second came over the socket all the same.
    result = await run.adapter.probe_liveness([dm_point(emulator, None)])
    assert result.ok and not result.missed, result.detail
    # A fresh adapter (a restarted process) knows the second from the point alone.
    await run.adapter.close()
    fresh = await watched(emulator)
    try:
        result = await fresh.adapter.probe_liveness([dm_point(emulator, second["id"])])
        assert result.ok and not result.missed, result.detail
    finally:
        await fresh.adapter.close()


async def test_an_unreachable_discord_fails_the_probe_without_raising(emulator: DiscordEmulator, run: Watched) -> None:
    emulator.world.login_failures = 5  # GET /users/@me answers 503
    result = await run.adapter.probe_liveness([])
    assert not result.ok and not result.missed
    assert "GET /users/@me" in result.detail and "503" in result.detail


async def test_a_lost_session_reports_a_gap_a_resumed_one_does_not(emulator: DiscordEmulator, run: Watched) -> None:
    gateway = emulator.gateway
    assert gateway is not None
    await gateway.drop(hold=True)
    gateway.release()
    await eventually(lambda: len(gateway.resumes) == 1 and run.adapter.status().state is AdapterState.RUNNING)
    assert run.gaps == [] and len(gateway.identifies) == 1

    await gateway.invalidate(hold=True)
    await eventually(lambda: run.adapter.status().state is AdapterState.DEGRADED)
    lost = await emulator.dm(ALICE, "sent while the session was being replaced")
    gateway.release()
    await eventually(lambda: run.gaps, "a gap reported after the new IDENTIFY")
    assert len(gateway.identifies) == 2 and len(run.gaps) == 1
    assert "IDENTIFY" in run.gaps[0]
    assert gateway.swallowed == [lost["id"]] and run.intake.messages == []


async def test_reconnect_on_request_identifies_afresh_and_reports_the_gap(
    emulator: DiscordEmulator, run: Watched
) -> None:
    gateway = emulator.gateway
    assert gateway is not None
    await run.adapter.reconnect("the probe found a message it never received")
    status = run.adapter.status()
    assert status.state is AdapterState.DEGRADED and "never received" in status.detail

    await eventually(lambda: run.gaps, "a gap reported after the new IDENTIFY")
    assert len(gateway.identifies) == 2 and gateway.resumes == []
    await eventually(lambda: run.adapter.status().state is AdapterState.RUNNING)
    assert len(run.gaps) == 1 and run.adapter.restarts == 1
    message = await emulator.dm(ALICE, "on the new session")
    (received,) = await run.intake.wait(1)
    assert received.event_id == message["id"]
    result = await run.adapter.probe_liveness([dm_point(emulator, message["id"])])
    assert result.ok, result.detail

"""Buttons under a message through real discord.py: sent as a row of components, pressed through the emulator's
gateway (INTERACTION_CREATE), acknowledged with a deferred update, handed to ``on_button``, and removed by
``close_choice``."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from structlog.testing import capture_logs

from adapters.contract import Button, ButtonPress
from adapters.discord import DiscordAdapter
from adapters.discord.adapter import DiscordSettings
from tests.adapters.discord.conftest import ALICE, Collected, StartGateway
from tests.fakes.discord_api import DiscordEmulator
from tests.waiting import eventually

CHOICE = (Button("allow:7", "Allow", "primary"), Button("deny:7", "Deny", "danger"), Button("later:7", "Later"))
DEFERRED_UPDATE = 6


class Presses:
    """An ``on_button`` listener that keeps every press."""

    def __init__(self) -> None:
        self.got: list[ButtonPress] = []

    async def __call__(self, press: ButtonPress) -> None:
        self.got.append(press)


async def running(emulator: DiscordEmulator, **settings: Any) -> tuple[DiscordAdapter, Presses]:
    adapter = DiscordAdapter(DiscordSettings(token=emulator.token, api_base_url=emulator.api_base_url,
                                             gateway_url=emulator.gateway_url, **settings))  # fmt: skip
    presses = Presses()
    adapter.on_button = presses
    await adapter.start(Collected())
    return adapter, presses


@pytest_asyncio.fixture
async def pressable(emulator: DiscordEmulator) -> AsyncIterator[tuple[DiscordAdapter, Presses]]:
    adapter, presses = await running(emulator)
    try:
        yield adapter, presses
    finally:
        await adapter.close()


async def test_a_choice_is_a_row_of_buttons_under_the_plain_text(
    emulator: DiscordEmulator, pressable: tuple[DiscordAdapter, Presses]
) -> None:
    adapter, _ = pressable
    assert adapter.supports_buttons
    message_id = await adapter.send_choice(emulator.world.channel_id, "Run github__search_issues?", CHOICE)

    (sent,) = emulator.world.sent
    assert sent.id == message_id
    assert sent.content == "Run github\\_\\_search\\_issues?"  # shown as written, not underlined
    (row,) = sent.components
    assert row["type"] == 1
    shown = [(item["custom_id"], item["label"], item["style"]) for item in row["components"]]
    assert shown == [("allow:7", "Allow", 1), ("deny:7", "Deny", 4), ("later:7", "Later", 2)]


async def test_a_press_is_acknowledged_and_handed_over_once(
    emulator: DiscordEmulator, pressable: tuple[DiscordAdapter, Presses]
) -> None:
    adapter, presses = pressable
    message_id = await adapter.send_choice(emulator.world.channel_id, "Allow the tool?", CHOICE)

    pressed = await emulator.press(message_id, "deny:7", ALICE)

    assert (await emulator.wait_acknowledged(pressed))["type"] == DEFERRED_UPDATE
    await eventually(lambda: presses.got)
    second = await emulator.press(message_id, "allow:7", ALICE)  # later presses come too, each once
    await eventually(lambda: len(presses.got) == 2)
    assert presses.got == [
        ButtonPress(platform="discord", chat_id=emulator.world.channel_id, user_id=ALICE, button_id=button,
                    message_id=message_id, thread_id=None, user_name=emulator.world.user(ALICE)["global_name"])
        for button in ("deny:7", "allow:7")
    ]  # fmt: skip
    assert [len(one.callbacks) for one in (pressed, second)] == [1, 1]


async def test_a_press_in_a_thread_belongs_to_its_channel_and_a_dm_press_to_the_dm(
    emulator: DiscordEmulator, pressable: tuple[DiscordAdapter, Presses]
) -> None:
    adapter, presses = pressable
    world = emulator.world
    in_thread = await adapter.send_choice(world.channel_id, "In the thread?", CHOICE, thread_id=world.thread_id)
    dm = world.dm_channel_for(ALICE)
    in_dm = await adapter.send_choice(dm, "In the DM?", CHOICE)
    assert world.messages[in_thread]["channel_id"] == world.thread_id

    await emulator.press(in_thread, "allow:7", ALICE)
    await eventually(lambda: len(presses.got) == 1)
    await emulator.press(in_dm, "deny:7", ALICE)
    await eventually(lambda: len(presses.got) == 2)

    thread_press, dm_press = presses.got
    assert (thread_press.chat_id, thread_press.thread_id, thread_press.message_id) == (
        world.channel_id, world.thread_id, in_thread)  # fmt: skip
    assert (dm_press.chat_id, dm_press.thread_id, dm_press.message_id, dm_press.button_id) == (
        dm, None, in_dm, "deny:7")  # fmt: skip


async def test_closing_a_choice_replaces_its_text_and_removes_the_buttons(
    emulator: DiscordEmulator, pressable: tuple[DiscordAdapter, Presses]
) -> None:
    adapter, _ = pressable
    thread = emulator.world.thread_id
    message_id = await adapter.send_choice(emulator.world.channel_id, "Allow?", CHOICE, thread_id=thread)

    await adapter.close_choice(emulator.world.channel_id, message_id, "Allowed: run_query")

    (edit,) = emulator.world.edits
    assert (edit.channel_id, edit.message_id, edit.content, edit.components) == (
        thread, message_id, "Allowed: run\\_query", ())  # fmt: skip
    assert emulator.world.messages[message_id]["components"] == []
    with pytest.raises(ValueError, match="shows no button"):
        await emulator.press(message_id, "allow:7", ALICE)


async def test_a_press_where_the_bot_does_not_answer_is_acknowledged_and_not_handed_over(
    emulator: DiscordEmulator, start_gateway: StartGateway
) -> None:
    run = await start_gateway(allowed_channels=["200000000000000099"])  # from config.yaml, as the gateway reads it
    presses = Presses()
    adapter = run.discord
    adapter.on_button = presses
    world = emulator.world
    refused = await adapter.send_choice(world.channel_id, "Allow?", CHOICE)
    taken = await adapter.send_choice(world.dm_channel_for(ALICE), "Allow?", CHOICE)  # DMs are always answered
    with capture_logs() as logs:
        ignored = await emulator.press(refused, "allow:7", ALICE)
        await emulator.wait_acknowledged(ignored)
        await eventually(lambda: [line for line in logs if line["event"] == "discord.button.ignored"])
    await emulator.press(taken, "allow:7", ALICE)
    await eventually(lambda: presses.got)

    assert [press.message_id for press in presses.got] == [taken]
    (line,) = [line for line in logs if line["event"] == "discord.button.ignored"]
    assert line["reason"] == f"channel {world.channel_id} is not in allowed_channels"


async def test_a_failing_listener_is_logged_and_later_presses_still_come(
    emulator: DiscordEmulator, pressable: tuple[DiscordAdapter, Presses]
) -> None:
    adapter, presses = pressable
    kept = presses

    async def failing(press: ButtonPress) -> None:
        await kept(press)
        if len(kept.got) == 1:
            raise RuntimeError("the approvals service broke")

    adapter.on_button = failing
    message_id = await adapter.send_choice(emulator.world.channel_id, "Allow?", CHOICE)
    with capture_logs() as logs:
        await emulator.press(message_id, "allow:7", ALICE)
        await eventually(lambda: [line for line in logs if line["event"] == "discord.button.failed"])
    await emulator.press(message_id, "deny:7", ALICE)
    await eventually(lambda: len(kept.got) == 2)
    assert emulator.gateway is not None and len(emulator.gateway.identifies) == 1  # the connection went on


async def test_a_sending_only_adapter_shows_and_closes_choices(emulator: DiscordEmulator) -> None:
    adapter = DiscordAdapter(DiscordSettings(token=emulator.token, api_base_url=emulator.api_base_url,
                                             gateway_url=emulator.gateway_url))  # fmt: skip
    await adapter.start(Collected(), receive=False)
    try:
        message_id = await adapter.send_choice(emulator.world.channel_id, "Allow?", CHOICE)
        await adapter.close_choice(emulator.world.channel_id, message_id, "Denied")
    finally:
        await adapter.close()
    assert emulator.world.messages[message_id]["components"] == []
    assert emulator.gateway is not None and emulator.gateway.identifies == []  # never held the gateway


async def test_discord_has_its_ack_before_the_listener_is_done(
    emulator: DiscordEmulator, pressable: tuple[DiscordAdapter, Presses]
) -> None:
    adapter, _ = pressable
    release = asyncio.Event()
    handed: list[ButtonPress] = []

    async def slow(press: ButtonPress) -> None:
        handed.append(press)
        await release.wait()

    adapter.on_button = slow
    message_id = await adapter.send_choice(emulator.world.channel_id, "Allow?", CHOICE)
    try:
        pressed = await emulator.press(message_id, "allow:7", ALICE)
        await emulator.wait_acknowledged(pressed)
        await eventually(lambda: handed)
    finally:
        release.set()

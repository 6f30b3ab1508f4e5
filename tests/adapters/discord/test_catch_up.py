"""Reading what a lost session missed from the channels' history (real discord.py against the emulator): the
messages the socket never delivered, converted as live ones, inside the window's bounds."""

from __future__ import annotations

import time

from adapters.contract import CatchUpPoint, CatchUpWindow, ChatType, InboundMessage, OutboundMessage
from adapters.discord import DiscordAdapter
from tests.adapters.discord.conftest import ALICE, BOB, Collected, started
from tests.fakes.discord_api import DiscordEmulator
from tests.fakes.discord_api.payloads import created_at
from tests.waiting import eventually

OTHER_BOT = "400000000000000001"
WIDE = CatchUpWindow(since=0.0)


def dm_point(emulator: DiscordEmulator, user: str, after: str | None) -> CatchUpPoint:
    return CatchUpPoint(emulator.world.dm_channel_for(user), ChatType.DM, after=after)


def thread_point(emulator: DiscordEmulator, after: str | None) -> CatchUpPoint:
    world = emulator.world
    return CatchUpPoint(world.channel_id, ChatType.GROUP, thread_id=world.thread_id, after=after)


def ids(messages: list[InboundMessage]) -> list[str]:
    return [message.event_id for message in messages]


async def test_catch_up_returns_exactly_the_missed_messages_as_live_ones(
    emulator: DiscordEmulator, listening: tuple[DiscordAdapter, Collected]
) -> None:
    discord, intake = listening
    gateway = emulator.gateway
    assert gateway is not None
    # One message of each kind arrives live first: what catch-up returns must equal what live gave.
    await emulator.dm(ALICE, "live dm")
    await emulator.server_message(BOB, "live thread", mention=True, in_thread=True)
    live_dm, live_thread = await intake.wait(2)

    await gateway.invalidate(hold=True)
    missed = [
        await emulator.dm(ALICE, "first while away"),
        await emulator.server_message(BOB, "in the thread while away", mention=True, in_thread=True),
        await emulator.dm(ALICE, "second while away"),
    ]
    gateway.release()
    await eventually(lambda: len(gateway.identifies) == 2)

    points = [dm_point(emulator, ALICE, live_dm.event_id), thread_point(emulator, live_thread.event_id)]
    found = await discord.catch_up(points, WIDE)

    assert ids(found) == [item["id"] for item in missed]  # oldest first, across the points
    assert [message.message_id for message in found] == ids(found)
    assert [message.text for message in found] == ["first while away", "in the thread while away",
                                                    "second while away"]  # fmt: skip
    first, threaded, _ = found
    assert (first.chat_id, first.chat_type, first.thread_id, first.server_id) == (
        live_dm.chat_id, ChatType.DM, None, None)  # fmt: skip
    assert (threaded.chat_id, threaded.thread_id, threaded.server_id, threaded.chat_type) == (
        live_thread.chat_id, live_thread.thread_id, live_thread.server_id, ChatType.GROUP)  # fmt: skip
    assert threaded.mentioned and threaded.text == "in the thread while away"  # the mention is stripped as live
    assert first.user_id == ALICE and first.user_name == live_dm.user_name and not first.from_bot
    assert first.timestamp == created_at(missed[0]["id"]).timestamp()
    assert len(intake.messages) == 2  # catch-up hands back, it does not feed intake itself

    # Once the session is back, the same message arrives live with the id catch-up gave it.
    more = await emulator.dm(ALICE, "after the gap")
    assert (await intake.wait(3))[2].event_id == more["id"]


async def test_own_and_other_bots_messages_are_left_out(
    emulator: DiscordEmulator, listening: tuple[DiscordAdapter, Collected]
) -> None:
    discord, intake = listening
    assert emulator.gateway is not None
    await emulator.server_message(ALICE, "start", mention=True, in_thread=True)
    (start,) = await intake.wait(1)
    emulator.gateway.deaf = True
    wanted = await emulator.server_message(ALICE, "from a person", mention=True, in_thread=True)
    await discord.send(OutboundMessage(chat_id=emulator.world.channel_id, thread_id=emulator.world.thread_id,
                                       text="the bot's own words"))  # fmt: skip
    await emulator.server_message(OTHER_BOT, "beep", mention=True, in_thread=True, bot_author=True)

    found = await discord.catch_up([thread_point(emulator, start.event_id)], WIDE)
    assert ids(found) == [wanted["id"]]


async def test_allow_bots_lets_other_bots_messages_through(emulator: DiscordEmulator) -> None:
    discord, intake = await started(emulator, allow_bots=True)
    try:
        assert emulator.gateway is not None
        await emulator.server_message(ALICE, "start", mention=True, in_thread=True)
        (start,) = await intake.wait(1)
        emulator.gateway.deaf = True
        beep = await emulator.server_message(OTHER_BOT, "beep", mention=True, in_thread=True, bot_author=True)
        found = await discord.catch_up([thread_point(emulator, start.event_id)], WIDE)
        assert ids(found) == [beep["id"]] and not found[0].from_bot
    finally:
        await discord.close()


async def test_the_window_bounds_how_far_back_and_how_many(
    emulator: DiscordEmulator, listening: tuple[DiscordAdapter, Collected]
) -> None:
    discord, _ = listening
    assert emulator.gateway is not None
    emulator.gateway.deaf = True
    now = time.time()
    await emulator.dm(ALICE, "two hours ago", at=now - 7200)
    recent = [await emulator.dm(ALICE, f"recent {n}") for n in range(5)]
    bob = [await emulator.dm(BOB, f"bob {n}") for n in range(3)]

    # Nothing stored yet from Alice: read back to `since` only, which leaves the old message out.
    found = await discord.catch_up([dm_point(emulator, ALICE, None)], CatchUpWindow(since=now - 3600))
    assert ids(found) == [item["id"] for item in recent]

    # At most per_chat from one chat: its newest ones, still oldest first.
    window = CatchUpWindow(since=now - 3600, per_chat=2)
    found = await discord.catch_up([dm_point(emulator, ALICE, None)], window)
    assert ids(found) == [item["id"] for item in recent[-2:]]

    # At most `total` in all: the newest across the chats.
    window = CatchUpWindow(since=now - 3600, per_chat=10, total=4)
    found = await discord.catch_up([dm_point(emulator, ALICE, None), dm_point(emulator, BOB, None)], window)
    assert ids(found) == [recent[-1]["id"], *(item["id"] for item in bob)]


async def test_a_long_gap_is_read_page_by_page(
    emulator: DiscordEmulator, listening: tuple[DiscordAdapter, Collected]
) -> None:
    discord, intake = listening
    assert emulator.gateway is not None
    start = await emulator.dm(ALICE, "start")
    await intake.wait(1)
    emulator.gateway.deaf = True
    missed = [await emulator.dm(ALICE, f"missed {n}") for n in range(130)]
    channel = emulator.world.dm_channel_for(ALICE)
    before = len(emulator.world.rest_calls)

    found = await discord.catch_up([dm_point(emulator, ALICE, start["id"])], CatchUpWindow(since=0.0, per_chat=200))

    assert ids(found) == [item["id"] for item in missed]
    reads = [call for call in emulator.world.rest_calls[before:] if call == ("GET", f"/channels/{channel}/messages")]
    assert len(reads) == 2


async def test_channel_points_are_not_read_and_a_vanished_thread_is_skipped(
    emulator: DiscordEmulator, listening: tuple[DiscordAdapter, Collected]
) -> None:
    discord, intake = listening
    assert emulator.gateway is not None
    await emulator.dm(ALICE, "start")
    (start,) = await intake.wait(1)
    emulator.gateway.deaf = True
    await emulator.server_message(ALICE, "in the channel", mention=True)
    wanted = await emulator.dm(ALICE, "in the dm")
    points = [
        CatchUpPoint(emulator.world.channel_id, ChatType.GROUP),
        CatchUpPoint(emulator.world.channel_id, ChatType.GROUP, thread_id="200000000000000099"),
        dm_point(emulator, ALICE, start.event_id),
    ]
    found = await discord.catch_up(points, WIDE)
    assert ids(found) == [wanted["id"]]

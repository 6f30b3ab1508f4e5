"""What the adapter hands the gateway for each kind of Discord message (real discord.py parsing emulator events)."""

from __future__ import annotations

from adapters.contract import ChatType, OutboundMessage
from adapters.discord import DiscordAdapter
from tests.adapters.discord.conftest import ALICE, BOB, Collected, started
from tests.fakes.discord_api import DiscordEmulator

OTHER_BOT = "400000000000000001"


async def test_a_dm(emulator: DiscordEmulator, listening: tuple[DiscordAdapter, Collected]) -> None:
    data = await emulator.dm(ALICE, "hi")
    (message,) = await listening[1].wait(1)
    assert (message.platform, message.event_id, message.message_id) == ("discord", data["id"], data["id"])
    assert message.chat_type is ChatType.DM and message.chat_id == data["channel_id"]
    assert message.server_id is None and message.thread_id is None
    assert message.user_id == ALICE and message.text == "hi" and not message.from_bot


async def test_server_channel_thread_and_mentions(
    emulator: DiscordEmulator, listening: tuple[DiscordAdapter, Collected]
) -> None:
    world = emulator.world
    await emulator.server_message(ALICE, "plain")
    await emulator.server_message(ALICE, "hey  there", mention=True)
    await emulator.server_message(BOB, "in a thread", mention=True, in_thread=True)
    plain, mentioned, threaded = await listening[1].wait(3)
    assert plain.chat_type is ChatType.GROUP and plain.server_id == world.guild_id
    assert plain.chat_id == world.channel_id and plain.thread_id is None and not plain.mentioned
    assert mentioned.mentioned and mentioned.text == "hey there"
    assert threaded.chat_id == world.channel_id and threaded.thread_id == world.thread_id
    assert threaded.mentioned and threaded.user_id == BOB and threaded.server_id == world.guild_id


async def test_a_reply_to_the_bot_counts_as_a_mention_a_reply_to_someone_else_does_not(
    emulator: DiscordEmulator, listening: tuple[DiscordAdapter, Collected]
) -> None:
    bot_message_id = await listening[0].send(OutboundMessage(chat_id=emulator.world.channel_id, text="I am the bot"))
    someone = await emulator.server_message(BOB, "I am Bob")
    await emulator.server_message(ALICE, "to the bot", reply_to=bot_message_id)
    await emulator.server_message(ALICE, "to Bob", reply_to=someone["id"])
    _, to_bot, to_bob = await listening[1].wait(3)
    assert to_bot.mentioned and not to_bob.mentioned


async def test_own_messages_are_dropped_and_other_bots_are_marked(
    emulator: DiscordEmulator, listening: tuple[DiscordAdapter, Collected]
) -> None:
    await emulator.server_message(emulator.world.bot["id"], "my own words", mention=True)
    await emulator.server_message(OTHER_BOT, "beep", mention=True, bot_author=True)
    (message,) = await listening[1].wait(1)
    assert message.user_id == OTHER_BOT and message.from_bot and message.mentioned
    await emulator.dm(ALICE, "after")
    assert [m.text for m in await listening[1].wait(2)] == ["beep", "after"]


async def test_allow_bots_lets_other_bots_through(emulator: DiscordEmulator) -> None:
    adapter, intake = await started(emulator, allow_bots=True)
    try:
        await emulator.server_message(emulator.world.bot["id"], "my own words", mention=True)
        await emulator.server_message(OTHER_BOT, "beep", mention=True, bot_author=True)
        (message,) = await intake.wait(1)
        assert message.user_id == OTHER_BOT and not message.from_bot
    finally:
        await adapter.close()


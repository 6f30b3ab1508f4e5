"""Streamed replies on Discord end to end: the real gateway and discord.py against the Discord emulator,
the model writing its answer at a set pace through the real anthropic SDK.

Discord has no drafts and no streaming API: a message is created once there is enough text and
edited in place as the answer grows (inside the channel's 5 per 5 s); an answer longer than one
message keeps the streamed message as its first part and continues in new messages.
"""

from __future__ import annotations

from tests.adapters.discord.conftest import ALICE, DiscordRun, StartGateway
from tests.adapters.telegram.test_streaming_e2e import ANSWER, WORKING, grew
from tests.fakes.discord_api import DiscordEmulator, SentMessage
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.gateway.conftest import settled
from tests.waiting import eventually


def shown_by(emulator: DiscordEmulator, message: SentMessage) -> list[str]:
    """What one message showed, in order: as created, then each edit."""
    return [message.content] + [e.content for e in emulator.world.edits if e.message_id == message.id]


def showing(emulator: DiscordEmulator, channel_id: str) -> list[str]:
    """What each of the bot's messages in the channel shows now, in the order they were created."""
    return [shown_by(emulator, m)[-1] for m in emulator.world.sent if m.channel_id == channel_id]


async def answered(run: DiscordRun, emulator: DiscordEmulator, channel_id: str) -> None:
    """Wait for the first message in the channel (the turn is in the inbox then), then for every turn to end."""
    await emulator.wait_for(lambda: any(m.channel_id == channel_id for m in emulator.world.sent))
    await settled(run.store)


async def test_a_dm_gets_one_message_edited_in_place_as_the_answer_is_written(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    model_server.script(Text(ANSWER, pace=25))
    run = await start_gateway()
    question = await emulator.dm(ALICE, "tell me a long story")
    await answered(run, emulator, question["channel_id"])

    [reply] = emulator.world.sent
    texts = shown_by(emulator, reply)
    assert texts[-1] == ANSWER
    assert len(texts) >= 3 and texts[0] != ANSWER and grew(texts), texts
    assert str(reply.reference["message_id"]) == question["id"]


async def test_a_long_answer_continues_in_new_messages_after_the_streamed_one(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    paragraphs = [f"Paragraph {n}: " + " ".join(f"word{n}-{i}" for i in range(90)) for n in range(6)]
    long_answer = "\n\n".join(paragraphs)  # about 4,700 characters: three messages
    model_server.script(Text(long_answer, pace=150))
    run = await start_gateway()
    question = await emulator.server_message(ALICE, "tell me everything", mention=True)
    await answered(run, emulator, emulator.world.channel_id)

    streamed, *rest = emulator.world.sent
    assert len(rest) >= 2, "the answer did not fit one message"
    assert len(shown_by(emulator, streamed)) >= 3, "the first message was streamed: created, then edited"
    parts = showing(emulator, emulator.world.channel_id)
    assert " ".join(parts).split() == long_answer.split(), "every part once, in order, the streamed one first"
    assert all(len(part) <= 2000 for part in parts)
    assert str(streamed.reference["message_id"]) == question["id"] and all(m.reference is None for m in rest)
    assert {e.message_id for e in emulator.world.edits} == {streamed.id}, "only the streamed message is edited"
    assert [m.at for m in rest] == sorted(m.at for m in rest) and rest[0].at > emulator.world.edits[-1].at


async def test_a_tool_using_turn_shows_one_message_from_the_tool_line_to_the_answer(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    model_server.script(ToolCalls(ToolUse("session_search", {"query": "Lisbon"})), Text(ANSWER, pace=25))
    run = await start_gateway()
    question = await emulator.dm(ALICE, "what did we plan for Lisbon?")
    await answered(run, emulator, question["channel_id"])

    [reply] = emulator.world.sent  # no separate progress message
    texts = shown_by(emulator, reply)
    assert texts[0] == WORKING and texts[-1] == ANSWER and len(texts) >= 3 and grew(texts[1:]), texts


async def test_stop_mid_stream_ends_the_message_with_the_stopped_mark(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    model_server.script(Text(ANSWER, pace=6))  # about fifteen seconds: /stop comes well before the end
    run = await start_gateway()
    question = await emulator.dm(ALICE, "tell me a long story")
    [streamed] = await emulator.wait_sent(1)
    await emulator.dm(ALICE, "/stop")
    await settled(run.store)

    await eventually(lambda: shown_by(emulator, streamed)[-1].endswith("— stopped"), "the stopped mark")
    shown = shown_by(emulator, streamed)[-1].removesuffix("— stopped").strip()
    assert shown and ANSWER.startswith(shown) and shown != ANSWER
    assert all(ANSWER not in text for text in showing(emulator, question["channel_id"]))


async def test_streams_in_a_dm_a_channel_and_a_thread_at_once_stay_inside_the_channel_limits(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    emulator.enforce_rates()
    model_server.responder = lambda record: Text(ANSWER, pace=40)
    run = await start_gateway()
    dm = await emulator.dm(ALICE, "tell me a long story")
    await emulator.server_message(ALICE, "tell me a long story", mention=True)
    await emulator.server_message(ALICE, "tell me a long story", mention=True, in_thread=True)
    channels = [dm["channel_id"], emulator.world.channel_id, emulator.world.thread_id]
    await emulator.wait_sent(len(channels))
    await settled(run.store)

    for channel_id in channels:
        assert showing(emulator, channel_id) == [ANSWER], channel_id
    assert all(len(shown_by(emulator, m)) >= 3 for m in emulator.world.sent), "each was streamed"
    assert emulator.rate_limited == 0

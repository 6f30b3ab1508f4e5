"""Conversations through the real gateway: DMs, mentions in a server, threads, long replies."""

from __future__ import annotations

from structlog.testing import capture_logs

from adapters.contract import AdapterState
from tests.adapters.discord.conftest import ALICE, StartGateway
from tests.fakes.discord_api import MESSAGE_CONTENT_INTENT, DiscordEmulator
from tests.fakes.model_server import ModelServer, Text, Timeout
from tests.gateway.test_chunking_code_spans import code_spans
from tests.waiting import eventually


async def test_a_dm_gets_a_reply_that_references_it(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    with capture_logs() as logs:
        run = await start_gateway()
    assert run.discord.status().state is AdapterState.RUNNING
    # Without message_content_intent the privileged bit is not requested, and the log says what that means.
    assert emulator.gateway is not None
    (identify,) = emulator.gateway.identifies
    assert identify["intents"] & MESSAGE_CONTENT_INTENT == 0
    (intents,) = [entry for entry in logs if entry["event"] == "discord.intents"]
    assert intents["message_content"] is False and "only sees the text of DMs" in intents["meaning"]

    model_server.script(Timeout(seconds=1.0))  # a slow model: the turn runs long enough to show typing
    user_message = await emulator.dm(ALICE, "hello there")
    (sent,) = await emulator.wait_sent(1)
    assert sent.channel_id == user_message["channel_id"]
    assert sent.content == "ok: hello there"
    assert sent.reference is not None and str(sent.reference["message_id"]) == user_message["id"]
    assert sent.reference["fail_if_not_exists"] is False
    assert sent.nonce and sent.enforce_nonce
    assert user_message["channel_id"] in emulator.world.typing


async def test_in_a_server_only_mentions_and_replies_to_the_bot_are_answered(
    start_gateway: StartGateway, emulator: DiscordEmulator
) -> None:
    await start_gateway()
    ignored = await emulator.server_message(ALICE, "just chatting")
    mentioned = await emulator.server_message(ALICE, "what time is it?", mention=True)
    (first,) = await emulator.wait_sent(1)
    assert str(first.reference["message_id"]) == mentioned["id"]
    assert first.content.startswith("ok: what time is it?")  # the <@bot> mention was taken out of the text
    assert first.channel_id == emulator.world.channel_id

    reply = await emulator.server_message(ALICE, "and tomorrow?", reply_to=first.id)
    second = (await emulator.wait_sent(2))[1]
    assert str(second.reference["message_id"]) == reply["id"]
    assert ignored["id"] not in {str(s.reference["message_id"]) for s in emulator.world.sent}


async def test_without_require_mention_plain_server_messages_are_answered(
    start_gateway: StartGateway, emulator: DiscordEmulator
) -> None:
    await start_gateway(require_mention=False)
    message = await emulator.server_message(ALICE, "no mention here")
    (sent,) = await emulator.wait_sent(1)
    assert str(sent.reference["message_id"]) == message["id"]


async def test_a_thread_is_a_session_of_its_own(start_gateway: StartGateway, emulator: DiscordEmulator) -> None:
    run = await start_gateway()
    await emulator.server_message(ALICE, "in the channel", mention=True)
    await emulator.wait_sent(1)
    await emulator.server_message(ALICE, "in the thread", mention=True, in_thread=True)
    sent = await emulator.wait_sent(2)
    assert [s.channel_id for s in sent] == [emulator.world.channel_id, emulator.world.thread_id]
    world = emulator.world
    keys = {session.session_key for session in await run.store.list_sessions()}
    assert keys == {
        f"discord:group:{world.channel_id}:user:{ALICE}",
        f"discord:group:{world.channel_id}:thread:{world.thread_id}",
    }


async def test_a_long_reply_arrives_in_order_in_chunks_of_at_most_2000_characters(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    await start_gateway()
    paragraphs = [f"Paragraph {n}: " + " ".join(f"word{n}-{i}" for i in range(150)) for n in range(5)]
    model_server.script(Text("\n\n".join(paragraphs)))
    message = await emulator.dm(ALICE, "tell me a lot")
    world = emulator.world

    def showing() -> list[str]:  # what each message shows now (the streamed first one was edited)
        last = {e.message_id: e.content for e in world.edits}
        return [last.get(s.id, s.content) for s in world.sent]

    await eventually(lambda: " ".join(showing()).count("word4-149") == 1)
    await eventually(lambda: " ".join(showing()).split() == "\n\n".join(paragraphs).split(), "the final text")
    sent = world.sent
    assert len(sent) >= 3 and all(len(text) <= 2000 for text in showing())
    assert str(sent[0].reference["message_id"]) == message["id"]
    assert all(s.reference is None for s in sent[1:])
    assert len({s.nonce for s in sent}) == len(sent)


async def test_inline_code_with_backticks_cut_between_messages_stays_code_in_each(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    # Longer than a message and next to a backtick wherever it is cut: a part closed with its own
    # backticks merged into the delimiter, and Discord showed the rest as a code block.
    code = "x`" * 1200 + "x"
    await start_gateway()
    model_server.script(Text(f"Here: ``{code}`` and that is all."))
    await emulator.dm(ALICE, "show me the weird code")
    await eventually(lambda: "that is all" in " ".join(s.content for s in emulator.world.sent))
    parts: list[str] = []
    for sent in emulator.world.sent:
        spans, outside = code_spans(sent.content)
        assert "`" not in outside, f"a stray backtick run in {sent.content[:40]!r}...{sent.content[-40:]!r}"
        parts += spans
    assert "".join(parts) == code and len(parts) >= 2


async def test_commands_are_typed_as_messages_in_a_dm_and_after_a_mention_in_a_server(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    await start_gateway()
    await emulator.dm(ALICE, "/status")
    await emulator.wait_sent(1)
    await emulator.server_message(ALICE, "/whoami", mention=True)
    first, second = await emulator.wait_sent(2)
    assert first.content.startswith("No conversation yet") and second.content.startswith("Name: ")
    assert model_server.requests == []

"""A message Discord created whose answer never came back shows once: the resend carries the same nonce.

The emulator creates the message and then cuts the connection
(:meth:`DiscordEmulator.lose_next_answer`): discord.py sees a network error and
no message id. The outbox sends the chunk again with the same ``nonce`` and
``enforce_nonce`` (discord.py adds it to every nonce), and Discord answers a
repeated nonce of the same author with the first message instead of creating
another. The outbox row then ends ``sent`` with that message's id.
"""

from __future__ import annotations

from tests.adapters.discord.conftest import ALICE, StartGateway
from tests.adapters.telegram.test_streaming_e2e import ANSWER
from tests.fakes.discord_api import DiscordEmulator
from tests.fakes.model_server import ModelServer, Text
from tests.gateway.conftest import settled
from tests.waiting import eventually


async def test_a_reply_whose_answer_was_lost_shows_once_and_is_recorded_with_its_id(
    start_gateway: StartGateway, emulator: DiscordEmulator
) -> None:
    run = await start_gateway()
    emulator.lose_next_answer()
    await emulator.dm(ALICE, "hello there")
    await eventually(lambda: emulator.world.repeats, "the resend to be answered with the first message")
    await settled(run.store)

    [sent] = emulator.world.sent
    assert sent.content == "ok: hello there" and sent.enforce_nonce
    assert emulator.world.repeats == [sent], "the resend carried the same nonce and got the first message back"
    row = await run.store.outbox_get(1)
    assert row is not None and (row.status, row.platform_message_id) == ("sent", sent.id)


async def test_a_streamed_reply_whose_first_message_lost_its_answer_shows_once(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    run = await start_gateway()
    model_server.script(Text(ANSWER, pace=25))
    emulator.lose_next_answer()
    await emulator.dm(ALICE, "tell me a long story")
    await eventually(lambda: emulator.world.repeats, "the resend to be answered with the first message")
    await settled(run.store)

    [sent] = emulator.world.sent
    assert emulator.world.messages[sent.id]["content"] == ANSWER, "the one message was edited to the answer"
    row = await run.store.outbox_get(1)
    assert row is not None and (row.status, row.platform_message_id) == ("sent", sent.id)

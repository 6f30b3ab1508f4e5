"""Sending, editing and typing through real discord.py, and how Discord's refusals reach the gateway."""

from __future__ import annotations

import logging

import pytest

from adapters.contract import (
    DeliveryError,
    Markup,
    MarkupRejected,
    OutboundMessage,
    RateLimited,
    RecipientUnavailable,
    TransientDeliveryError,
)
from adapters.discord import DiscordAdapter
from tests.adapters.discord.conftest import ALICE, StartGateway
from tests.fakes.discord_api import DiscordEmulator


def chunk(emulator: DiscordEmulator, text: str = "**hello**", **fields: object) -> OutboundMessage:
    values: dict = {"chat_id": emulator.world.channel_id, "text": text, "markup": Markup.DISCORD_MARKDOWN}
    values.update(fields)
    return OutboundMessage(**values)


async def test_the_same_nonce_is_shown_once(emulator: DiscordEmulator, adapter: DiscordAdapter) -> None:
    first = await adapter.send(chunk(emulator, nonce="a1b2c3d4e5f6a1b2c3d4e5f6"))
    again = await adapter.send(chunk(emulator, nonce="a1b2c3d4e5f6a1b2c3d4e5f6"))
    assert first == again
    (sent,) = emulator.world.sent
    assert sent.nonce == "a1b2c3d4e5f6a1b2c3d4e5f6" and sent.enforce_nonce and sent.content == "**hello**"
    assert emulator.world.repeats == [sent]


async def test_a_short_rate_limit_is_waited_out_by_discord_py_and_logged(
    emulator: DiscordEmulator, adapter: DiscordAdapter, caplog: pytest.LogCaptureFixture
) -> None:
    emulator.rate_limit_next(0.2)
    with caplog.at_level(logging.WARNING, logger="discord.http"):
        message_id = await adapter.send(chunk(emulator))
    (sent,) = emulator.world.sent
    assert sent.id == message_id
    assert emulator.world.rest_calls.count(("POST", f"/channels/{emulator.world.channel_id}/messages")) == 2
    # discord.py logs its waits through stdlib logging; the gateway's log setup routes every stdlib logger to the log.
    assert any("We are being rate limited" in record.getMessage() for record in caplog.records)


async def test_a_long_rate_limit_becomes_rate_limited_for_the_gateway(
    emulator: DiscordEmulator, adapter: DiscordAdapter
) -> None:
    emulator.rate_limit_next(60.0)
    with pytest.raises(RateLimited) as caught:
        await adapter.send(chunk(emulator))
    assert caught.value.retry_after == 60.0
    assert emulator.world.sent == []


@pytest.mark.parametrize(
    ("status", "code", "raised"),
    [
        (403, 50001, RecipientUnavailable),
        (404, 10003, RecipientUnavailable),
        (503, 0, TransientDeliveryError),
        (400, 50035, MarkupRejected),
        (400, 50008, DeliveryError),
    ],
)
async def test_refusals_are_translated(
    emulator: DiscordEmulator, adapter: DiscordAdapter, status: int, code: int, raised: type[DeliveryError]
) -> None:
    emulator.fail_next(status, "refused by the test", code=code)
    with pytest.raises(DeliveryError) as caught:
        await adapter.send(chunk(emulator))
    assert type(caught.value) is raised
    assert str(status) in str(caught.value)


async def test_a_plain_chunk_refused_for_its_content_is_not_called_a_markup_problem(
    emulator: DiscordEmulator, adapter: DiscordAdapter
) -> None:
    emulator.fail_next(400, "Invalid Form Body", code=50035)
    with pytest.raises(DeliveryError) as caught:
        await adapter.send(chunk(emulator, markup=Markup.PLAIN))
    assert type(caught.value) is DeliveryError and not caught.value.retryable


async def test_in_a_thread_send_edit_and_typing_use_the_thread(
    emulator: DiscordEmulator, adapter: DiscordAdapter
) -> None:
    world = emulator.world
    message_id = await adapter.send(chunk(emulator, thread_id=world.thread_id))
    await adapter.edit(world.channel_id, message_id, "edited", markup=Markup.DISCORD_MARKDOWN)
    await adapter.typing(world.channel_id, world.thread_id)
    (sent,) = world.sent
    assert sent.channel_id == world.thread_id
    assert [(e.channel_id, e.message_id, e.content) for e in world.edits] == [(world.thread_id, message_id, "edited")]
    assert world.typing == [world.thread_id]


async def test_a_rate_limited_reply_through_the_gateway_is_delivered_once(
    start_gateway: StartGateway, emulator: DiscordEmulator
) -> None:
    await start_gateway()
    emulator.rate_limit_next(0.3, times=2)
    message = await emulator.dm(ALICE, "busy day")
    (sent,) = await emulator.wait_sent(1)
    assert str(sent.reference["message_id"]) == message["id"]
    creates = [call for call in emulator.world.rest_calls if call[0] == "POST" and call[1].endswith("/messages")]
    assert len(creates) == 3

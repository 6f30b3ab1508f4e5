"""Discord's per-channel limit on creates and edits (5 per 5 s), enforced by the emulator with Discord's
headers, and what real discord.py and the adapter make of it: discord.py paces itself by the headers and
waits out a 429 it did not see coming, so the adapter sees no error; only a wait longer than the adapter
lets discord.py sit out reaches the gateway as RateLimited (``test_sending``)."""

from __future__ import annotations

import json

import aiohttp
import pytest

from adapters.contract import Markup, OutboundMessage, Rate
from adapters.discord import DiscordAdapter
from tests.adapters.discord.conftest import ALICE, StartGateway
from tests.fakes.discord_api import DiscordEmulator
from tests.fakes.model_server import ModelServer, Text


@pytest.fixture(autouse=True)
def limits_on(emulator: DiscordEmulator) -> None:
    """Discord's limits enforced (no grace: these tests send back to back)."""
    emulator.enforce_rates(grace=0.0)


async def other_client_posts(emulator: DiscordEmulator, channel_id: str, count: int) -> list[aiohttp.ClientResponse]:
    """Create messages with the bot's token from outside discord.py (another process of the same bot)."""
    answers = []
    async with aiohttp.ClientSession(headers={"Authorization": f"Bot {emulator.token}"}) as session:
        for n in range(count):
            url = f"{emulator.api_base_url}/channels/{channel_id}/messages"
            async with session.post(url, json={"content": f"elsewhere {n}"}) as answer:
                await answer.read()
                answers.append(answer)
    return answers


async def test_the_sixth_create_in_five_seconds_gets_discords_429(emulator: DiscordEmulator) -> None:
    channel = emulator.world.channel_id
    answers = await other_client_posts(emulator, channel, 6)

    assert [a.status for a in answers] == [200] * 5 + [429]
    assert [a.headers["X-RateLimit-Remaining"] for a in answers] == ["4", "3", "2", "1", "0", "0"]
    for answer in answers:
        assert answer.headers["X-RateLimit-Limit"] == "5" and answer.headers["X-RateLimit-Bucket"]
        assert 0 < float(answer.headers["X-RateLimit-Reset-After"]) <= 5
        assert float(answer.headers["X-RateLimit-Reset"]) > 1_000_000_000
    refused = answers[-1]
    assert refused.headers["Via"] and int(refused.headers["Retry-After"]) >= 1
    assert emulator.rate_limited == 1 and len(emulator.world.sent) == 5


async def test_edits_count_in_the_same_channel_budget(emulator: DiscordEmulator) -> None:
    channel = emulator.world.channel_id
    await other_client_posts(emulator, channel, 5)
    message_id = emulator.world.sent[0].id
    async with aiohttp.ClientSession(headers={"Authorization": f"Bot {emulator.token}"}) as session:
        url = f"{emulator.api_base_url}/channels/{channel}/messages/{message_id}"
        async with session.patch(url, json={"content": "changed"}) as answer:
            body = json.loads(await answer.read())
    assert answer.status == 429 and body["global"] is False and 0 < body["retry_after"] <= 5
    assert emulator.world.edits == [] and emulator.rate_limited == 1


async def test_discord_py_paces_itself_by_the_headers_and_is_never_refused(
    emulator: DiscordEmulator, adapter: DiscordAdapter
) -> None:
    channel = emulator.world.channel_id
    first = await adapter.send(OutboundMessage(chat_id=channel, text="one", markup=Markup.DISCORD_MARKDOWN))
    for n in range(4):
        await adapter.edit(channel, first, f"one, edited {n}", markup=Markup.DISCORD_MARKDOWN)
    await adapter.send(OutboundMessage(chat_id=channel, text="two", markup=Markup.DISCORD_MARKDOWN))

    assert emulator.rate_limited == 0
    created, edits = emulator.world.sent, emulator.world.edits
    assert [e.content for e in edits] == [f"one, edited {n}" for n in range(4)]
    assert created[1].at - created[0].at >= 5.0, "the sixth call went out before the window reset"
    assert all(earlier.at <= later.at for earlier, later in zip(edits, edits[1:], strict=False))


async def test_a_429_discord_py_did_not_expect_is_waited_out_without_an_error(
    emulator: DiscordEmulator, adapter: DiscordAdapter
) -> None:
    channel = emulator.world.channel_id
    await other_client_posts(emulator, channel, 5)
    message_id = await adapter.send(OutboundMessage(chat_id=channel, text="mine", markup=Markup.DISCORD_MARKDOWN))

    assert emulator.rate_limited == 1, "discord.py was refused once, then waited and sent again"
    assert emulator.world.sent[-1].id == message_id and emulator.world.sent[-1].content == "mine"


async def test_the_adapter_says_five_per_five_seconds_per_channel() -> None:
    rates = DiscordAdapter.capabilities.rates
    assert (rates.per_chat, rates.overall, rates.stream_interval) == (Rate(5, 5.0), None, 1.0)


async def test_a_long_reply_through_the_gateway_meets_no_429(
    start_gateway: StartGateway, emulator: DiscordEmulator, model_server: ModelServer
) -> None:
    paragraphs = [f"Part {n:02d}. " + "words to fill the message " * 70 for n in range(12)]
    model_server.responder = lambda record: Text("\n\n".join(paragraphs))
    emulator.enforce_rates()  # with the default grace, as the gateway's own pacing meets the network
    await start_gateway()
    await emulator.dm(ALICE, "tell me at length")
    await emulator.wait_for(lambda: any("Part 11." in m.content for m in emulator.world.sent), timeout=60)

    assert len(emulator.world.sent) >= 6, "the reply needs more than one window of the channel's limit"
    joined = "".join(m.content for m in emulator.world.sent)
    assert [joined.index(f"Part {n:02d}.") for n in range(12)] == sorted(joined.index(f"Part {n:02d}.") for n in range(12))
    assert emulator.rate_limited == 0

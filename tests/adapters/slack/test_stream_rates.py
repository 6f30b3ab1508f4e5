"""A reply streamed in a Slack thread stays inside the rates Slack enforces, end to end.

The real gateway and the real SlackAdapter (slack-bolt, slack_sdk) against the fake Slack with its
per-channel rate limits on (:mod:`tests.fakes.slack_api.rates`): every write to a channel
(chat.postMessage, chat.update, chat.startStream, chat.stopStream) counts against one budget
of 1 a second, so the gateway must count each of them too, or the chat.update that follows a
chat.stopStream (at the end of a turn, or after a restart finishing a stream a crash left open) is
answered 429. The fake forgives a call that arrives a little early, as the Telegram and Discord
emulators do: a client spacing its calls where it sends them cannot control how they arrive.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import Markup, OutboundMessage
from storage import OutboxChunk
from tests.adapters.slack.conftest import ALICE, CHANNEL, SIGNING_SECRET, Clock, SlackFactory
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.slack_api import BOT_USER_ID, FakeSlack, mention, next_ts, post_signed

ANSWER = " ".join(f"Sentence {n} of the streamed answer adds a few words." for n in range(1, 7))
"""Six sentences, 54 words: about two seconds at 25 words a second."""


async def test_a_natively_streamed_reply_gets_no_429_from_its_stop_and_final_edit(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    slack.api.rates.enabled = True
    model_server.responder = lambda record: Text(ANSWER, pace=25)
    root = mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> tell me at length", ts=next_ts())
    slack.api.record(root)
    assert (await post_signed(slack.url, root, SIGNING_SECRET)).status == 200

    await slack.api.wait_for(lambda: any(s.method == "chat.update" and s.text.strip() == ANSWER
                                         for s in slack.api.shown))  # fmt: skip
    methods = [s.method for s in slack.api.shown]
    assert methods[0] == "chat.startStream" and "chat.stopStream" in methods  # it did stream natively
    assert slack.api.rates.refused == []


async def test_a_stream_a_crash_left_open_is_stopped_then_edited_without_a_429(
    start_slack: SlackFactory, slack_home: Path
) -> None:
    first = await start_slack("http")
    thread = next_ts()
    ts = await first.adapter.start_stream(
        OutboundMessage(chat_id=CHANNEL, text="Half of an", thread_id=thread, markup=Markup.SLACK_MRKDWN),
        recipient_user_id=ALICE,
    )
    # What a crash leaves: the stream still open on Slack, its live row on record, the turn settled.
    await first.store.inbox_accept("slack", "E9", f"slack:group:{CHANNEL}", {})
    await first.store.inbox_mark_done("slack", "E9")
    row = await first.store.outbox_stream_open("slack:E9", "slack", CHANNEL, thread, OutboxChunk(text=""), mode="native")
    await first.store.outbox_stream_shown(row.id, "Half of an", ts, plain="Half of an", mode="native")
    await first.gateway.shutdown()

    first.api.rates.enabled = True
    await start_slack("http")
    await first.api.wait_for(lambda: any(s.method == "chat.update" and s.ts == ts for s in first.api.shown))
    assert [s.method for s in first.api.shown if s.ts == ts][-2:] == ["chat.stopStream", "chat.update"]
    assert first.api.rates.refused == []


async def test_the_fake_forgives_a_write_arriving_a_little_early_as_the_other_emulators_do(
    client: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    clock = Clock()
    fake_slack.clock = clock
    fake_slack.rates.enabled = True
    await client.chat_postMessage(channel=CHANNEL, text="one")
    clock.now += 0.9  # spaced by the rate where it was sent, but the first one arrived late: 0.1 s early
    await client.chat_postMessage(channel=CHANNEL, text="two")
    clock.now += 0.5
    with pytest.raises(SlackApiError) as caught:
        await client.chat_postMessage(channel=CHANNEL, text="three")  # 0.5 s early: refused
    assert caught.value.response.status_code == 429
    assert fake_slack.rates.rate_limited == 1

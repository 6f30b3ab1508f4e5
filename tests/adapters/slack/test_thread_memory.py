"""ThreadMemory against the fake Web API: what it remembers, when it asks Slack, how long a no lasts.

The last test drives the adapter on its own with a stand-in intake (as
test_ack does) to show that a post into a thread is enough to make the thread
the bot's, without any mention having been seen.
"""

from __future__ import annotations

import asyncio

import pytest
from slack_sdk.web.async_client import AsyncWebClient

import adapters.slack.threads as threads_module
from adapters.slack import SlackAdapter
from adapters.slack.adapter import SlackSettings
from adapters.slack.identity import BotIdentity
from adapters.slack.threads import ERROR_TTL, NEGATIVE_TTL, ThreadMemory
from adapters.contract import Markup, OutboundMessage
from tests.adapters.slack.conftest import ALICE, BOB, CHANNEL, SIGNING_SECRET, Clock
from tests.adapters.slack.test_ack import Intake
from tests.fakes.slack_api import (
    BOT_ID,
    BOT_TOKEN,
    BOT_USER_ID,
    TEAM_ID,
    Failure,
    FakeSlack,
    message,
    message_key,
    next_ts,
    post_signed,
)

BOT = BotIdentity(user_id=BOT_USER_ID, bot_id=BOT_ID, name="switchbot", team_id=TEAM_ID)



def thread_of(api: FakeSlack, *users: str) -> str:
    """Record a thread in the fake's history: a parent by Bob and one reply per user; returns its ts."""
    parent = message(CHANNEL, BOB, "parent", channel_type="channel")
    api.record(parent)
    root = str(parent["event"]["ts"])
    for user in users:
        extra = {"bot_id": BOT_ID} if user == BOT_USER_ID else {}
        api.record(message(CHANNEL, user, "reply", channel_type="channel", thread_ts=root, **extra))
    return root


async def test_a_no_is_cached_until_its_ttl_ends_and_a_mention_turns_it_into_a_yes(
    client: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    clock = Clock()
    memory = ThreadMemory(client, BOT, clock=clock)
    root = thread_of(fake_slack, ALICE)
    assert not await memory.takes_part(CHANNEL, root)
    clock.now += NEGATIVE_TTL - 1
    assert not await memory.takes_part(CHANNEL, root)
    assert len(fake_slack.calls_to("conversations.replies")) == 1
    clock.now += 2
    assert not await memory.takes_part(CHANNEL, root)
    assert len(fake_slack.calls_to("conversations.replies")) == 2, "asked again once the no expired"
    memory.remember(CHANNEL, root)
    assert await memory.takes_part(CHANNEL, root)
    assert len(fake_slack.calls_to("conversations.replies")) == 2


async def test_the_bot_is_found_on_a_later_page_and_the_yes_is_remembered(
    client: AsyncWebClient, fake_slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threads_module, "LOOKUP_PAGE", 2)
    memory = ThreadMemory(client, BOT)
    root = thread_of(fake_slack, ALICE, ALICE, BOT_USER_ID)  # parent, 2 replies, then the bot: page 2
    assert await memory.takes_part(CHANNEL, root)
    lookups = fake_slack.calls_to("conversations.replies")
    assert [c.args.get("cursor") for c in lookups] == [None, "2"]
    assert await memory.takes_part(CHANNEL, root) and len(fake_slack.calls_to("conversations.replies")) == 2


async def test_a_long_thread_is_read_only_up_to_the_page_cap(
    client: AsyncWebClient, fake_slack: FakeSlack, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(threads_module, "LOOKUP_PAGE", 2)
    monkeypatch.setattr(threads_module, "LOOKUP_PAGES", 2)
    root = thread_of(fake_slack, ALICE, ALICE, ALICE, ALICE, BOT_USER_ID)
    assert not await ThreadMemory(client, BOT).takes_part(CHANNEL, root)
    assert len(fake_slack.calls_to("conversations.replies")) == 2


async def test_a_failed_lookup_is_a_no_for_a_short_while_then_asked_again(
    client: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    clock = Clock()
    memory = ThreadMemory(client, BOT, clock=clock)
    root = thread_of(fake_slack, BOT_USER_ID)
    fake_slack.fail_next("conversations.replies", Failure.error("missing_scope"))
    assert not await memory.takes_part(CHANNEL, root)
    clock.now += ERROR_TTL + 1
    assert await memory.takes_part(CHANNEL, root)
    assert len(fake_slack.calls_to("conversations.replies")) == 2


async def test_questions_about_one_thread_at_once_share_one_lookup(
    client: AsyncWebClient, fake_slack: FakeSlack
) -> None:
    memory = ThreadMemory(client, BOT)
    root = thread_of(fake_slack, BOT_USER_ID)
    answers = await asyncio.gather(*(memory.takes_part(CHANNEL, root) for _ in range(5)))
    assert answers == [True] * 5
    assert len(fake_slack.calls_to("conversations.replies")) == 1


async def test_a_post_into_a_thread_makes_replies_there_turns_without_a_lookup(fake_slack: FakeSlack) -> None:
    adapter = SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, mode="http", signing_secret=SIGNING_SECRET,
                                         api_base_url=fake_slack.api_url, listen_port=0))  # fmt: skip
    intake = Intake()
    await adapter.start(intake)
    try:
        root = next_ts()  # no mention of it was ever seen, e.g. the outbox delivering after a restart
        await adapter.send(OutboundMessage(chat_id=CHANNEL, text="hi", thread_id=root, markup=Markup.PLAIN, nonce="n"))
        follow_up = message(CHANNEL, ALICE, "thanks", channel_type="channel", thread_ts=root)
        assert (await post_signed(adapter.http_url or "", follow_up, SIGNING_SECRET)).status == 200
        [received] = intake.received
        assert (received.event_id, received.thread_id, received.mentioned) == (message_key(follow_up), root, True)
        assert fake_slack.calls_to("conversations.replies") == []
    finally:
        await adapter.close()

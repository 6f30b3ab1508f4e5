"""HTTP mode end to end: signed Events API requests into the real slack-bolt app, replies to the fake Web API."""

from __future__ import annotations

import json
import time

from tests.adapters.slack.conftest import ALICE, CHANNEL, DM, SIGNING_SECRET, STRANGER, SlackFactory, counter
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.slack_api import BOT_ID, BOT_USER_ID, Failure, mention, message, next_ts, post_signed


async def test_url_verification_is_answered_with_the_challenge(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    answer = await post_signed(slack.url, {"type": "url_verification", "challenge": "c-123", "token": "t"},
                               SIGNING_SECRET)  # fmt: skip
    assert answer.status == 200
    assert answer.json() == {"challenge": "c-123"}


async def test_mention_in_channel_gets_a_reply_in_a_thread_under_it(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    ts = next_ts()
    answer = await post_signed(slack.url, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> hello there", ts=ts), SIGNING_SECRET)
    assert answer.status == 200
    [post] = await slack.api.wait_posts(1)
    assert (post.channel, post.thread_ts) == (CHANNEL, ts)
    assert post.text.startswith("ok: hello there") and post.mrkdwn is True
    # The bot's <@mention> is gone; the thread is shared, so the sender's name (here the id) leads.
    assert model_server.last_request.last_user_text.startswith("U0ALICE: hello there")


async def test_a_later_mention_in_the_thread_continues_the_same_session(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    root = next_ts()
    await post_signed(slack.url, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> first question", ts=root), SIGNING_SECRET)
    await slack.api.wait_posts(1)
    await post_signed(slack.url, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> second question", thread_ts=root),
                      SIGNING_SECRET)  # fmt: skip
    posts = await slack.api.wait_posts(2)
    assert [p.thread_ts for p in posts] == [root, root]
    history = json.dumps(model_server.last_request.messages)
    assert "first question" in history and "ok: first question" in history


async def test_direct_message_round_trip(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    answer = await post_signed(slack.url, message(DM, ALICE, "hi in private"), SIGNING_SECRET)
    assert answer.status == 200
    [post] = await slack.api.wait_posts(1)
    assert (post.channel, post.thread_ts, post.text) == (DM, None, "ok: hi in private")


async def test_bad_signature_is_rejected_and_nothing_happens(start_slack: SlackFactory, model_server: ModelServer) -> None:
    slack = await start_slack("http")
    answer = await post_signed(slack.url, message(DM, ALICE, "forged"), SIGNING_SECRET, bad_signature=True)
    assert answer.status == 401
    assert slack.api.posts == [] and model_server.requests == []
    assert await slack.store.inbox_unfinished() == []


async def test_timestamp_older_than_five_minutes_is_rejected(start_slack: SlackFactory, model_server: ModelServer) -> None:
    slack = await start_slack("http")
    stale = int(time.time()) - 6 * 60
    answer = await post_signed(slack.url, message(DM, ALICE, "replayed"), SIGNING_SECRET, timestamp=stale)
    assert answer.status == 401
    assert slack.api.posts == [] and model_server.requests == []


async def test_redelivered_event_gets_exactly_one_reply(start_slack: SlackFactory, model_server: ModelServer) -> None:
    slack = await start_slack("http")
    event = mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> only once")
    assert (await post_signed(slack.url, event, SIGNING_SECRET)).status == 200
    # Slack retries when it thinks the first delivery timed out: same event_id, retry headers.
    for retry in (1, 2):
        assert (await post_signed(slack.url, event, SIGNING_SECRET, retry_num=retry)).status == 200
    # A later event in the same conversation: once it is answered, a duplicate turn would have shown.
    later = mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> after", thread_ts=event["event"]["ts"])
    await post_signed(slack.url, later, SIGNING_SECRET)
    posts = await slack.api.wait_posts(2)
    assert [p.text for p in posts] == ["ok: only once", "ok: after"]
    assert len(model_server.requests) == 2
    assert counter(slack, "switchboard_inbound_duplicates_total", platform="slack") == 2


async def test_rate_limited_post_waits_retry_after_and_posts_once(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    slack.api.fail_next("chat.postMessage", Failure.rate_limited(1))
    await post_signed(slack.url, message(DM, ALICE, "busy day"), SIGNING_SECRET)
    [post] = await slack.api.wait_posts(1)
    attempts = slack.api.calls_to("chat.postMessage")
    assert len(attempts) == 2, "one refused attempt, then the accepted one; the client itself must not retry"
    assert post.text == "ok: busy day"
    assert counter(slack, "switchboard_delivery_retries_total", platform="slack", reason="rate_limited") == 1


async def test_long_reply_arrives_as_ordered_chunks_within_the_limit(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    paragraphs = [f"Paragraph {i:03d}. " + "words " * 60 for i in range(40)]
    model_server.script(Text("\n\n".join(paragraphs)))
    ts = next_ts()
    await post_signed(slack.url, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> write a lot", ts=ts), SIGNING_SECRET)
    api = slack.api

    def showing() -> list[str]:  # what each message shows now (the first one was streamed, then edited)
        return api.screen(CHANNEL)

    def numbers() -> list[int]:
        return [int(word) for text in showing() for word in text.replace(".", " ").split() if word.isdigit()]

    await api.wait_for(lambda: numbers() == list(range(40)))
    assert len(showing()) >= 3
    assert all(len(text) <= slack.adapter.capabilities.max_message_length for text in showing())
    assert all(p.thread_ts == ts for p in api.posts)
    assert all(m.thread_ts == ts for m in api.streams.messages.values())


async def test_own_and_other_bots_messages_start_no_turn(start_slack: SlackFactory, model_server: ModelServer) -> None:
    slack = await start_slack("http")
    own = message(DM, BOT_USER_ID, "my own echo", bot_id=BOT_ID)
    other_bot = message(DM, None, "beep", subtype="bot_message", bot_id="B0OTHER")
    other_bot_mention = mention(CHANNEL, "U0OTHERBOT", f"<@{BOT_USER_ID}> hello bot", bot_id="B0OTHER")
    for payload in (own, other_bot, other_bot_mention):
        assert (await post_signed(slack.url, payload, SIGNING_SECRET)).status == 200
    # Every one of them was handled before its POST returned; a person's message still gets its answer.
    await post_signed(slack.url, message(DM, ALICE, "a person"), SIGNING_SECRET)
    posts = await slack.api.wait_posts(1)
    assert [p.text for p in posts] == ["ok: a person"]
    assert len(model_server.requests) == 1
    assert counter(slack, "switchboard_inbound_ignored_total", platform="slack", reason="bot") == 2


async def test_edits_deletions_and_channel_copies_of_a_mention_start_no_turn(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    ts = next_ts()
    edited = message(DM, None, "", subtype="message_changed", message={"type": "message", "user": ALICE, "text": "x"})
    deleted = message(DM, None, "", subtype="message_deleted", deleted_ts=ts)
    # Slack sends a mention in a channel twice: as `message` (message.channels) and as `app_mention`.
    channel_copy = message(CHANNEL, ALICE, f"<@{BOT_USER_ID}> one question", channel_type="channel", ts=ts)
    the_mention = mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> one question", ts=ts)
    for payload in (edited, deleted, channel_copy, the_mention):
        assert (await post_signed(slack.url, payload, SIGNING_SECRET)).status == 200
    await post_signed(slack.url, message(DM, ALICE, "marker"), SIGNING_SECRET)
    # The marker's DM and the mention's thread are separate sessions, answered in either order.
    await slack.api.wait_for(lambda: {"ok: marker", "ok: one question"} <= {p.text for p in slack.api.posts})
    assert sorted(p.text for p in slack.api.posts) == ["ok: marker", "ok: one question"]
    assert len(model_server.requests) == 2


async def test_a_file_share_whose_file_cannot_be_read_is_told_and_its_words_answered(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    files = [{"id": "F0CAT", "name": "cat.png", "mimetype": "image/png", "size": 2048}]  # Slack has no such file
    await post_signed(slack.url, message(DM, ALICE, "look", subtype="file_share", files=files), SIGNING_SECRET)
    notice, answer = await slack.api.wait_posts(2)
    assert notice.text.startswith("I couldn't use cat.png: ") and answer.text.startswith("ok: look")
    assert "[cat.png could not be used: " in model_server.last_request.last_user_text


async def test_unknown_user_in_a_dm_is_offered_a_pairing_code(start_slack: SlackFactory, model_server: ModelServer) -> None:
    slack = await start_slack("http")
    await post_signed(slack.url, message("D0STRANGER", STRANGER, "who are you"), SIGNING_SECRET)
    [post] = await slack.api.wait_posts(1)
    assert post.channel == "D0STRANGER" and STRANGER in post.text
    assert model_server.requests == []


async def test_channel_outside_allowed_channels_is_ignored(start_slack: SlackFactory, model_server: ModelServer) -> None:
    slack = await start_slack("http", allowed_channels=["C0OTHER"])
    await post_signed(slack.url, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> anyone?"), SIGNING_SECRET)
    await post_signed(slack.url, mention("C0OTHER", ALICE, f"<@{BOT_USER_ID}> here?"), SIGNING_SECRET)
    posts = await slack.api.wait_posts(1)
    assert [(p.channel, p.text[:9]) for p in posts] == [("C0OTHER", "ok: here?")]
    assert len(model_server.requests) == 1


async def test_health_reports_the_adapter_running(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    snapshot = await slack.gateway.snapshot()
    assert snapshot["adapters"]["slack"]["state"] == "running"
    assert slack.adapter.bot_username == "switchbot"

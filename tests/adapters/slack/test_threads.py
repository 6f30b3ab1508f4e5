"""Thread replies without a mention, end to end: real slack-bolt, the real gateway, the fake Slack.

Once the bot answered in a channel thread (or was mentioned in it), later
replies there continue the conversation without a new mention; elsewhere in
channels only a mention starts a turn.

"Ignored by the adapter" is checked through the gateway inbox: Slack gets its
answer only after the listener finished, so by the time a delivery returned,
a message the adapter handed over is already in the inbox. Probing the inbox
with the message's id therefore tells "never handed over" (the probe is
accepted) from "handed over" (the probe is a duplicate).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.adapters.slack.conftest import (
    ALICE,
    BOB,
    CHANNEL,
    DM,
    SIGNING_SECRET,
    STRANGER,
    RunningSlack,
    SlackFactory,
    counter,
)
from tests.fakes.model_server import ModelServer
from tests.fakes.slack_api import BOT_USER_ID, ApiCall, Post, mention, message, message_key, next_ts, post_signed

pytestmark = pytest.mark.parametrize("mode", ["http", "socket"])


async def deliver(slack: RunningSlack, payload: dict[str, Any]) -> None:
    """Deliver one event and return once Slack got its answer (HTTP response or Socket Mode ack)."""
    if slack.adapter.http_url:
        assert (await post_signed(slack.url, payload, SIGNING_SECRET)).status == 200
    else:
        await slack.api.wait_acked(await slack.api.push_event(payload))


async def start(start_slack: SlackFactory, mode: str) -> RunningSlack:
    slack = await start_slack(mode)
    if mode == "socket":
        await slack.api.wait_connections(1)
    return slack


def reply(user: str, text: str, thread_ts: str, **extra: Any) -> dict[str, Any]:
    """A channel message in a thread, as ``message.channels`` delivers it."""
    return message(CHANNEL, user, text, channel_type="channel", thread_ts=thread_ts, **extra)


def starts(posts: list[Post], *prefixes: str) -> bool:
    """The posts, in order, begin with these texts (the fake model appends its own words)."""
    return len(posts) == len(prefixes) and all(p.text.startswith(x) for p, x in zip(posts, prefixes, strict=True))


async def was_handed_over(slack: RunningSlack, payload: dict[str, Any]) -> bool:
    return not await slack.store.inbox_accept("slack", message_key(payload), "probe", {})


async def open_thread(slack: RunningSlack, text: str = "first question") -> str:
    """Alice mentions the bot at the top level; returns the root ts once the reply opened the thread."""
    root = mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> {text}", ts=next_ts())
    slack.api.record(root)
    await deliver(slack, root)
    await slack.api.wait_for(lambda: any(p.thread_ts == root["event"]["ts"] for p in slack.api.posts))
    return str(root["event"]["ts"])


async def test_unmentioned_follow_up_in_a_bot_thread_continues_the_session_in_that_thread(
    start_slack: SlackFactory, model_server: ModelServer, mode: str
) -> None:
    slack = await start(start_slack, mode)
    root = await open_thread(slack)
    # Bob joins the thread without mentioning the bot: a thread is one conversation for everyone in it.
    await deliver(slack, reply(BOB, "and what about tomorrow?", root))
    posts = await slack.api.wait_posts(2)
    assert [(p.channel, p.thread_ts) for p in posts] == [(CHANNEL, root), (CHANNEL, root)]
    assert posts[1].text.startswith("ok: and what about tomorrow?")
    history = json.dumps(model_server.last_request.messages)
    assert "first question" in history and "ok: first question" in history
    assert slack.api.calls_to("conversations.replies") == [], "the adapter remembered its own thread"


async def test_reply_in_a_thread_the_bot_never_joined_is_ignored(
    start_slack: SlackFactory, model_server: ModelServer, mode: str
) -> None:
    slack = await start(start_slack, mode)
    parent = message(CHANNEL, BOB, "lunch?", channel_type="channel")
    slack.api.record(parent)
    root = parent["event"]["ts"]
    first, second = reply(ALICE, "pizza", root), reply(ALICE, "or sushi", root)
    for payload in (first, second):
        slack.api.record(payload)
        await deliver(slack, payload)
    assert not await was_handed_over(slack, first) and not await was_handed_over(slack, second)
    lookups = slack.api.calls_to("conversations.replies")
    assert [(c.args["channel"], c.args["ts"]) for c in lookups] == [(CHANNEL, root)], "the no is cached"
    await deliver(slack, message(DM, ALICE, "marker"))
    await slack.api.wait_for(lambda: any(p.text == "ok: marker" for p in slack.api.posts))
    assert [p.text for p in slack.api.posts] == ["ok: marker"]
    assert len(model_server.requests) == 1


async def test_mention_inside_a_bot_thread_arrives_twice_and_is_answered_once(
    start_slack: SlackFactory, model_server: ModelServer, mode: str
) -> None:
    slack = await start(start_slack, mode)
    root = await open_thread(slack)
    ts = next_ts()
    text = f"<@{BOT_USER_ID}> second question"
    # Slack sends it as `message` (message.channels) and as `app_mention`, each with its own event_id.
    as_message = reply(ALICE, text, root, ts=ts)
    as_mention = mention(CHANNEL, ALICE, text, ts=ts, thread_ts=root)
    assert as_message["event_id"] != as_mention["event_id"]
    await deliver(slack, as_message)
    await deliver(slack, as_mention)
    # Redelivery of either envelope is recognised as well.
    await deliver(slack, as_mention)
    await deliver(slack, reply(ALICE, "third, no mention", root))
    posts = await slack.api.wait_posts(3)
    assert starts(posts, "ok: first question", "ok: second question", "ok: third, no mention")
    assert all(p.thread_ts == root for p in posts)
    assert len(model_server.requests) == 3
    assert counter(slack, "switchboard_inbound_duplicates_total", platform="slack") == 2


async def test_after_a_restart_a_follow_up_in_the_old_thread_is_answered_via_conversations_replies(
    start_slack: SlackFactory, model_server: ModelServer, mode: str
) -> None:
    before = await start(start_slack, mode)
    root = await open_thread(before, "remember the number 42")
    await before.gateway.shutdown()
    await before.api.close_sockets()

    after = await start(start_slack, mode)  # a new adapter with an empty thread memory, the same database
    if mode == "socket":
        await after.api.wait_connections(2)
    assert after.adapter is not before.adapter
    follow_up = reply(ALICE, "which number was it?", root)
    after.api.record(follow_up)
    await deliver(after, follow_up)
    posts = await after.api.wait_posts(2)
    assert posts[1].thread_ts == root and starts(posts[1:], "ok: which number was it?")
    [lookup] = thread_lookups(after)
    assert (lookup.args["channel"], lookup.args["ts"]) == (CHANNEL, root)
    assert "remember the number 42" in json.dumps(model_server.last_request.messages)
    # The answer is remembered: the next reply needs no lookup.
    await deliver(after, reply(BOB, "thanks", root))
    await after.api.wait_posts(3)
    assert len(thread_lookups(after)) == 1


def thread_lookups(run: RunningSlack) -> list[ApiCall]:
    """The calls that asked whether the bot takes part in a thread (the catch-up at start also reads the thread's
    replies, from the last message stored: those name ``oldest``)."""
    return [call for call in run.api.calls_to("conversations.replies") if "oldest" not in call.args]


async def test_unmentioned_top_level_channel_message_is_ignored(
    start_slack: SlackFactory, model_server: ModelServer, mode: str
) -> None:
    slack = await start(start_slack, mode)
    await open_thread(slack)
    chatter = message(CHANNEL, ALICE, "just chatting", channel_type="channel")
    await deliver(slack, chatter)
    assert not await was_handed_over(slack, chatter)
    assert slack.api.calls_to("conversations.replies") == []
    await deliver(slack, message(DM, ALICE, "marker"))
    await slack.api.wait_for(lambda: any(p.text == "ok: marker" for p in slack.api.posts))
    assert starts(slack.api.posts, "ok: first question", "ok: marker")
    assert len(model_server.requests) == 2


async def test_without_require_mention_every_channel_message_is_answered_in_its_thread(
    start_slack: SlackFactory, model_server: ModelServer, mode: str
) -> None:
    slack = await start_slack(mode, require_mention=False)
    if mode == "socket":
        await slack.api.wait_connections(1)
    chatter = message(CHANNEL, ALICE, "just chatting", channel_type="channel", ts=next_ts())
    await deliver(slack, chatter)
    (post,) = await slack.api.wait_posts(1)
    root = chatter["event"]["ts"]
    assert post.thread_ts == root and post.text.startswith("ok: just chatting")
    # A mention arrives twice (message and app_mention): one turn, one reply.
    both = f"<@{BOT_USER_ID}> and you?"
    ts = next_ts()
    await deliver(slack, message(CHANNEL, BOB, both, channel_type="channel", ts=ts))
    await deliver(slack, mention(CHANNEL, BOB, both, ts=ts))
    posts = await slack.api.wait_posts(2)
    assert [p.thread_ts for p in posts] == [root, ts] and len(model_server.requests) == 2
    assert slack.api.calls_to("conversations.replies") == []


async def test_in_a_bot_thread_edits_and_bots_are_skipped_broadcasts_count_and_access_rules_hold(
    start_slack: SlackFactory, model_server: ModelServer, mode: str
) -> None:
    slack = await start(start_slack, mode)
    root = await open_thread(slack)
    edit = reply(ALICE, "", root, subtype="message_changed", message={"user": ALICE, "text": "edited"})
    other_bot = reply("U0OTHERBOT", "beep", root, bot_id="B0OTHER")
    joined = reply(BOB, "", root, subtype="channel_join")
    for payload in (edit, other_bot, joined):
        await deliver(slack, payload)
        assert not await was_handed_over(slack, payload)
    # A stranger reaches the gateway, whose allowed_users still apply: no reply.
    stranger = reply(STRANGER, "let me in", root)
    await deliver(slack, stranger)
    assert await was_handed_over(slack, stranger)
    # "Also send to channel" is a thread reply all the same.
    await deliver(slack, reply(ALICE, "shared with everyone", root, subtype="thread_broadcast"))
    posts = await slack.api.wait_posts(2)
    assert [p.thread_ts for p in posts] == [root, root]
    assert starts(posts, "ok: first question", "ok: shared with everyone")
    assert len(model_server.requests) == 2


async def test_a_mention_in_someone_elses_thread_makes_it_the_bots_without_a_lookup(
    start_slack: SlackFactory, model_server: ModelServer, mode: str
) -> None:
    slack = await start(start_slack, mode)
    parent = message(CHANNEL, BOB, "lunch?", channel_type="channel")
    root = parent["event"]["ts"]
    ts, text = next_ts(), f"<@{BOT_USER_ID}> where is good?"
    await deliver(slack, reply(ALICE, text, root, ts=ts))  # the message copy, while the thread is not the bot's
    await deliver(slack, mention(CHANNEL, ALICE, text, ts=ts, thread_ts=root))
    await deliver(slack, reply(BOB, "somewhere cheap", root))
    posts = await slack.api.wait_posts(2)
    assert [p.thread_ts for p in posts] == [root, root]
    assert starts(posts, "ok: where is good?", "ok: somewhere cheap")
    assert slack.api.calls_to("conversations.replies") == []
    assert len(model_server.requests) == 2


async def test_commands_typed_after_a_mention_or_a_space_are_answered_as_commands(
    start_slack: SlackFactory, model_server: ModelServer, mode: str
) -> None:
    # Slack's message box takes a leading "/" as one of its own slash commands: the README says to
    # mention the bot first, or to type a space before the slash.
    slack = await start(start_slack, mode)
    await deliver(slack, mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> /status"))
    await deliver(slack, message(DM, ALICE, " /whoami"))
    posts = await slack.api.wait_posts(2)
    assert posts[0].text.startswith("No conversation yet") and posts[1].text.startswith("Name: ")
    assert model_server.requests == []

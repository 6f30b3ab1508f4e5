"""Catching up after a lost Socket Mode session: the real SlackAdapter reads the fake Slack's history.

What ``catch_up`` returns must be what the live events would have handed over, message for
message (the same ``{channel}:{ts}`` event id, so the gateway's inbox drops what it has), so the
tests deliver the same messages live afterwards and compare.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from adapters.contract import CatchUpPoint, CatchUpWindow, ChatType, InboundMessage, RateLimited
from tests.adapters.slack.conftest import ALICE, BOB, CHANNEL, DM, Running, Start, ago
from tests.fakes.slack_api import BOT_ID, BOT_USER_ID, Failure, mention, message, message_key
from tests.waiting import eventually



def reply(user: str, text: str, thread_ts: str, **extra: Any) -> dict[str, Any]:
    return message(CHANNEL, user, text, channel_type="channel", thread_ts=thread_ts, **extra)


def window(*, since: float | None = None, per_chat: int = 50, total: int = 500) -> CatchUpWindow:
    return CatchUpWindow(since=time.time() - 3600 if since is None else since, per_chat=per_chat, total=total)


async def live_copies(slack: Running, payloads: list[dict[str, Any]]) -> list[InboundMessage]:
    """What the live events of ``payloads`` hand to intake (delivered now, one by one)."""
    before = len(slack.received)
    for payload in payloads:
        await slack.api.wait_acked(await slack.api.push_event(payload))
    return slack.received[before:]


async def open_thread(slack: Running, seconds_ago: float = 600) -> str:
    root = mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> first", ts=ago(seconds_ago))
    await slack.deliver(root)
    return str(root["event"]["ts"])


async def test_after_a_lost_session_catch_up_returns_exactly_the_lost_messages_as_live_events(
    start_adapter: Start,
) -> None:
    slack = await start_adapter()
    slack.api.users.add(ALICE, "alice")
    root = await open_thread(slack)
    seen = message(DM, ALICE, "seen live", ts=ago(500))
    await slack.deliver(seen)
    lost = [
        message(DM, ALICE, "lost in the DM", ts=ago(300)),
        reply(ALICE, "lost in the thread", root, ts=ago(200)),
        reply(BOB, f"<@{BOT_USER_ID}> lost mention in the thread", root, ts=ago(100)),
    ]
    await slack.api.reconnect(lost=lost)
    await eventually(lambda: slack.gaps, "the gap of the new session")
    points = [
        CatchUpPoint(DM, ChatType.DM, after=seen["event"]["ts"]),
        CatchUpPoint(CHANNEL, ChatType.GROUP, thread_id=root, after=root),
    ]
    caught = await slack.adapter.catch_up(points, window())
    assert [m.event_id for m in caught] == [message_key(p) for p in lost], "oldest first, nothing else"
    assert [m.timestamp for m in caught] == [float(p["event"]["ts"]) for p in lost]
    # Live, the mention comes as app_mention (and as message): the first copy is the one the inbox keeps.
    as_mention = mention(CHANNEL, BOB, lost[2]["event"]["text"], ts=lost[2]["event"]["ts"], thread_ts=root)
    assert caught == await live_copies(slack, [lost[0], lost[1], as_mention])
    assert caught[0].user_name == "alice"


async def test_the_bots_own_and_other_bots_messages_and_non_messages_are_left_out(start_adapter: Start) -> None:
    slack = await start_adapter()
    root = await open_thread(slack)
    first = message(DM, ALICE, "first", ts=ago(500))
    await slack.deliver(first)
    for payload in (
        message(DM, BOT_USER_ID, "own reply", bot_id=BOT_ID, ts=ago(400)),
        message(DM, None, "another bot", bot_id="B0OTHER", subtype="bot_message", ts=ago(390)),
        message(DM, ALICE, "", subtype="message_changed", ts=ago(380)),
        reply("U0OTHERBOT", "another bot in the thread", root, bot_id="B0OTHER", ts=ago(370)),
        reply(BOT_USER_ID, "own thread reply", root, bot_id=BOT_ID, ts=ago(360)),
        reply(ALICE, f"<@{BOT_USER_ID}> has joined the channel", root, subtype="channel_join", ts=ago(350)),
        message(CHANNEL, ALICE, "top-level chatter", channel_type="channel", ts=ago(340)),
    ):
        slack.api.record(payload)
    wanted = [message(DM, ALICE, "a person", ts=ago(300)), reply(ALICE, "a person in the thread", root, ts=ago(200))]
    for payload in wanted:
        slack.api.record(payload)
    points = [
        CatchUpPoint(DM, ChatType.DM, after=first["event"]["ts"]),
        CatchUpPoint(CHANNEL, ChatType.GROUP, thread_id=root, after=root),
        CatchUpPoint(CHANNEL, ChatType.GROUP, after=root),
    ]
    caught = await slack.adapter.catch_up(points, window())
    assert [m.text for m in caught] == ["a person", "a person in the thread"]


async def test_a_point_with_nothing_stored_reads_from_the_windows_start(start_adapter: Start) -> None:
    slack = await start_adapter()
    old, recent = message(DM, ALICE, "too old", ts=ago(7200)), message(DM, ALICE, "recent", ts=ago(60))
    for payload in (old, recent):
        slack.api.record(payload)
    since = time.time() - 3600
    caught = await slack.adapter.catch_up([CatchUpPoint(DM, ChatType.DM)], window(since=since))
    assert [m.text for m in caught] == ["recent"]
    [call] = slack.api.calls_to("conversations.history")
    assert float(call.args["oldest"]) == round(since, 6)


async def test_a_long_history_is_paged_and_the_newest_per_chat_are_kept(start_adapter: Start) -> None:
    slack = await start_adapter()
    root = await open_thread(slack, 3500)
    start = time.time() - 3000
    dm = [message(DM, ALICE, f"dm {n}", ts=f"{int(start) + n}.000001") for n in range(250)]
    thread = [reply(ALICE, f"thread {n}", root, ts=f"{int(start) + n}.000002") for n in range(250)]
    for payload in dm + thread:
        slack.api.record(payload)
    points = [CatchUpPoint(DM, ChatType.DM), CatchUpPoint(CHANNEL, ChatType.GROUP, thread_id=root, after=root)]
    caught = await slack.adapter.catch_up(points, window(per_chat=300))
    assert [m.text for m in caught if m.chat_type is ChatType.DM] == [f"dm {n}" for n in range(250)]
    assert len([m for m in caught if m.thread_id == root]) == 250
    history_calls = slack.api.calls_to("conversations.history")
    assert len(history_calls) == 2 and history_calls[1].args.get("cursor")
    assert len(slack.api.calls_to("conversations.replies")) == 2

    newest = await slack.adapter.catch_up(points, window(per_chat=5))
    assert [m.text for m in newest if m.chat_type is ChatType.DM] == [f"dm {n}" for n in range(245, 250)]
    assert [m.text for m in newest if m.thread_id == root] == [f"thread {n}" for n in range(245, 250)]

    overall = await slack.adapter.catch_up(points, window(per_chat=5, total=3))
    assert [m.text for m in overall] == ["thread 248", "dm 249", "thread 249"], "the newest three, oldest first"


async def test_a_conversation_the_bot_cannot_read_is_skipped(start_adapter: Start) -> None:
    slack = await start_adapter()
    wanted = message(DM, ALICE, "readable", ts=ago(60))
    slack.api.record(wanted)
    points = [CatchUpPoint("C0GONE", ChatType.GROUP, thread_id="1.000001"), CatchUpPoint(DM, ChatType.DM)]
    caught = await slack.adapter.catch_up(points, window())
    assert [m.event_id for m in caught] == [message_key(wanted)]


async def test_http_mode_catches_up_too(start_adapter: Start) -> None:
    slack = await start_adapter("http")
    wanted = message(DM, ALICE, "never posted to the events URL", ts=ago(60))
    slack.api.record(wanted)
    caught = await slack.adapter.catch_up([CatchUpPoint(DM, ChatType.DM)], window())
    assert [m.event_id for m in caught] == [message_key(wanted)]


async def test_a_short_rate_limit_is_waited_for_and_a_long_one_fails_the_catch_up(start_adapter: Start) -> None:
    slack = await start_adapter()
    wanted = message(DM, ALICE, "behind a rate limit", ts=ago(60))
    slack.api.record(wanted)
    slack.api.fail_next("conversations.history", Failure.rate_limited(1))
    caught = await slack.adapter.catch_up([CatchUpPoint(DM, ChatType.DM)], window())
    assert [m.event_id for m in caught] == [message_key(wanted)]
    assert len(slack.api.calls_to("conversations.history")) == 2
    slack.api.fail_next("conversations.history", Failure.rate_limited(600))
    with pytest.raises(RateLimited):
        await slack.adapter.catch_up([CatchUpPoint(DM, ChatType.DM)], window())

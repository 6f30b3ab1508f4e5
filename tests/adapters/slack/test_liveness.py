"""The Slack adapter notices a deaf socket and a lost session: the real SlackAdapter (slack-bolt,
slack_sdk's Socket Mode client) against the fake Slack, without a gateway around it.

A deaf socket (open, pings answered, no events) is found by the liveness probe, which reads the
open conversations' history; a new Socket Mode session, whether Slack dropped the old one or the
gateway asked for it, is reported as a gap so the gateway catches up.
"""

from __future__ import annotations

import time

from adapters.contract import AdapterState, CatchUpPoint, CatchUpWindow, ChatType
from tests.adapters.slack.conftest import ALICE, CHANNEL, DM, SIGNING_SECRET, Running, Start, ago
from tests.fakes.slack_api import BOT_USER_ID, Failure, mention, message, post_signed
from tests.waiting import eventually

def dm_point(after: str) -> CatchUpPoint:
    return CatchUpPoint(DM, ChatType.DM, after=after, after_time=float(after))


async def test_a_listening_socket_passes_the_probe(start_adapter: Start) -> None:
    slack = await start_adapter()
    first = message(DM, ALICE, "hello", ts=ago(120))
    await slack.deliver(first)
    # The gateway's last stored message may lag behind: what came over the socket is not "missed".
    await slack.deliver(message(DM, ALICE, "and more", ts=ago(60)))
    result = await slack.adapter.probe_liveness([dm_point(first["event"]["ts"])])
    assert result.ok and not result.missed, result
    assert result.latency is not None
    assert "auth.test" in result.detail and "ping" in result.detail
    assert [call.args["oldest"] for call in slack.api.calls_to("conversations.history")] == [first["event"]["ts"]]


async def deaf_after_one(slack: Running, *, second_sent_ago: float) -> CatchUpPoint:
    """Alice's first DM arrives; then the socket goes deaf and her second is dropped. Returns the DM's point
    (the first message is the last the gateway stored)."""
    first = message(DM, ALICE, "are you there?", ts=ago(120))
    await slack.deliver(first)
    slack.api.deaf = True
    await slack.api.say(message(DM, ALICE, "hello??", ts=ago(second_sent_ago)))
    assert slack.api.dropped and len(slack.received) == 1
    return dm_point(first["event"]["ts"])


async def test_a_deaf_socket_fails_the_probe_with_missed_messages(start_adapter: Start) -> None:
    slack = await start_adapter()
    point = await deaf_after_one(slack, second_sent_ago=60)
    assert slack.adapter.status().state is AdapterState.RUNNING, "the socket itself looks fine"
    result = await slack.adapter.probe_liveness([point])
    assert (result.ok, result.missed) == (False, True), result
    assert DM in result.detail and "1 message" in result.detail


async def test_a_message_still_on_its_way_is_not_counted_as_missed(start_adapter: Start) -> None:
    slack = await start_adapter()
    point = await deaf_after_one(slack, second_sent_ago=0)
    result = await slack.adapter.probe_liveness([point])
    assert result.ok and "1 conversation(s) read: nothing missed" in result.detail, result


async def test_a_deaf_thread_is_found_through_conversations_replies(start_adapter: Start) -> None:
    slack = await start_adapter()
    root = mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> question", ts=ago(300))
    await slack.deliver(root)
    root_ts = root["event"]["ts"]
    slack.api.deaf = True
    await slack.api.say(message(CHANNEL, ALICE, "follow-up", channel_type="channel", thread_ts=root_ts, ts=ago(60)))
    point = CatchUpPoint(CHANNEL, ChatType.GROUP, thread_id=root_ts, after=root_ts)
    result = await slack.adapter.probe_liveness([point])
    assert (result.ok, result.missed) == (False, True), result
    [call] = slack.api.calls_to("conversations.replies")
    assert (call.args["ts"], call.args["oldest"]) == (root_ts, root_ts)


async def test_an_unreachable_web_api_fails_the_probe_without_raising(start_adapter: Start) -> None:
    slack = await start_adapter()
    slack.api.fail_next("auth.test", Failure.server_error())
    result = await slack.adapter.probe_liveness([])
    assert not result.ok and not result.missed
    assert result.detail.startswith("auth.test failed")


async def test_an_unreadable_conversation_does_not_fail_the_probe(start_adapter: Start) -> None:
    slack = await start_adapter()
    slack.api.fail_next("conversations.history", Failure.error("missing_scope"))
    result = await slack.adapter.probe_liveness([dm_point(ago(60))])
    assert result.ok, result
    assert "not checked" in result.detail and "missing_scope" in result.detail


async def test_slack_dropping_the_socket_reports_a_gap_after_the_new_hello(start_adapter: Start) -> None:
    slack = await start_adapter()
    assert slack.gaps == [], "the first session is no gap"
    await slack.api.reconnect(lost=[message(DM, ALICE, "sent while reconnecting", ts=ago(30))])
    await eventually(lambda: slack.gaps, "a gap after the second hello")
    assert slack.api.connections == 2
    assert len(slack.gaps) == 1 and "new session" in slack.gaps[0]
    assert slack.received == [], "the lost message never came over the socket"


async def test_a_reconnect_on_request_degrades_until_the_new_session_then_reports_the_gap(start_adapter: Start) -> None:
    slack = await start_adapter()
    slack.api.deaf = True
    await slack.adapter.reconnect("probe: DM D0ALICE: 1 message never arrived")
    status = slack.adapter.status()
    assert status.state is AdapterState.DEGRADED and "probe: DM D0ALICE" in status.detail
    await eventually(lambda: slack.gaps, "a gap after the requested session")
    assert slack.api.connections == 2
    assert "reconnected on request" in slack.gaps[0] and "probe: DM D0ALICE" in slack.gaps[0]
    assert slack.adapter.status().state is AdapterState.RUNNING
    # The new session hears again.
    slack.api.deaf = False
    await slack.deliver(message(DM, ALICE, "back"))
    assert [m.text for m in slack.received] == ["back"]


async def test_http_mode_reports_no_gap_and_a_reconnect_waits_for_slack_to_call_again(start_adapter: Start) -> None:
    slack = await start_adapter("http")
    await slack.adapter.reconnect("probe: 1 message never arrived")
    assert slack.adapter.status().state is AdapterState.DEGRADED
    url = slack.adapter.http_url
    assert url is not None
    assert (await post_signed(url, message(DM, ALICE, "hi again"), SIGNING_SECRET)).status == 200
    assert slack.adapter.status().state is AdapterState.RUNNING
    assert slack.gaps == [] and [m.event_id for m in slack.received] != []


async def test_a_caught_up_message_is_not_counted_as_missed_by_the_next_probe(start_adapter: Start) -> None:
    slack = await start_adapter()
    point = await deaf_after_one(slack, second_sent_ago=60)
    [caught] = await slack.adapter.catch_up([point], CatchUpWindow(since=time.time() - 3600))
    assert caught.text == "hello??"
    # The gateway stored it, but a point computed before that still names the first message.
    assert (await slack.adapter.probe_liveness([point])).ok

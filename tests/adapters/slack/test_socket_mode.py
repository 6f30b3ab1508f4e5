"""Socket Mode end to end: the real slack-bolt handler connects to the fake's WebSocket and acks envelopes."""

from __future__ import annotations

from tests.adapters.slack.conftest import ALICE, CHANNEL, DM, SlackFactory
from tests.fakes.model_server import ModelServer
from tests.fakes.slack_api import APP_TOKEN, BOT_ID, BOT_USER_ID, mention, message, message_key, next_ts


async def test_connects_with_the_app_token_and_reports_running(start_slack: SlackFactory) -> None:
    slack = await start_slack("socket")
    await slack.api.wait_connections(1)
    [open_call] = slack.api.calls_to("apps.connections.open")
    assert open_call.token == APP_TOKEN
    assert (await slack.gateway.snapshot())["adapters"]["slack"]["state"] == "running"


async def test_mention_is_acked_and_answered_in_its_thread(start_slack: SlackFactory) -> None:
    slack = await start_slack("socket")
    await slack.api.wait_connections(1)
    ts = next_ts()
    envelope_id = await slack.api.push_event(mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> socket hello", ts=ts))
    ack = await slack.api.wait_acked(envelope_id)
    assert ack == {"envelope_id": envelope_id}
    [post] = await slack.api.wait_posts(1)
    assert (post.channel, post.thread_ts) == (CHANNEL, ts)
    assert post.text.startswith("ok: socket hello")


async def test_direct_message_round_trip_and_ack_after_the_inbox_write(start_slack: SlackFactory) -> None:
    slack = await start_slack("socket")
    await slack.api.wait_connections(1)
    payload = message(DM, ALICE, "private socket")
    await slack.api.wait_acked(await slack.api.push_event(payload))
    # The ack means the event is already stored: the inbox refuses it as a duplicate.
    assert not await slack.store.inbox_accept("slack", message_key(payload), "probe", {})
    [post] = await slack.api.wait_posts(1)
    assert (post.channel, post.thread_ts, post.text) == (DM, None, "ok: private socket")


async def test_every_envelope_is_acked_including_skipped_events(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("socket")
    await slack.api.wait_connections(1)
    skipped = [
        message(DM, None, "", subtype="message_changed", message={"user": ALICE, "text": "edited"}),
        message(DM, BOT_USER_ID, "own echo", bot_id=BOT_ID),
        message(CHANNEL, ALICE, "chatter without a mention", channel_type="channel"),
        {**mention(CHANNEL, ALICE, "x"), "event": {"type": "reaction_added", "user": ALICE, "reaction": "eyes"}},
    ]
    envelope_ids = [await slack.api.push_event(payload) for payload in skipped]
    envelope_ids.append(await slack.api.push_event(message(DM, ALICE, "the real one")))
    for envelope_id in envelope_ids:
        await slack.api.wait_acked(envelope_id)
    posts = await slack.api.wait_posts(1)
    assert [p.text for p in posts] == ["ok: the real one"]
    assert len(model_server.requests) == 1


async def test_redelivered_envelope_is_acked_and_answered_once(start_slack: SlackFactory, model_server: ModelServer) -> None:
    slack = await start_slack("socket")
    await slack.api.wait_connections(1)
    payload = message(DM, ALICE, "say it once")
    first = await slack.api.push_event(payload)
    again = await slack.api.push_event(payload, retry_attempt=1, retry_reason="timeout")
    await slack.api.wait_acked(first)
    await slack.api.wait_acked(again)
    await slack.api.wait_acked(await slack.api.push_event(message(DM, ALICE, "and then this")))
    posts = await slack.api.wait_posts(2)
    assert [p.text for p in posts] == ["ok: say it once", "ok: and then this"]
    assert len(model_server.requests) == 2


async def test_reconnects_after_slack_closes_the_socket(start_slack: SlackFactory) -> None:
    slack = await start_slack("socket")
    await slack.api.wait_connections(1)
    await slack.api.close_sockets()
    await slack.api.wait_connections(2)
    assert len(slack.api.calls_to("apps.connections.open")) >= 2
    await slack.api.wait_acked(await slack.api.push_event(message(DM, ALICE, "still there?")))
    [post] = await slack.api.wait_posts(1)
    assert post.text == "ok: still there?"

"""A chunk Slack accepted but whose answer was lost is not posted twice (chat.postMessage has no idempotency key).

Every post carries the chunk's nonce in message metadata; when the gateway says an
earlier attempt may have landed (``maybe_sent``), the adapter looks for it first.
The fake Slack carries out the post and then drops the connection
(:meth:`Failure.answer_lost`), so the client sees a network error, the gateway
retries (TransientDeliveryError, then its backoff) and the retry must find the
first post instead of posting again.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest_asyncio
from structlog.testing import capture_logs

from adapters.contract import Markup, OutboundMessage
from adapters.slack import SlackAdapter
from adapters.slack.adapter import SlackSettings
from adapters.slack.resend import EVENT_TYPE
from gateway.delivery.policy import chunk_nonce
from storage import OutboxRecord
from tests.adapters.slack.conftest import ALICE, CHANNEL, DM, SIGNING_SECRET, RunningSlack, SlackFactory
from tests.fakes.slack_api import BOT_TOKEN, Failure, FakeSlack, mention, message, post_signed
from tests.waiting import eventually

HANG_GUARD = 30.0
LOOKUPS = ("conversations.history", "conversations.replies")


async def settled_row(slack: RunningSlack, outbox_id: int = 1) -> OutboxRecord:
    """The outbox row once it is no longer pending."""

    async def settled() -> OutboxRecord | None:
        row = await slack.store.outbox_get(outbox_id)
        return row if row is not None and row.status != "pending" else None

    return await eventually(settled, f"outbox row {outbox_id} to be settled", timeout=HANG_GUARD)


def lookups(api: FakeSlack) -> list[str]:
    return [call.method for call in api.calls if call.method in LOOKUPS]


async def test_lost_answer_in_a_dm_is_found_again_not_posted_twice(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    slack.api.fail_next("chat.postMessage", Failure.answer_lost())
    await post_signed(slack.url, message(DM, ALICE, "hello"), SIGNING_SECRET)
    row = await settled_row(slack)
    assert len(slack.api.calls_to("chat.postMessage")) == 1, "the retry must not post again"
    [post] = slack.api.posts
    assert post.text == "ok: hello"
    assert (row.status, row.platform_message_id) == ("sent", post.ts)
    [lookup] = slack.api.calls_to("conversations.history")
    assert lookup.args["channel"] == DM and lookup.args["include_all_metadata"] in ("1", "true", True)


async def test_lost_answer_in_a_thread_is_found_with_conversations_replies(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    asked = mention(CHANNEL, ALICE, "<@U0BOT> in thread")
    slack.api.record(asked)  # the thread's parent, as Slack has it
    slack.api.fail_next("chat.postMessage", Failure.answer_lost())
    await post_signed(slack.url, asked, SIGNING_SECRET)
    row = await settled_row(slack)
    assert len(slack.api.calls_to("chat.postMessage")) == 1, "the retry must not post again"
    [post] = slack.api.posts
    assert post.thread_ts == asked["event"]["ts"]
    assert (row.status, row.platform_message_id) == ("sent", post.ts)
    assert lookups(slack.api) == ["conversations.replies"]
    assert slack.api.calls_to("conversations.replies")[-1].args["ts"] == asked["event"]["ts"]


async def test_resume_after_a_crash_finds_the_chunk_slack_already_has(start_slack: SlackFactory) -> None:
    """The crash window: Slack took the post, the outbox never heard; resume() (run at start) sends it again."""
    slack = await start_slack("http")
    (row,) = await slack.store.outbox_add("turn-x", "slack", DM, None, ["before the crash"])
    posted = await slack.adapter.send(OutboundMessage(chat_id=DM, text=row.text, nonce=chunk_nonce(row)))
    assert await slack.gateway.delivery.resume() == 1
    after = await slack.store.outbox_get(row.id)
    assert after is not None and (after.status, after.platform_message_id) == ("sent", posted)
    assert [p.ts for p in slack.api.posts] == [posted]
    assert lookups(slack.api) == ["conversations.history"]


async def test_failed_lookup_posts_anyway(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    slack.api.fail_next("chat.postMessage", Failure.answer_lost())
    slack.api.fail_next("conversations.history", Failure.error("missing_scope"))
    await post_signed(slack.url, message(DM, ALICE, "hello"), SIGNING_SECRET)
    row = await settled_row(slack)
    first, second = slack.api.posts  # a duplicate is better than a lost reply
    assert first.text == second.text == "ok: hello"
    assert (row.status, row.platform_message_id) == ("sent", second.ts)
    assert len(slack.api.calls_to("conversations.history")) == 1


async def test_a_normal_reply_posts_once_with_its_nonce_and_looks_nothing_up(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    await post_signed(slack.url, message(DM, ALICE, "hello"), SIGNING_SECRET)
    row = await settled_row(slack)
    [post] = slack.api.posts
    assert row.platform_message_id == post.ts
    assert post.metadata["event_type"] == EVENT_TYPE and post.metadata["event_payload"]["nonce"]
    assert lookups(slack.api) == []


# --- the adapter alone -----------------------------------------------------------------------


@pytest_asyncio.fixture
async def adapter(fake_slack: FakeSlack) -> AsyncIterator[SlackAdapter]:
    adapter = SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, mode="http", signing_secret=SIGNING_SECRET,
                                         api_base_url=fake_slack.api_url, listen_port=0))  # fmt: skip
    await adapter.start(_never_called)
    yield adapter
    await adapter.close()


def chunk(nonce: str, *, maybe_sent: bool, thread: str | None = None) -> OutboundMessage:
    return OutboundMessage(chat_id=CHANNEL, text=f"text {nonce}", thread_id=thread, markup=Markup.SLACK_MRKDWN,
                           nonce=nonce, maybe_sent=maybe_sent)  # fmt: skip


async def test_only_our_post_with_the_same_nonce_counts(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    first = await adapter.send(chunk("n-a", maybe_sent=False))
    # Someone else's message with the same metadata is not ours.
    fake_slack.history.add(CHANNEL, _foreign("1900000000.000001", "n-b"))
    assert await adapter.send(chunk("n-a", maybe_sent=True)) == first
    posted = await adapter.send(chunk("n-b", maybe_sent=True))
    assert posted != first and [p.ts for p in fake_slack.posts] == [first, posted]


async def test_a_failing_lookup_is_logged_once_per_reason(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    fake_slack.fail_next("conversations.history", Failure.error("missing_scope"), Failure.error("missing_scope"),
                         Failure.rate_limited(3))  # fmt: skip
    with capture_logs() as logs:
        for nonce in ("n1", "n2", "n3"):
            await adapter.send(chunk(nonce, maybe_sent=True))
    failed = [entry["reason"] for entry in logs if entry["event"] == "slack.resend.lookup_failed"]
    assert failed == ["missing_scope", "ratelimited"]
    assert len(fake_slack.posts) == 3


def _foreign(ts: str, nonce: str) -> dict[str, Any]:
    return {"type": "message", "user": ALICE, "text": "copy", "ts": ts,
            "metadata": {"event_type": EVENT_TYPE, "event_payload": {"nonce": nonce}}}  # fmt: skip


async def _never_called(_: object) -> None:
    raise AssertionError("no event should reach intake")

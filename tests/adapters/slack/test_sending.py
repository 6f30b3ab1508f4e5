"""Sending and starting against the fake Web API: what each Slack answer turns into."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from adapters.contract import (
    AdapterError,
    AdapterState,
    DeliveryError,
    Markup,
    MarkupRejected,
    OutboundMessage,
    RateLimited,
    RecipientUnavailable,
    TransientDeliveryError,
)
from adapters.slack import SlackAdapter
from adapters.slack.adapter import SlackSettings
from tests.adapters.slack.conftest import ALICE, DM, SIGNING_SECRET, SlackFactory
from tests.fakes.slack_api import APP_TOKEN, BOT_TOKEN, Failure, FakeSlack, message, post_signed


@pytest_asyncio.fixture
async def adapter(fake_slack: FakeSlack) -> AsyncIterator[SlackAdapter]:
    adapter = SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, mode="http", signing_secret=SIGNING_SECRET,
                                         api_base_url=fake_slack.api_url, listen_port=0))  # fmt: skip
    yield adapter
    await adapter.close()


def chunk(text: str = "hello", *, thread: str | None = None, markup: Markup = Markup.SLACK_MRKDWN) -> OutboundMessage:
    return OutboundMessage(chat_id="C0GENERAL", text=text, thread_id=thread, markup=markup, nonce="n1")


async def test_post_returns_the_ts_and_passes_thread_and_mrkdwn(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    ts = await adapter.send(chunk("*bold*", thread="1700000000.000100"))
    [post] = fake_slack.posts
    assert post.ts == ts
    assert (post.text, post.thread_ts, post.mrkdwn) == ("*bold*", "1700000000.000100", True)


async def test_plain_text_is_escaped_and_sent_without_mrkdwn(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    await adapter.send(chunk("a < b & c > d", markup=Markup.PLAIN))
    [post] = fake_slack.posts
    assert (post.text, post.mrkdwn) == ("a &lt; b &amp; c &gt; d", False)


async def test_dropped_connection_on_post_is_not_retried_by_the_client(
    adapter: SlackAdapter, fake_slack: FakeSlack
) -> None:
    fake_slack.fail_next("chat.postMessage", Failure.dropped())
    with pytest.raises(TransientDeliveryError):
        await adapter.send(chunk())
    assert len(fake_slack.calls_to("chat.postMessage")) == 1, "a blind client retry could post the chunk twice"


async def test_dropped_connection_on_update_is_retried_by_the_client(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    ts = await adapter.send(chunk("draft"))
    fake_slack.fail_next("chat.update", Failure.dropped())
    await adapter.edit("C0GENERAL", ts, "final", markup=Markup.SLACK_MRKDWN)
    assert len(fake_slack.calls_to("chat.update")) == 2
    assert [(u["ts"], u["text"]) for u in fake_slack.updates] == [(ts, "final")]


async def test_rate_limit_carries_retry_after(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    fake_slack.fail_next("chat.postMessage", Failure.rate_limited(7))
    with pytest.raises(RateLimited) as caught:
        await adapter.send(chunk())
    assert caught.value.retry_after == 7
    assert len(fake_slack.calls_to("chat.postMessage")) == 1


@pytest.mark.parametrize("code", ["not_in_channel", "channel_not_found", "is_archived"])
async def test_unreachable_channel_is_recipient_unavailable(adapter: SlackAdapter, fake_slack: FakeSlack, code: str) -> None:
    fake_slack.fail_next("chat.postMessage", Failure.error(code))
    with pytest.raises(RecipientUnavailable, match=code):
        await adapter.send(chunk())


async def test_refused_blocks_are_markup_rejected(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    fake_slack.fail_next("chat.postMessage", Failure.error("invalid_blocks"))
    with pytest.raises(MarkupRejected):
        await adapter.send(chunk())


@pytest.mark.parametrize("failure", [Failure.server_error(503), Failure.server_error(500), Failure.error("internal_error")])
async def test_server_errors_are_transient(adapter: SlackAdapter, fake_slack: FakeSlack, failure: Failure) -> None:
    fake_slack.fail_next("chat.postMessage", failure)
    with pytest.raises(TransientDeliveryError):
        await adapter.send(chunk())


@pytest.mark.parametrize(
    ("code", "says"),
    [("invalid_auth", "check platforms.slack.bot_token"), ("token_revoked", "check platforms.slack.bot_token"),
     ("missing_scope", "add chat:write"), ("msg_too_long", "failed: msg_too_long")],
)  # fmt: skip
async def test_refusals_no_retry_can_fix_are_plain_delivery_errors(
    adapter: SlackAdapter, fake_slack: FakeSlack, code: str, says: str
) -> None:
    fake_slack.fail_next("chat.postMessage", Failure.error(code))
    with pytest.raises(DeliveryError, match=says) as caught:
        await adapter.send(chunk())
    assert type(caught.value) is DeliveryError and not caught.value.retryable


async def test_edit_of_an_unknown_message_is_recipient_unavailable(adapter: SlackAdapter) -> None:
    with pytest.raises(RecipientUnavailable, match="message_not_found"):
        await adapter.edit("C0GENERAL", "1.000", "text")


async def test_start_with_a_wrong_bot_token_fails_with_a_hint(fake_slack: FakeSlack) -> None:
    adapter = SlackAdapter(SlackSettings(bot_token="xoxb-wrong", mode="http", signing_secret="s",
                                         api_base_url=fake_slack.api_url, listen_port=0))  # fmt: skip
    with pytest.raises(AdapterError, match="invalid_auth.*platforms.slack.bot_token"):
        await adapter.start(_never_called)
    assert adapter.status().state is AdapterState.FAILED
    await adapter.close()


async def test_socket_mode_start_with_a_bot_token_as_app_token_fails_with_a_hint(fake_slack: FakeSlack) -> None:
    adapter = SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, mode="socket", app_token=BOT_TOKEN,
                                         api_base_url=fake_slack.api_url))  # fmt: skip
    with pytest.raises(AdapterError, match="not_allowed_token_type.*platforms.slack.app_token"):
        await adapter.start(_never_called)
    assert fake_slack.connections == 0
    await adapter.close()


def test_missing_credentials_are_refused_before_any_call() -> None:
    with pytest.raises(AdapterError, match="SLACK_APP_TOKEN"):
        SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, mode="socket"))
    with pytest.raises(AdapterError, match="SLACK_SIGNING_SECRET"):
        SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, mode="http", app_token=APP_TOKEN))
    with pytest.raises(AdapterError, match="SLACK_BOT_TOKEN"):
        SlackAdapter(SlackSettings(bot_token="", mode="http", signing_secret="s"))


async def test_gateway_falls_back_to_plain_text_when_slack_refuses_the_markup(start_slack: SlackFactory) -> None:
    slack = await start_slack("http")
    slack.api.fail_next("chat.postMessage", Failure.error("invalid_blocks"))
    await post_signed(slack.url, message(DM, ALICE, "format me"), SIGNING_SECRET)
    [post] = await slack.api.wait_posts(1)
    assert post.mrkdwn is False and post.text == "ok: format me"
    assert len(slack.api.calls_to("chat.postMessage")) == 2


async def _never_called(_: object) -> None:
    raise AssertionError("no event should reach intake")

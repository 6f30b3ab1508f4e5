"""A reply streamed natively (chat.startStream / appendStream / stopStream) and the thread's status line.

The real SlackAdapter (slack_sdk's AsyncWebClient) against the fake Slack, whose
streamed messages grow by appends, end when stopped and refuse what Slack
refuses (:mod:`tests.fakes.slack_api.streams`), and whose per-channel rate
limits answer 429 with Retry-After (:mod:`tests.fakes.slack_api.rates`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio

from adapters.contract import (
    ChatType,
    DeliveryError,
    InboundMessage,
    Markup,
    OutboundMessage,
    RateLimited,
    RecipientUnavailable,
    StreamingUnsupported,
    StreamMode,
    TransientDeliveryError,
)
from adapters.slack import SlackAdapter
from adapters.slack.adapter import SlackSettings
from adapters.slack.resend import EVENT_TYPE
from tests.adapters.slack.conftest import ALICE, CHANNEL, DM, SIGNING_SECRET, Clock
from tests.fakes.slack_api import (
    BOT_TOKEN,
    BOT_USER_ID,
    TEAM_ID,
    Failure,
    FakeSlack,
    in_shared_channel,
    mention,
    message,
    next_ts,
    post_signed,
)
from tests.waiting import eventually

THREAD = "1700000000.000100"
PARTNER = "T0PARTNER"


@pytest.fixture
def inbox() -> list[InboundMessage]:
    return []


@pytest_asyncio.fixture
async def adapter(fake_slack: FakeSlack, inbox: list[InboundMessage]) -> AsyncIterator[SlackAdapter]:
    adapter = SlackAdapter(SlackSettings(bot_token=BOT_TOKEN, mode="http", signing_secret=SIGNING_SECRET,
                                         api_base_url=fake_slack.api_url, listen_port=0,
                                         allowed_teams=(PARTNER,)))  # fmt: skip

    async def intake(message: InboundMessage) -> None:
        inbox.append(message)

    await adapter.start(intake)
    yield adapter
    await adapter.close()


def opening(text: str, *, chat: str = CHANNEL, thread: str | None = THREAD, nonce: str = "n-1") -> OutboundMessage:
    return OutboundMessage(chat_id=chat, text=text, thread_id=thread, markup=Markup.SLACK_MRKDWN, nonce=nonce)


# --- one streamed message ---------------------------------------------------------------------


async def test_start_append_stop_builds_one_message_that_can_then_be_edited(
    adapter: SlackAdapter, fake_slack: FakeSlack
) -> None:
    ts = await adapter.start_stream(opening("The answer"), recipient_user_id=ALICE)
    await adapter.append_stream(CHANNEL, ts, " is")
    await adapter.append_stream(CHANNEL, ts, " **42**.")
    await adapter.stop_stream(CHANNEL, ts)

    [streamed] = fake_slack.streams.messages.values()
    assert (streamed.ts, streamed.thread_ts, streamed.text) == (ts, THREAD, "The answer is **42**.")
    assert not streamed.streaming and streamed.appends == 2
    assert (streamed.recipient_user_id, streamed.recipient_team_id) == (ALICE, TEAM_ID)
    assert fake_slack.posts == [], "a streamed reply is one message, not a post"
    assert [s.method for s in fake_slack.shown] == [
        "chat.startStream", "chat.appendStream", "chat.appendStream", "chat.stopStream"
    ]  # fmt: skip
    assert [s.text for s in fake_slack.shown][:2] == ["The answer", "The answer is"]

    await adapter.edit(CHANNEL, ts, "The answer is *42*.", markup=Markup.SLACK_MRKDWN)
    assert streamed.text == fake_slack.history.text_of(CHANNEL, ts) == "The answer is *42*."


async def test_a_stream_left_running_by_a_crash_is_ended_before_it_is_edited(
    adapter: SlackAdapter, fake_slack: FakeSlack
) -> None:
    ts = await adapter.start_stream(opening("half an ans"), recipient_user_id=ALICE)
    # The process died here; after the restart the outbox edits the message to the final text.
    await adapter.edit(CHANNEL, ts, "The whole answer.", markup=Markup.SLACK_MRKDWN)
    streamed = fake_slack.streams.messages[(CHANNEL, ts)]
    assert (streamed.streaming, streamed.text) == (False, "The whole answer.")
    assert [c.method for c in fake_slack.calls if c.method.startswith("chat.")] == [
        "chat.startStream", "chat.update", "chat.stopStream", "chat.update"
    ]  # fmt: skip


async def test_an_edit_slack_refuses_for_another_reason_still_fails(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    ts = await adapter.send(opening("posted"))
    fake_slack.fail_next("chat.update", Failure.error("cant_update_message"), Failure.error("cant_update_message"))
    with pytest.raises(RecipientUnavailable, match="cant_update_message"):
        await adapter.edit(CHANNEL, ts, "edited")
    assert len(fake_slack.calls_to("chat.update")) == 2


async def test_stop_twice_is_no_error(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    ts = await adapter.start_stream(opening("done"), recipient_user_id=ALICE)
    await adapter.stop_stream(CHANNEL, ts)
    await adapter.stop_stream(CHANNEL, ts)  # Slack answers message_not_in_streaming_state: already ended
    assert len(fake_slack.calls_to("chat.stopStream")) == 2
    assert [m.text for m in fake_slack.streams.messages.values()] == ["done"]


async def test_append_after_slack_ended_the_stream_says_so_and_is_not_a_refusal(
    adapter: SlackAdapter, fake_slack: FakeSlack
) -> None:
    ts = await adapter.start_stream(opening("done"), recipient_user_id=ALICE)
    fake_slack.streams.expire(CHANNEL, ts)  # Slack's own timeout
    with pytest.raises(DeliveryError, match="message_not_in_streaming_state.*chat.update") as caught:
        await adapter.append_stream(CHANNEL, ts, " more")
    assert not isinstance(caught.value, StreamingUnsupported), "one ended stream says nothing about the chat kind"
    await adapter.stop_stream(CHANNEL, ts)  # and ending it is no error


async def test_a_stream_to_a_partner_workspace_member_names_their_team(
    adapter: SlackAdapter, fake_slack: FakeSlack, inbox: list[InboundMessage]
) -> None:
    asked = in_shared_channel(mention(CHANNEL, "U0PARTNER", f"<@{BOT_USER_ID}> hello", ts=THREAD),
                              sender_team=PARTNER, host_team=TEAM_ID)  # fmt: skip
    assert adapter.http_url
    assert (await post_signed(adapter.http_url, asked, SIGNING_SECRET)).status == 200
    await eventually(lambda: inbox, "the partner's mention to reach intake")
    await adapter.start_stream(opening("hi"), recipient_user_id="U0PARTNER")
    await adapter.start_stream(opening("hi", nonce="n-2"), recipient_user_id="U0NEVERSEEN")
    teams = [call.args["recipient_team_id"] for call in fake_slack.calls_to("chat.startStream")]
    assert teams == [PARTNER, TEAM_ID]


async def test_a_stream_in_a_dm_thread_names_no_recipient(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    ts = await adapter.start_stream(opening("hi", chat=DM), recipient_user_id=ALICE)
    [call] = fake_slack.calls_to("chat.startStream")
    assert "recipient_user_id" not in call.args and "recipient_team_id" not in call.args
    assert fake_slack.streams.messages[(DM, ts)].text == "hi"


async def test_a_stream_may_open_before_there_is_text(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    ts = await adapter.start_stream(opening(""), recipient_user_id=ALICE)
    await adapter.append_stream(CHANNEL, ts, "")  # nothing to add: no call
    await adapter.append_stream(CHANNEL, ts, "late")
    assert "markdown_text" not in fake_slack.calls_to("chat.startStream")[0].args
    assert len(fake_slack.calls_to("chat.appendStream")) == 1
    assert fake_slack.streams.messages[(CHANNEL, ts)].text == "late"


def test_threads_stream_natively_and_everything_else_edits(adapter: SlackAdapter) -> None:
    assert adapter.stream_modes(ChatType.GROUP, THREAD) == (StreamMode.NATIVE, StreamMode.EDIT)
    assert adapter.stream_modes(ChatType.DM, THREAD) == (StreamMode.NATIVE, StreamMode.EDIT)
    assert adapter.stream_modes(ChatType.DM, None) == (StreamMode.EDIT,)


async def test_a_top_level_dm_reply_cannot_stream(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    with pytest.raises(StreamingUnsupported, match="thread"):
        await adapter.start_stream(opening("hi", chat=DM, thread=None))
    assert fake_slack.calls_to("chat.startStream") == []


# --- refusals ---------------------------------------------------------------------------------


async def test_an_app_without_the_scope_cannot_stream(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    fake_slack.streams.scope_granted = False
    with pytest.raises(StreamingUnsupported, match="missing_scope.*chat:write"):
        await adapter.start_stream(opening("hi"), recipient_user_id=ALICE)
    assert fake_slack.streams.messages == {}


@pytest.mark.parametrize("code", ["not_allowed_token_type", "unknown_method", "channel_type_not_supported"])
async def test_methods_slack_refuses_the_app_are_streaming_unsupported(
    adapter: SlackAdapter, fake_slack: FakeSlack, code: str
) -> None:
    fake_slack.fail_next("chat.startStream", Failure.error(code))
    with pytest.raises(StreamingUnsupported, match=code):
        await adapter.start_stream(opening("hi"), recipient_user_id=ALICE)


async def test_status_is_set_and_cleared(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    await adapter.set_status(CHANNEL, THREAD, "is searching past conversations…")
    assert fake_slack.streams.status_of(CHANNEL, THREAD) == "is searching past conversations…"
    await adapter.set_status(CHANNEL, THREAD, "")
    assert fake_slack.streams.status_of(CHANNEL, THREAD) == ""
    assert [s.status for s in fake_slack.streams.statuses] == ["is searching past conversations…", ""]


async def test_status_refused_without_the_scope_is_streaming_unsupported(
    adapter: SlackAdapter, fake_slack: FakeSlack
) -> None:
    fake_slack.streams.status_scope_granted = False
    with pytest.raises(StreamingUnsupported, match="missing_scope.*assistant:write"):
        await adapter.set_status(CHANNEL, THREAD, "is thinking…")
    assert fake_slack.streams.statuses == []


async def test_status_needs_a_thread(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    with pytest.raises(StreamingUnsupported, match="thread"):
        await adapter.set_status(DM, None, "is thinking…")
    assert fake_slack.calls_to("assistant.threads.setStatus") == []


# --- rate limits and retries ------------------------------------------------------------------


async def test_429_on_a_stream_call_is_rate_limited_with_its_retry_after(
    adapter: SlackAdapter, fake_slack: FakeSlack
) -> None:
    fake_slack.fail_next("chat.startStream", Failure.rate_limited(7))
    with pytest.raises(RateLimited) as caught:
        await adapter.start_stream(opening("hi"), recipient_user_id=ALICE)
    assert caught.value.retry_after == 7
    assert len(fake_slack.calls_to("chat.startStream")) == 1
    ts = await adapter.start_stream(opening("hi"), recipient_user_id=ALICE)
    fake_slack.fail_next("chat.appendStream", Failure.rate_limited(2))
    with pytest.raises(RateLimited) as caught:
        await adapter.append_stream(CHANNEL, ts, " there")
    assert caught.value.retry_after == 2


async def test_the_fake_enforces_the_rates_the_adapter_promises(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    clock = Clock()
    fake_slack.clock = clock
    fake_slack.rates.enabled = True
    promised = adapter.capabilities.rates
    assert (promised.per_chat.count, promised.per_chat.per) == (1, 1.0)
    assert 1 / promised.stream_interval == fake_slack.rates.limits["append"].count

    ts = await adapter.start_stream(opening("a"), recipient_user_id=ALICE)
    await adapter.append_stream(CHANNEL, ts, "b")
    await adapter.append_stream(CHANNEL, ts, "c")
    with pytest.raises(RateLimited) as caught:
        await adapter.append_stream(CHANNEL, ts, "d")  # the third append within one second
    assert caught.value.retry_after == 1
    with pytest.raises(RateLimited):
        await adapter.send(opening("another", nonce="n-2"))  # the start spent the channel's one write this second
    await adapter.send(opening("elsewhere", chat="C0OTHER", nonce="n-3"))
    assert fake_slack.rates.rate_limited == 2

    clock.now += 1.0
    await adapter.append_stream(CHANNEL, ts, "d")
    await adapter.stop_stream(CHANNEL, ts)
    assert fake_slack.streams.messages[(CHANNEL, ts)].text == "abcd"


async def test_a_start_whose_answer_was_lost_is_not_repeated_by_the_client(
    adapter: SlackAdapter, fake_slack: FakeSlack
) -> None:
    fake_slack.fail_next("chat.startStream", Failure.answer_lost())
    with pytest.raises(TransientDeliveryError):
        await adapter.start_stream(opening("one"), recipient_user_id=ALICE)
    assert len(fake_slack.calls_to("chat.startStream")) == 1, "a client retry would open a second message"
    assert len(fake_slack.streams.messages) == 1


async def test_an_append_whose_answer_was_lost_is_not_repeated_by_the_client(
    adapter: SlackAdapter, fake_slack: FakeSlack
) -> None:
    ts = await adapter.start_stream(opening("one"), recipient_user_id=ALICE)
    fake_slack.fail_next("chat.appendStream", Failure.answer_lost())
    with pytest.raises(TransientDeliveryError):
        await adapter.append_stream(CHANNEL, ts, " more")
    assert len(fake_slack.calls_to("chat.appendStream")) == 1
    assert fake_slack.streams.messages[(CHANNEL, ts)].text == "one more", "a client retry would append it twice"


async def test_a_dropped_stop_is_repeated_by_the_client(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    ts = await adapter.start_stream(opening("one"), recipient_user_id=ALICE)
    fake_slack.fail_next("chat.stopStream", Failure.answer_lost())
    await adapter.stop_stream(CHANNEL, ts)  # the retry finds it stopped: no error
    assert len(fake_slack.calls_to("chat.stopStream")) == 2


# --- what a streamed message leaves behind ----------------------------------------------------


async def test_a_stopped_stream_is_found_by_the_resend_lookup(adapter: SlackAdapter, fake_slack: FakeSlack) -> None:
    fake_slack.history.add(CHANNEL, {"type": "message", "user": ALICE, "text": "question", "ts": THREAD})
    ts = await adapter.start_stream(opening("streamed", nonce="n-live"), recipient_user_id=ALICE)
    await adapter.stop_stream(CHANNEL, ts)
    [stop] = fake_slack.calls_to("chat.stopStream")
    assert stop.args["metadata"] == {"event_type": EVENT_TYPE, "event_payload": {"nonce": "n-live"}}
    again = OutboundMessage(chat_id=CHANNEL, text="streamed", thread_id=THREAD, nonce="n-live", maybe_sent=True)
    assert await adapter.send(again) == ts
    assert fake_slack.posts == []


async def test_replies_in_a_thread_the_bot_streamed_into_need_no_mention(
    adapter: SlackAdapter, fake_slack: FakeSlack, inbox: list[InboundMessage]
) -> None:
    await adapter.start_stream(opening("streamed"), recipient_user_id=ALICE)
    fake_slack.fail_next("conversations.replies", Failure.error("missing_scope"))  # only the memory can tell
    reply = message(CHANNEL, ALICE, "and then?", channel_type="channel", thread_ts=THREAD, ts=next_ts())
    assert adapter.http_url
    assert (await post_signed(adapter.http_url, reply, SIGNING_SECRET)).status == 200
    await eventually(lambda: inbox, "the unmentioned thread reply to reach intake")
    assert inbox[0].text == "and then?" and inbox[0].thread_id == THREAD
    assert fake_slack.calls_to("conversations.replies") == []

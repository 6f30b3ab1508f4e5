"""Streamed replies on Slack end to end: the real gateway and slack-bolt against the fake Slack, the model
writing its answer at a set pace through the real anthropic SDK.

A mention in a channel is answered in its thread with Slack's own streaming (chat.startStream,
appendStream, stopStream), then one chat.update to the final formatted text; tools show on the
thread's status line. An app without the streaming scope posts and updates instead.
"""

from __future__ import annotations

from tests.adapters.slack.conftest import ALICE, BOB, CHANNEL, SIGNING_SECRET, RunningSlack, SlackFactory
from tests.adapters.telegram.test_streaming_e2e import ANSWER, WORKING, grew
from tests.fakes.model_server import ModelServer, Text, ToolCalls, ToolUse
from tests.fakes.slack_api import BOT_USER_ID, Failure, FakeSlack, mention, post_signed
from tests.gateway.conftest import settled
from tests.waiting import eventually

FINAL = ANSWER.replace("**", "*")
"""The answer in Slack's mrkdwn."""
STREAM_CALLS = ("chat.startStream", "chat.appendStream", "chat.stopStream")


async def mention_bot(slack: RunningSlack, text: str, *, user: str = ALICE, thread_ts: str | None = None) -> str:
    """Mention the bot in the channel (in a thread, when given); returns the mention's ts (a new thread's)."""
    event = mention(CHANNEL, user, f"<@{BOT_USER_ID}> {text}", thread_ts=thread_ts)
    assert (await post_signed(slack.url, event, SIGNING_SECRET)).status == 200
    return str(event["event"]["ts"])


async def answered(slack: RunningSlack, thread_ts: str) -> None:
    """Wait for the first reply in the thread (the turn is in the inbox then), then for every turn to end."""
    api = slack.api
    await eventually(lambda: [s for s in api.streams.messages.values() if s.thread_ts == thread_ts]
                     or [p for p in api.posts if p.thread_ts == thread_ts], "the reply to start")  # fmt: skip
    await settled(slack.store)


async def ask(start_slack: SlackFactory, model_server: ModelServer, *replies: Text | ToolCalls,
              question: str = "tell me a long story") -> str:  # fmt: skip
    """Start the gateway, script the model's replies, mention the bot and wait for the answer; returns the thread."""
    slack = await start_slack()
    model_server.responder = None
    model_server.script(*replies)
    thread = await mention_bot(slack, question)
    await answered(slack, thread)
    return thread


def chat_calls(fake_slack: FakeSlack) -> list[str]:
    return [c.method for c in fake_slack.calls if c.method.startswith("chat.")]


async def test_a_mention_streams_natively_in_its_thread_then_is_updated_to_the_final_text(
    start_slack: SlackFactory, fake_slack: FakeSlack, model_server: ModelServer
) -> None:
    thread = await ask(start_slack, model_server, Text(ANSWER, pace=25))

    [streamed] = fake_slack.streams.messages.values()
    assert (streamed.channel, streamed.thread_ts, streamed.streaming) == (CHANNEL, thread, False)
    assert streamed.recipient_user_id == ALICE and streamed.appends >= 2
    calls = chat_calls(fake_slack)
    assert calls[0] == "chat.startStream" and calls[-2:] == ["chat.stopStream", "chat.update"], calls
    assert set(calls[1:-2]) == {"chat.appendStream"}, "appended as the model wrote, then stopped, then one update"
    assert fake_slack.posts == [], "one message: the streamed one"
    texts = [s.text for s in fake_slack.shown if s.ts == streamed.ts]
    assert grew(texts[:-1]) and texts[-1] == FINAL == fake_slack.history.text_of(CHANNEL, streamed.ts)


async def test_a_tool_using_turn_shows_the_tool_on_the_status_line_then_streams_the_answer(
    start_slack: SlackFactory, fake_slack: FakeSlack, model_server: ModelServer
) -> None:
    tools = ToolCalls(ToolUse("session_search", {"query": "Lisbon"}))
    thread = await ask(start_slack, model_server, tools, Text(ANSWER, pace=25), question="what did we plan for Lisbon?")

    statuses = [s.status for s in fake_slack.streams.statuses if s.thread_ts == thread]
    assert statuses == [WORKING, ""], "the tool line on the status line, cleared once the answer streams"
    [streamed] = fake_slack.streams.messages.values()
    assert fake_slack.posts == [] and fake_slack.history.text_of(CHANNEL, streamed.ts) == FINAL
    assert chat_calls(fake_slack)[0] == "chat.startStream"


async def test_text_before_a_tool_call_is_stopped_and_edited_within_slacks_limits(
    start_slack: SlackFactory, fake_slack: FakeSlack, model_server: ModelServer
) -> None:
    fake_slack.rates.enabled = True
    before = "Let me look that up first. I will search our past conversations for the plan we made. "
    tools = ToolCalls(ToolUse("session_search", {"query": "Lisbon"}), text=before, pace=10)
    await ask(start_slack, model_server, tools, Text(ANSWER, pace=25), question="what did we plan for Lisbon?")

    [streamed] = fake_slack.streams.messages.values()
    texts = [s.text for s in fake_slack.shown if s.ts == streamed.ts]
    assert texts[0].startswith("Let me look") and texts[-1] == FINAL, texts
    assert fake_slack.posts == [], "the new text went on in the same message (stopped, then updated)"
    assert fake_slack.rates.rate_limited == 0, fake_slack.rates.refused


async def test_an_app_without_the_streaming_scope_posts_then_updates_and_remembers_it(
    start_slack: SlackFactory, fake_slack: FakeSlack, model_server: ModelServer
) -> None:
    fake_slack.streams.scope_granted = False
    slack = await start_slack()
    model_server.responder = None
    model_server.script(Text(ANSWER, pace=25), Text(ANSWER, pace=25))
    first = await mention_bot(slack, "tell me a long story")
    await answered(slack, first)
    second = await mention_bot(slack, "and another one", user=BOB)
    await eventually(lambda: len(fake_slack.posts) == 2, "the second reply")
    await settled(slack.store)

    assert len(fake_slack.calls_to("chat.startStream")) == 1, "the refusal is remembered: not asked again"
    assert [p.thread_ts for p in fake_slack.posts] == [first, second]
    for post in fake_slack.posts:
        texts = [s.text for s in fake_slack.shown if s.ts == post.ts]
        assert len(texts) >= 3 and grew(texts[:-1]), texts  # posted, updated as it was written, then the final text
        assert texts[-1] == FINAL == fake_slack.history.text_of(CHANNEL, post.ts)
    assert fake_slack.streams.messages == {}


async def test_a_429_on_stopping_the_stream_is_waited_out_and_the_final_text_is_one_update(
    start_slack: SlackFactory, fake_slack: FakeSlack, model_server: ModelServer
) -> None:
    fake_slack.fail_next("chat.stopStream", Failure.rate_limited(1))
    await ask(start_slack, model_server, Text(ANSWER, pace=25))

    [streamed] = fake_slack.streams.messages.values()
    assert chat_calls(fake_slack)[-3:] == ["chat.stopStream", "chat.stopStream", "chat.update"], (
        "stopped again after the 429's wait, before the answer's one update"
    )
    assert not streamed.streaming and fake_slack.history.text_of(CHANNEL, streamed.ts) == FINAL


async def test_stop_mid_stream_ends_the_streamed_message_with_the_stopped_mark(
    start_slack: SlackFactory, fake_slack: FakeSlack, model_server: ModelServer
) -> None:
    slack = await start_slack()
    model_server.responder = None
    model_server.script(Text(ANSWER, pace=6))  # about fifteen seconds: /stop comes well before the end
    thread = await mention_bot(slack, "tell me a long story")
    await eventually(lambda: fake_slack.streams.messages, "the stream to start")
    [streamed] = fake_slack.streams.messages.values()
    await mention_bot(slack, "/stop", thread_ts=thread)  # typed in the thread (Slack's client keeps /stop for itself)
    await settled(slack.store)

    await eventually(lambda: (fake_slack.history.text_of(CHANNEL, streamed.ts) or "").endswith("— stopped"))
    shown = (fake_slack.history.text_of(CHANNEL, streamed.ts) or "").removesuffix("— stopped").strip()
    assert shown and FINAL.startswith(shown) and shown != FINAL and not streamed.streaming


async def test_streams_in_three_threads_of_one_channel_stay_inside_slacks_limits(
    start_slack: SlackFactory, fake_slack: FakeSlack, model_server: ModelServer
) -> None:
    fake_slack.rates.enabled = True
    slack = await start_slack()
    model_server.responder = lambda record: Text(ANSWER, pace=15)  # about five seconds each
    threads = [await mention_bot(slack, f"tell me long story number {n}", user=(ALICE, BOB)[n % 2]) for n in range(3)]
    await eventually(lambda: len(fake_slack.streams.messages) + len(fake_slack.posts) == 3, "three replies")
    await settled(slack.store)

    for thread in threads:
        [reply] = [s for s in fake_slack.streams.messages.values() if s.thread_ts == thread]
        assert fake_slack.history.text_of(CHANNEL, reply.ts) == FINAL, thread
    # Every reply is a native stream (found above); under load one stream may be all start and stop,
    # its channel's shared append pace spent by the other two, but together they appended as they went.
    assert sum(s.appends for s in fake_slack.streams.messages.values()) >= 1
    assert fake_slack.rates.rate_limited == 0, fake_slack.rates.refused

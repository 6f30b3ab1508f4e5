"""A reply streamed in a Slack thread stays inside the rates Slack enforces, end to end.

The real gateway and the real SlackAdapter (slack-bolt, slack_sdk) against the fake Slack with its
per-channel rate limits on (:mod:`tests.fakes.slack_api.rates`): every write to a channel
(chat.postMessage, chat.update, chat.startStream, chat.stopStream) counts against one budget
of 1 a second, so the gateway must count each of them too, or the final chat.update that follows
chat.stopStream is answered 429.
"""

from __future__ import annotations

from tests.adapters.slack.conftest import ALICE, CHANNEL, SIGNING_SECRET, SlackFactory
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.slack_api import BOT_USER_ID, mention, next_ts, post_signed

ANSWER = " ".join(f"Sentence {n} of the streamed answer adds a few words." for n in range(1, 7))
"""Six sentences, 54 words: about two seconds at 25 words a second."""


async def test_a_natively_streamed_reply_gets_no_429_from_its_stop_and_final_edit(
    start_slack: SlackFactory, model_server: ModelServer
) -> None:
    slack = await start_slack("http")
    slack.api.rates.enabled = True
    model_server.responder = lambda record: Text(ANSWER, pace=25)
    root = mention(CHANNEL, ALICE, f"<@{BOT_USER_ID}> tell me at length", ts=next_ts())
    slack.api.record(root)
    assert (await post_signed(slack.url, root, SIGNING_SECRET)).status == 200

    await slack.api.wait_for(lambda: any(s.method == "chat.update" and s.text.strip() == ANSWER
                                         for s in slack.api.shown))  # fmt: skip
    methods = [s.method for s in slack.api.shown]
    assert methods[0] == "chat.startStream" and "chat.stopStream" in methods  # it did stream natively
    assert slack.api.rates.refused == []

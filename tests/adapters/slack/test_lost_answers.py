"""A post Slack carried out whose answer never came back is found, not posted again, also while a reply streams.

The fake Slack carries out ``chat.postMessage`` and then cuts the connection
(:meth:`Failure.answer_lost`): slack_sdk sees a network error with no ``ts``.
The retry must find the first post by the chunk's nonce (``adapters/slack/resend.py``)
before posting; the row ends ``sent`` with that post's ``ts``. The replies in
``test_resend.py`` are sent whole; here a reply is shown while it is written
(a top-level DM reply is posted, then updated), so the lost answer is the
streamed message's first post.
"""

from __future__ import annotations

import pytest

from adapters.contract import OutboundMessage, TransientDeliveryError
from adapters.slack import sending
from tests.adapters.slack.conftest import ALICE, DM, SIGNING_SECRET, SlackFactory
from tests.adapters.telegram.test_lost_answers import closed_port
from tests.adapters.telegram.test_streaming_e2e import ANSWER
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.slack_api import BOT_TOKEN, Failure, FakeSlack, message, post_signed
from tests.gateway.conftest import settled
from tests.waiting import eventually

FINAL = ANSWER.replace("**", "*")


async def test_a_streamed_reply_whose_first_post_lost_its_answer_shows_once(
    start_slack: SlackFactory, fake_slack: FakeSlack, model_server: ModelServer
) -> None:
    slack = await start_slack()
    model_server.responder = None
    model_server.script(Text(ANSWER, pace=25))
    fake_slack.fail_next("chat.postMessage", Failure.answer_lost())
    await post_signed(slack.url, message(DM, ALICE, "tell me a long story"), SIGNING_SECRET)
    await eventually(lambda: fake_slack.posts, "the reply to start")
    await settled(slack.store)

    assert len(fake_slack.posts) == 1, [p.text[:30] for p in fake_slack.posts]
    [post] = fake_slack.posts
    assert fake_slack.history.text_of(DM, post.ts) == FINAL
    row = await slack.store.outbox_get(1)  # the reply's first chunk: the streamed message's row
    assert row is not None and (row.status, row.platform_message_id) == ("sent", post.ts)


async def test_a_post_that_never_left_is_not_ambiguous() -> None:
    """No connection could be made: Slack surely has no such post, so the retry need not look for it."""
    client = sending.build_client(BOT_TOKEN, f"http://127.0.0.1:{closed_port()}/api/")
    with pytest.raises(TransientDeliveryError) as caught:
        await sending.post(client, OutboundMessage(chat_id=DM, text="hello", nonce="n1"))
    assert caught.value.may_have_arrived is False

"""Replies on their way out: the 4096 UTF-16 limit, markup Telegram refuses, flood control, edits, typing."""

from __future__ import annotations

import pytest

from adapters.contract import (
    DeliveryError,
    Markup,
    MarkupRejected,
    OutboundMessage,
    RateLimited,
    RecipientUnavailable,
    TransientDeliveryError,
)
from tests.adapters.telegram.conftest import ALICE, BOB, StartTelegram
from tests.fakes.model_server import ModelServer, Text
from tests.fakes.telegram_api import Chat, Failure, TelegramAPI, utf16_length
from tests.gateway.conftest import settled
from tests.waiting import eventually


def long_reply() -> str:
    """About 14,000 UTF-16 units in 60 numbered paragraphs; the emoji count twice in UTF-16."""
    return "\n\n".join(f"Paragraph {n:02d} 🚀🚀 " + "lorem ipsum dolor sit amet " * 8 for n in range(60))


async def test_a_long_reply_arrives_in_order_in_chunks_within_the_limit(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    text = long_reply()
    model_server.responder = lambda record: Text(text)
    await start_telegram()
    await telegram_api.say(ALICE, "tell me everything")
    await telegram_api.wait_for(lambda: any("Paragraph 59" in m.visible for m in telegram_api.sent))

    chunks = telegram_api.sent_to(ALICE.id)
    assert len(chunks) >= 4
    assert all(utf16_length(m.visible) <= 4096 for m in chunks)
    joined = "\n".join(m.visible for m in chunks)
    positions = [joined.index(f"Paragraph {n:02d} ") for n in range(60)]
    assert positions == sorted(positions)
    assert joined.count("🚀") == text.count("🚀")


@pytest.mark.parametrize("answer", ["```", "```python", "#", ">", "[]()", "` `"])
async def test_an_answer_that_renders_to_nothing_reaches_the_user_as_written(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer, answer: str
) -> None:
    model_server.responder = lambda record: Text(answer)
    run = await start_telegram()
    await telegram_api.say(ALICE, "say something odd")
    await eventually(lambda: model_server.requests, "the model to be asked")
    await settled(run.store)
    assert [m.visible for m in telegram_api.sent_to(ALICE.id)] == [answer], "the user got no reply"


async def test_a_chunk_telegram_cannot_parse_is_sent_again_as_plain_text(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("Some **bold** claim & <tags>")
    await start_telegram()
    telegram_api.fail("sendMessage", Failure.cant_parse())
    await telegram_api.say(ALICE, "go")
    [reply] = await telegram_api.wait_sent(1)

    first, second = telegram_api.calls_to("sendMessage")
    assert first.params["parse_mode"] == "HTML" and "<b>bold</b>" in first.params["text"]
    assert "parse_mode" not in second.params
    assert reply.parse_mode is None and reply.visible == "Some bold claim & <tags>"


async def test_flood_control_retry_after_is_waited_out(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("patience")
    await start_telegram()
    telegram_api.fail("sendMessage", Failure.too_many_requests(2))
    await telegram_api.say(ALICE, "go")
    [reply] = await telegram_api.wait_sent(1)

    refused, accepted = telegram_api.calls_to("sendMessage")
    assert accepted.at - refused.at >= 2.0
    assert reply.visible == "patience"


async def test_a_server_error_is_retried(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    model_server.responder = lambda record: Text("eventually")
    await start_telegram()
    telegram_api.fail("sendMessage", Failure.server_error())
    await telegram_api.say(ALICE, "go")
    [reply] = await telegram_api.wait_sent(1)
    assert reply.visible == "eventually" and len(telegram_api.calls_to("sendMessage")) == 2


async def test_sends_edits_and_typing_through_the_adapter(start_telegram: StartTelegram, telegram_api: TelegramAPI) -> None:
    run = await start_telegram()
    forum = telegram_api.add_chat(Chat.supergroup(-100900, topics=(5,)))
    telegram_api.add_chat(Chat.private(BOB))

    message_id = await run.adapter.send(OutboundMessage(chat_id=str(forum.id), text="<i>draft</i>", thread_id="5",
                                                        markup=Markup.TELEGRAM_HTML))  # fmt: skip
    await run.adapter.edit(str(forum.id), message_id, "<b>final</b>", markup=Markup.TELEGRAM_HTML)
    await run.adapter.edit(str(forum.id), message_id, "<b>final</b>", markup=Markup.TELEGRAM_HTML)  # not modified: fine
    await run.adapter.typing(str(forum.id), "5")

    [sent] = telegram_api.sent_to(forum.id)
    assert (sent.thread_id, sent.visible, sent.edits) == (5, "final", ["<b>final</b>"])
    assert len(telegram_api.calls_to("editMessageText")) == 2
    assert (forum.id, "typing", 5) in telegram_api.actions
    with pytest.raises(DeliveryError, match="message to edit not found"):
        await run.adapter.edit(str(forum.id), "999", "nope")

    telegram_api.blocked.add(BOB.id)
    with pytest.raises(RecipientUnavailable, match="blocked"):
        await run.adapter.send(OutboundMessage(chat_id=str(BOB.id), text="hello?"))
    with pytest.raises(RecipientUnavailable, match="chat not found"):
        await run.adapter.send(OutboundMessage(chat_id="-1", text="anyone?"))
    with pytest.raises(RecipientUnavailable, match="thread not found"):
        await run.adapter.send(OutboundMessage(chat_id=str(forum.id), text="lost", thread_id="77"))
    telegram_api.fail("sendMessage", Failure.server_error())
    with pytest.raises(TransientDeliveryError):
        await run.adapter.send(OutboundMessage(chat_id=str(forum.id), text="later"))
    assert run.adapter.capabilities.length_unit == "utf16" and run.adapter.capabilities.max_message_length == 4096


@pytest.mark.parametrize(
    ("failure", "expected", "says"),
    [
        (Failure(401, "Unauthorized"), DeliveryError, "check the token and api_base_url"),
        (Failure(413, "Request Entity Too Large"), DeliveryError, "too large"),
        (Failure(400, "Bad Request: message text is empty"), DeliveryError, "refused the message"),
        (Failure(403, "Forbidden: bot was kicked from the group chat"), RecipientUnavailable, "kicked"),
        (Failure(400, "Bad Request: not enough rights to send text messages to the chat"), RecipientUnavailable, "rights"),
        (Failure.cant_parse(), MarkupRejected, "could not parse the HTML"),
        (Failure.too_many_requests(3), RateLimited, "flood control"),
        (Failure.server_error(), TransientDeliveryError, "unreachable or failing"),
        (Failure.broken_proxy(), TransientDeliveryError, "not the Bot API"),
    ],
)
async def test_each_refusal_becomes_its_delivery_error(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, failure: Failure, expected: type[DeliveryError], says: str
) -> None:
    run = await start_telegram()
    telegram_api.add_chat(Chat.private(BOB))
    telegram_api.fail("sendMessage", failure)
    with pytest.raises(DeliveryError, match=says) as caught:
        await run.adapter.send(OutboundMessage(chat_id=str(BOB.id), text="<b>hi</b>", markup=Markup.TELEGRAM_HTML))
    assert type(caught.value) is expected

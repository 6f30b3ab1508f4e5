"""Drafts (``sendMessageDraft``): a reply shown in a private chat while it is written, through real aiogram.

Also what the adapter tells the gateway about streaming in each kind of chat,
and how fast each chat may be written to.
"""

from __future__ import annotations

import aiohttp
import pytest

from adapters.contract import (
    ChatType,
    DeliveryError,
    Markup,
    MarkupRejected,
    OutboundMessage,
    Rate,
    RateLimited,
    RecipientUnavailable,
    StreamingUnsupported,
    StreamMode,
    TransientDeliveryError,
)
from adapters.telegram import TelegramAdapter, TelegramSettings
from tests.adapters.telegram.conftest import BOB
from tests.fakes.telegram_api import Chat, Failure, TelegramAPI


async def test_a_draft_shows_the_formatted_text_in_the_private_chat(
    adapter: TelegramAdapter, telegram_api: TelegramAPI
) -> None:
    await adapter.send_draft(str(BOB.id), None, 7, "The answer <b>so far</b>", markup=Markup.TELEGRAM_HTML)
    await adapter.send_draft(str(BOB.id), None, 7, "The answer <b>so far</b> and more", markup=Markup.TELEGRAM_HTML)

    first, second = telegram_api.drafts
    assert (first.chat_id, first.draft_id, first.parse_mode, first.visible) == (BOB.id, 7, "HTML", "The answer so far")
    assert second.visible == "The answer so far and more" and second.at >= first.at
    assert telegram_api.screen.draft_on_screen(BOB.id, second.at) == second
    assert telegram_api.sent == [], "a draft is not a message"


async def test_an_empty_draft_asks_for_the_thinking_placeholder(
    adapter: TelegramAdapter, telegram_api: TelegramAPI
) -> None:
    await adapter.send_draft(str(BOB.id), None, 3, "", markup=Markup.TELEGRAM_HTML)

    [call] = telegram_api.calls_to("sendMessageDraft")
    assert call.params.get("text") == "", "the empty text must be sent: it is what asks for the placeholder"
    [draft] = telegram_api.drafts
    assert draft.visible == "" and telegram_api.screen.first_visible(BOB.id) is None


async def test_a_message_after_the_draft_takes_its_place(adapter: TelegramAdapter, telegram_api: TelegramAPI) -> None:
    await adapter.send_draft(str(BOB.id), None, 1, "half")
    await adapter.send(OutboundMessage(chat_id=str(BOB.id), text="the whole answer"))

    [draft] = telegram_api.drafts
    [message] = telegram_api.sent
    assert telegram_api.screen.draft_on_screen(BOB.id, message.at) is None
    assert telegram_api.screen.first_visible(BOB.id) == draft, "the user first saw the draft"
    assert [entry.kind for entry in telegram_api.screen.in_chat(BOB.id)] == ["draft", "message"]


async def test_an_older_bot_api_server_without_drafts_is_a_refusal_to_stream(
    adapter: TelegramAdapter, telegram_api: TelegramAPI
) -> None:
    telegram_api.drafts_available = False
    with pytest.raises(StreamingUnsupported, match="method not found"):
        await adapter.send_draft(str(BOB.id), None, 1, "hello")
    assert len(telegram_api.calls_to("sendMessageDraft")) == 1 and telegram_api.drafts == []


async def test_a_draft_in_a_group_is_a_refusal_to_stream(adapter: TelegramAdapter, telegram_api: TelegramAPI) -> None:
    group = telegram_api.add_chat(Chat.supergroup(-100777, topics=(4,)))
    with pytest.raises(StreamingUnsupported, match="TEXTDRAFT_PEER_INVALID"):
        await adapter.send_draft(str(group.id), "4", 1, "hello")
    [call] = telegram_api.calls_to("sendMessageDraft")
    assert call.params["message_thread_id"] == "4"


@pytest.mark.parametrize(
    ("failure", "expected", "says"),
    [
        (Failure.too_many_requests(4), RateLimited, "flood control"),
        (Failure.cant_parse(), MarkupRejected, "could not parse the HTML"),
        (Failure(400, "Bad Request: chat not found"), RecipientUnavailable, "chat not found"),
        (Failure(403, "Forbidden: bot was blocked by the user"), RecipientUnavailable, "blocked"),
        (Failure.server_error(), TransientDeliveryError, "unreachable or failing"),
        (Failure(400, "Bad Request: text is too long"), DeliveryError, "too long"),
    ],
)
async def test_other_draft_refusals_are_the_usual_delivery_errors(
    adapter: TelegramAdapter, telegram_api: TelegramAPI, failure: Failure, expected: type[DeliveryError], says: str
) -> None:
    telegram_api.fail("sendMessageDraft", failure)
    with pytest.raises(DeliveryError, match=says) as caught:
        await adapter.send_draft(str(BOB.id), None, 1, "<b>hi</b>", markup=Markup.TELEGRAM_HTML)
    assert type(caught.value) is expected
    if isinstance(caught.value, RateLimited):
        assert caught.value.retry_after == 4


async def test_drafts_are_offered_in_private_chats_only() -> None:
    modes = TelegramAdapter.stream_modes
    adapter = TelegramAdapter(TelegramSettings(token="123456789:TEST-token"))
    assert modes(adapter, ChatType.DM) == (StreamMode.DRAFT, StreamMode.EDIT)
    assert modes(adapter, ChatType.GROUP, "5") == (StreamMode.EDIT,)
    assert modes(adapter, ChatType.CHANNEL) == (StreamMode.EDIT,)


async def test_groups_take_twenty_a_minute_and_private_chats_one_a_second() -> None:
    adapter = TelegramAdapter(TelegramSettings(token="123456789:TEST-token"))
    rates = adapter.capabilities.rates
    assert (rates.per_chat, rates.overall, rates.stream_interval) == (Rate(1, 1.0), Rate(30, 1.0), 1.0)
    assert adapter.chat_rate("1002") == Rate(1, 1.0)
    assert adapter.chat_rate("-100777") == Rate(20, 60.0) == adapter.chat_rate("-42")
    assert adapter.chat_rate("@somechannel") == Rate(20, 60.0)


async def test_another_process_reads_what_was_shown(adapter: TelegramAdapter, telegram_api: TelegramAPI) -> None:
    await adapter.send_draft(str(BOB.id), None, 2, "on its way")
    async with aiohttp.ClientSession() as session, session.get(f"{telegram_api.base_url}/_test/shown") as answer:
        served = await answer.json()
    [draft] = served["shown"]
    assert (draft["kind"], draft["visible"], draft["draft_id"]) == ("draft", "on its way", 2)
    assert draft["at"] == telegram_api.drafts[0].at and served["rate_limited"] == 0

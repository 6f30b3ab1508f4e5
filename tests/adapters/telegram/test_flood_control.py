"""Telegram's published flood limits, as the emulator enforces them, reaching the gateway as RateLimited."""

from __future__ import annotations

import pytest

from adapters.contract import Markup, OutboundMessage, RateLimited
from adapters.telegram import TelegramAdapter
from tests.adapters.telegram.conftest import BOB
from tests.fakes.telegram_api import Chat, TelegramAPI, User


@pytest.fixture(autouse=True)
def limits_on(adapter: TelegramAdapter, telegram_api: TelegramAPI) -> None:
    """Telegram's limits enforced once the adapter has connected (no grace: these tests send back to back)."""
    telegram_api.enforce_rates(grace=0.0)


async def test_an_edit_right_after_a_send_is_refused_with_retry_after(
    adapter: TelegramAdapter, telegram_api: TelegramAPI
) -> None:
    message_id = await adapter.send(OutboundMessage(chat_id=str(BOB.id), text="first"))
    with pytest.raises(RateLimited) as caught:
        await adapter.edit(str(BOB.id), message_id, "<b>second</b>", markup=Markup.TELEGRAM_HTML)

    assert caught.value.retry_after == 1
    assert telegram_api.rate_limited == 1
    [message] = telegram_api.sent
    assert message.visible == "first" and message.edits == [], "a refused edit changes nothing"


async def test_a_draft_counts_like_an_edit(adapter: TelegramAdapter, telegram_api: TelegramAPI) -> None:
    await adapter.send_draft(str(BOB.id), None, 1, "thinking about it")
    with pytest.raises(RateLimited):
        await adapter.send_draft(str(BOB.id), None, 1, "thinking about it some more")
    with pytest.raises(RateLimited):
        await adapter.send(OutboundMessage(chat_id=str(BOB.id), text="the answer"))
    assert telegram_api.rate_limited == 2 and len(telegram_api.drafts) == 1


async def test_a_group_takes_twenty_messages_a_minute(adapter: TelegramAdapter, telegram_api: TelegramAPI) -> None:
    group = telegram_api.add_chat(Chat.supergroup(-100555))
    # One a second is a private chat's limit; a group's is 20 a minute, which a burst of 20 stays inside.
    for n in range(20):
        await adapter.send(OutboundMessage(chat_id=str(group.id), text=f"message {n}"))
    with pytest.raises(RateLimited) as caught:
        await adapter.send(OutboundMessage(chat_id=str(group.id), text="one too many"))

    assert 1 < caught.value.retry_after <= 60
    assert len(telegram_api.sent_to(group.id)) == 20 and telegram_api.rate_limited == 1


async def test_thirty_calls_a_second_across_chats(adapter: TelegramAdapter, telegram_api: TelegramAPI) -> None:
    users = [User(id=5000 + n, first_name=f"User {n}") for n in range(31)]
    for user in users:
        telegram_api.add_chat(Chat.private(user))
    for user in users[:30]:
        await adapter.send(OutboundMessage(chat_id=str(user.id), text="hello"))
    # Unless the machine took a whole second for those 30, the 31st is over the overall limit.
    first = telegram_api.sent[0].at
    try:
        await adapter.send(OutboundMessage(chat_id=str(users[30].id), text="hello"))
    except RateLimited as refused:
        assert refused.retry_after == 1 and telegram_api.rate_limited == 1
    else:
        assert telegram_api.sent[-1].at - first >= 1.0, "the 31st call within a second was accepted"


async def test_without_enforcement_nothing_is_refused(adapter: TelegramAdapter, telegram_api: TelegramAPI) -> None:
    telegram_api.enforce_rates(False)
    message_id = await adapter.send(OutboundMessage(chat_id=str(BOB.id), text="first"))
    await adapter.edit(str(BOB.id), message_id, "second")
    await adapter.send_draft(str(BOB.id), None, 1, "third")
    assert telegram_api.rate_limited == 0

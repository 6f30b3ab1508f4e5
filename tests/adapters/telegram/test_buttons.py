"""Buttons under a message on Telegram: real aiogram against the emulator, by long polling and by webhook.

A question goes out as an inline keyboard; a press comes back as a callback query, is acknowledged
to Telegram at once and reaches ``on_button`` as a :class:`ButtonPress`; closing the question edits
its text and takes the buttons away. Presses that are no button of a bot message in a chat, or
cannot be read, are acknowledged (when they can be) and dropped without holding up what comes after.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest_asyncio
from structlog.testing import capture_logs

from adapters.contract import Button, ButtonPress, InboundMessage
from adapters.telegram import TelegramAdapter, TelegramSettings
from adapters.telegram.polling import PollingSettings
from tests.adapters.telegram.conftest import ALICE, BOB, StartTelegram
from tests.adapters.telegram.test_webhook import SECRET, free_port
from tests.fakes.telegram_api import Chat, TelegramAPI
from tests.waiting import eventually

ALLOW_DENY = (Button("ask:t0k3n:allow", "Allow", "primary"), Button("ask:t0k3n:deny", "Deny", "danger"))


class Buttons:
    """The adapter alone, keeping the messages and presses it hands over."""

    def __init__(self, adapter: TelegramAdapter) -> None:
        self.adapter = adapter
        self.presses: list[ButtonPress] = []
        self.messages: list[InboundMessage] = []
        adapter.on_button = self._pressed

    async def _pressed(self, press: ButtonPress) -> None:
        self.presses.append(press)

    async def intake(self, message: InboundMessage) -> None:
        self.messages.append(message)


async def started(api: TelegramAPI, settings: TelegramSettings) -> Buttons:
    api.add_chat(Chat.private(BOB))
    buttons = Buttons(TelegramAdapter(settings))
    await buttons.adapter.start(buttons.intake)
    return buttons


@pytest_asyncio.fixture
async def polling(telegram_api: TelegramAPI) -> AsyncIterator[Buttons]:
    settings = TelegramSettings(token=telegram_api.token, api_base_url=telegram_api.base_url,
                                polling=PollingSettings(poll_timeout=1))  # fmt: skip
    buttons = await started(telegram_api, settings)
    try:
        yield buttons
    finally:
        await buttons.adapter.close()


@pytest_asyncio.fixture
async def webhook(telegram_api: TelegramAPI) -> AsyncIterator[Buttons]:
    port = free_port()
    settings = TelegramSettings(
        token=telegram_api.token, api_base_url=telegram_api.base_url, mode="webhook",
        webhook_url=f"http://127.0.0.1:{port}/hook", webhook_secret=SECRET, webhook_port=port,
    )  # fmt: skip
    buttons = await started(telegram_api, settings)
    try:
        yield buttons
    finally:
        await buttons.adapter.close()


async def ask_press_and_close(api: TelegramAPI, buttons: Buttons) -> None:
    adapter = buttons.adapter
    assert adapter.supports_buttons
    message_id = await adapter.send_choice(str(BOB.id), "Run github.search_issues (query: crash)?", ALLOW_DENY)
    [question] = api.sent_to(BOB.id)
    assert str(question.message_id) == message_id
    assert question.keyboard == [[{"text": "Allow", "callback_data": "ask:t0k3n:allow"},
                                  {"text": "Deny", "callback_data": "ask:t0k3n:deny"}]]  # fmt: skip

    update = await api.press(BOB, question, "Deny")
    await eventually(lambda: bool(buttons.presses), "the press handed to on_button")
    assert buttons.presses == [ButtonPress(platform="telegram", chat_id=str(BOB.id), user_id=str(BOB.id),
                                           button_id="ask:t0k3n:deny", message_id=message_id, user_name="Bob")]  # fmt: skip
    assert [a["callback_query_id"] for a in api.callback_answers] == [update["callback_query"]["id"]]
    await eventually(lambda: api.confirmed_below > update["update_id"], "the press confirmed to Telegram")

    await adapter.close_choice(str(BOB.id), message_id, "Denied by Bob: github.search_issues was not run.")
    assert question.visible == "Denied by Bob: github.search_issues was not run."
    assert question.keyboard is None
    assert buttons.messages == []  # a press is no message for the agent


async def test_a_press_by_long_polling_is_acknowledged_and_handed_over(telegram_api: TelegramAPI, polling: Buttons) -> None:
    await ask_press_and_close(telegram_api, polling)


async def test_a_press_by_webhook_is_acknowledged_and_handed_over(telegram_api: TelegramAPI, webhook: Buttons) -> None:
    await ask_press_and_close(telegram_api, webhook)
    assert (telegram_api.all_updates[-1]["update_id"], 200) in telegram_api.webhook_deliveries


async def test_a_question_in_a_topic_replies_to_the_asking_message_and_the_press_names_the_topic(
    telegram_api: TelegramAPI, polling: Buttons
) -> None:
    forum = telegram_api.add_chat(Chat.supergroup(-100777, topics=(5,)))
    asked = await telegram_api.say(ALICE, "look it up", chat=forum, thread_id=5)
    message_id = await polling.adapter.send_choice(
        str(forum.id), "Allow?", ALLOW_DENY, thread_id="5", reply_to=str(asked["message"]["message_id"])
    )
    [question] = telegram_api.sent_to(forum.id)
    assert (question.thread_id, question.reply_to) == (5, asked["message"]["message_id"])

    await telegram_api.press(ALICE, question, "Allow")
    await eventually(lambda: bool(polling.presses), "the press handed to on_button")
    [press] = polling.presses
    assert (press.chat_id, press.thread_id, press.user_id, press.message_id) == (str(forum.id), "5", str(ALICE.id),
                                                                                  message_id)  # fmt: skip


async def test_presses_that_are_no_button_of_a_chat_message_are_acknowledged_and_dropped(
    telegram_api: TelegramAPI, polling: Buttons
) -> None:
    with capture_logs() as logs:
        inline = await telegram_api.inline_press(ALICE, "ask:t0k3n:allow")  # under a message sent in inline mode
        await telegram_api.push_update(callback_query={"id": "q-broken", "from": "not a user"})
        await telegram_api.say(BOB, "still listening?")
        await eventually(lambda: bool(polling.messages), "the message after the presses")
    assert polling.messages[0].text == "still listening?"
    assert polling.presses == []
    assert [a["callback_query_id"] for a in telegram_api.callback_answers] == [inline["callback_query"]["id"]]
    events = [entry["event"] for entry in logs]
    assert "telegram.button.ignored" in events and "telegram.update.rejected" in events


async def test_the_bot_asks_telegram_for_presses(telegram_api: TelegramAPI, polling: Buttons) -> None:
    """Telegram makes no callback_query update for a bot whose allowed_updates leave them out."""
    await eventually(lambda: telegram_api.allowed_updates is not None, "a getUpdates with allowed_updates")
    assert telegram_api.allowed_updates is not None and "callback_query" in telegram_api.allowed_updates


async def test_a_press_in_a_group_outside_allowed_chats_is_acknowledged_and_ignored(
    start_telegram: StartTelegram, telegram_api: TelegramAPI
) -> None:
    """Through config.yaml and the gateway's adapter loading: the allowlist read is the one the operator wrote."""
    allowed, other = telegram_api.add_chat(Chat.supergroup(-1001)), telegram_api.add_chat(Chat.supergroup(-1002))
    run = await start_telegram(telegram={"allowed_chats": [str(allowed.id)]})
    heard: list[ButtonPress] = []

    async def hear(press: ButtonPress) -> None:
        heard.append(press)

    run.adapter.on_button = hear
    for chat in (other, allowed):
        await run.adapter.send_choice(str(chat.id), "Allow?", ALLOW_DENY)
    with capture_logs() as logs:
        for chat in (other, allowed):
            await telegram_api.press(ALICE, telegram_api.sent_to(chat.id)[0], "Allow")
        await eventually(lambda: bool(heard), "the press in the allowed group")
    assert [press.chat_id for press in heard] == [str(allowed.id)]
    [ignored] = [entry for entry in logs if entry["event"] == "telegram.button.ignored"]
    assert ignored["reason"] == f"chat {other.id} is not in allowed_chats"
    assert len(telegram_api.callback_answers) == 2  # both acknowledged

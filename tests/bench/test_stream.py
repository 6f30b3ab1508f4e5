"""The pieces of ``bench.stream`` that decide its figures: the verdict on what a chat shows, and the
screen it builds from the calls the real platform libraries make through its recording proxy."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
import pytest_asyncio
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer
from aiogram.exceptions import TelegramRetryAfter
from slack_sdk.web.async_client import AsyncWebClient

from bench.stream_answers import answer_text, judge
from bench.stream_watch import Screen, WatchProxy
from tests.fakes.slack_api import BOT_TOKEN, FakeSlack
from tests.fakes.telegram_api import Failure, TelegramAPI, User

WORDS = 30
ANSWER = answer_text(WORDS)
CUT = ANSWER.index("\n\n") + 2
HEAD, TAIL = ANSWER[:CUT], ANSWER[CUT:]  # two chunks, cut between the first two paragraphs


def test_the_answer_is_as_many_numbered_words_as_tokens() -> None:
    assert ANSWER.split()[:2] == ["w001", "w002"] and len(ANSWER.split()) == WORDS
    assert HEAD.split()[-1] == "w012" and TAIL.split()[0] == "w013"


def test_one_copy_in_one_message_or_in_chunks_is_the_answer_once() -> None:
    for shown in ([ANSWER], [HEAD, TAIL], ["Working on it…", HEAD, TAIL]):
        verdict = judge(shown, WORDS)
        assert (verdict.copies, verdict.duplicated, verdict.partial_messages, verdict.lost) == (1, False, 0, False)


def test_a_half_streamed_message_left_beside_the_answer_is_partial_not_a_duplicate() -> None:
    half = ANSWER[:40] + " — interrupted"
    verdict = judge([half, HEAD, TAIL], WORDS)
    assert (verdict.copies, verdict.duplicated, verdict.partial_messages) == (1, False, 1)


def test_the_answer_twice_or_a_chunk_twice_is_duplicated() -> None:
    assert judge([ANSWER, ANSWER], WORDS).duplicated
    twice = judge([HEAD, HEAD, TAIL], WORDS)
    assert twice.duplicated and twice.copies == 1 and twice.partial_messages == 0


def test_no_whole_answer_is_lost() -> None:
    assert judge([], WORDS).lost
    assert judge([HEAD], WORDS).lost and judge([HEAD], WORDS).partial_messages == 1
    assert judge([TAIL, HEAD], WORDS).lost  # chunks out of order are not the answer


@pytest_asyncio.fixture
async def telegram() -> AsyncIterator[tuple[TelegramAPI, WatchProxy, Screen]]:
    api = TelegramAPI()
    await api.start()
    proxy = WatchProxy("telegram", api.base_url)
    await proxy.start()
    screen = Screen()
    screen.watch(proxy)
    try:
        yield api, proxy, screen
    finally:
        await proxy.stop()
        await api.stop()


async def test_the_screen_follows_what_aiogram_sent_and_edited_through_the_proxy(
    telegram: tuple[TelegramAPI, WatchProxy, Screen],
) -> None:
    api, proxy, screen = telegram
    user = User(5001, "Ann")
    await api.say(user, "hello")  # the emulator knows the chat once the user wrote in it
    bot = Bot(api.token, session=AiohttpSession(api=TelegramAPIServer.from_base(proxy.base_url)))
    try:
        sent = await bot.send_message(user.id, HEAD)
        await bot.edit_message_text(ANSWER, chat_id=user.id, message_id=sent.message_id)
        api.fail("sendMessage", Failure.too_many_requests(1))
        with pytest.raises(TelegramRetryAfter):
            await bot.send_message(user.id, "too soon")
    finally:
        await bot.session.close()
    chat = screen.chat(f"telegram:{user.id}")
    assert list(chat.messages.values()) == [ANSWER] and chat.updates == 1
    assert chat.first_visible == next(c.at for c in proxy.calls if c.path.endswith("/sendMessage"))
    assert screen.rate_limited == {"telegram": 1}
    assert [m.visible for m in api.sent] == [ANSWER]  # the emulator saw what the screen shows


async def test_the_screen_follows_a_slack_stream_through_the_proxy() -> None:
    slack = FakeSlack()
    await slack.start()
    proxy = WatchProxy("slack", f"http://127.0.0.1:{slack.port}")
    await proxy.start()
    screen = Screen()
    screen.watch(proxy)
    client = AsyncWebClient(token=BOT_TOKEN, base_url=proxy.base_url + "/api/")
    try:
        started = await client.chat_startStream(channel="D0ANN", thread_ts="1800000000.000001")
        assert screen.chat("slack:D0ANN").first_visible is None  # a stream with no text shows nothing yet
        await client.chat_appendStream(channel="D0ANN", ts=started["ts"], markdown_text=HEAD)
        await client.chat_appendStream(channel="D0ANN", ts=started["ts"], markdown_text=TAIL)
        await client.chat_stopStream(channel="D0ANN", ts=started["ts"])
    finally:
        if client.session is not None:
            await client.session.close()
        await proxy.stop()
        await slack.stop()
    chat = screen.chat("slack:D0ANN")
    assert list(chat.messages.values()) == [ANSWER] and chat.updates == 1
    assert chat.first_visible == next(c.at for c in proxy.calls if c.path.endswith("chat.appendStream"))

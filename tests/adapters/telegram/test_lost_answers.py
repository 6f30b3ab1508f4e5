"""The window Telegram leaves: a message it sent whose answer never came back is sent again and shows twice.

The Bot API has no idempotency key for ``sendMessage`` and no way for a bot to
read a chat's history, so a send that got no message id cannot be resolved:
the outbox sends it again (a duplicate is better than a lost reply). These
tests pin that window down, so a change that narrows it (or widens it) shows
here: the fake Telegram carries out ``sendMessage`` and then cuts the
connection (:meth:`Failure.lost_answer`). A send that never left (no
connection could be made) is not ambiguous: it is sent again without doubt.
"""

from __future__ import annotations

import socket

import pytest
from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.client.telegram import TelegramAPIServer

from adapters.contract import OutboundMessage, TransientDeliveryError
from adapters.telegram.sending import Sender
from tests.adapters.telegram.conftest import ALICE, StartTelegram
from tests.fakes.model_server import ModelServer
from tests.fakes.telegram_api import Failure, TelegramAPI
from tests.gateway.conftest import settled


async def test_a_reply_whose_answer_was_lost_shows_twice_the_documented_window(
    start_telegram: StartTelegram, telegram_api: TelegramAPI, model_server: ModelServer
) -> None:
    run = await start_telegram()
    telegram_api.fail("sendMessage", Failure.lost_answer())
    await telegram_api.say(ALICE, "hello there")
    first, second = await telegram_api.wait_sent(2)
    await settled(run.store)

    assert first.text == second.text == "ok: hello there", "Telegram cannot tell us it had the first one"
    row = await run.store.outbox_get(1)
    assert row is not None and (row.status, row.platform_message_id) == ("sent", str(second.message_id))


async def test_a_send_that_never_left_is_not_ambiguous(telegram_api: TelegramAPI) -> None:
    """No connection could be made: the chunk surely did not arrive (sent again without doubt)."""
    session = AiohttpSession(api=TelegramAPIServer.from_base(f"http://127.0.0.1:{closed_port()}"))
    bot = Bot(telegram_api.token, session=session)
    try:
        with pytest.raises(TransientDeliveryError) as caught:
            await Sender(bot).send(OutboundMessage(chat_id=str(ALICE.id), text="hello"))
    finally:
        await session.close()
    assert caught.value.may_have_arrived is False


def closed_port() -> int:
    """A local port nothing listens on (bound, then closed again)."""
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        return int(unused.getsockname()[1])

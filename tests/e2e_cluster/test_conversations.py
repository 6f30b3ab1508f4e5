"""The count the cluster tests and ``bench.cluster`` judge by: a message no reply names is lost, one two replies
name is duplicated, a chat answered in another order than it wrote is out of order, and a reply that does not
answer the last message it names is misdirected."""

from __future__ import annotations

import time

from tests.e2e_cluster.conversations import Load, tally
from tests.fakes.telegram_api import TelegramAPI
from tests.fakes.telegram_api.server import BotMessage


async def written(telegram: TelegramAPI) -> Load:
    load = Load(chats=2, per_chat=3)
    await load.feed(telegram, pause=0)
    return load


def reply(telegram: TelegramAPI, load: Load, chat: int, *tags: str, to: str | None = None) -> None:
    """The bot answers ``tags`` in ``chat`` (replying to the last one, or to ``to``)."""
    user = load.user(chat).id
    target = load.sent[to or tags[-1]]["message"]["message_id"]
    telegram.sent.append(BotMessage(user, telegram.next_message_id(user), "re: " + " ".join(tags), None,
                                    "re: " + " ".join(tags), None, target, time.monotonic()))  # fmt: skip


async def test_every_message_answered_once_in_order_counts_nothing(telegram_api: TelegramAPI) -> None:
    load = await written(telegram_api)
    reply(telegram_api, load, 0, "c00-m00")
    reply(telegram_api, load, 0, "c00-m01", "c00-m02")  # two messages answered together by one turn
    for tag in ("c01-m00", "c01-m01", "c01-m02"):
        reply(telegram_api, load, 1, tag)

    counted = tally(load, telegram_api)
    assert (counted.lost, counted.duplicated, counted.out_of_order, counted.misdirected) == ([], [], {}, [])


async def test_lost_duplicated_out_of_order_and_misdirected_are_each_counted(telegram_api: TelegramAPI) -> None:
    load = await written(telegram_api)
    reply(telegram_api, load, 0, "c00-m01")
    reply(telegram_api, load, 0, "c00-m00")  # answered after the message written after it
    reply(telegram_api, load, 0, "c00-m02", to="c00-m01")  # answers the wrong message
    reply(telegram_api, load, 1, "c01-m00")
    reply(telegram_api, load, 1, "c01-m00")  # a second turn for the same message

    counted = tally(load, telegram_api)

    assert counted.lost == ["c01-m01", "c01-m02"]
    assert counted.duplicated == ["c01-m00"]
    assert counted.out_of_order == {0: [1, 0, 2]}
    assert len(counted.misdirected) == 1 and "c00-m02" in counted.misdirected[0]

"""Two gateways share one bot token: only the holder of the poller's lease polls, and a stale holder stops.

The real adapter (aiogram) against the emulator, twice, as two replicas would run it: each on its own
base-URL path (``{base}/r1``, ``{base}/r2``), so the emulator tells which one made each call
(``Call.via``). The gateway's side of the lease is :class:`~adapters.contract.Ownership`, the adapter's
only dependency on it: here the test holds its ``held()`` answer and its record of progress (the gateway's
real leases on PostgreSQL are exercised in tests/gateway/test_cluster_connections.py).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest_asyncio

from adapters.contract import InboundMessage, OutboundMessage, Ownership
from adapters.telegram import TelegramAdapter, TelegramSettings
from adapters.telegram.polling import PollingSettings
from tests.adapters.telegram.conftest import ALICE
from tests.fakes.telegram_api import TelegramAPI
from tests.waiting import eventually


class Lease:
    """The gateway's side of one holder's lease, as the adapter sees it: held or not, and what it recorded."""

    def __init__(self, fence: int, progress: str | None = None) -> None:
        self.holds = True
        self.recorded: list[str] = []
        self.ownership = Ownership(lease="telegram:poll:123456789", fence=fence, held=lambda: self.holds,
                                   progress=progress, record=self._record)  # fmt: skip

    async def _record(self, progress: str) -> bool:
        if not self.holds:
            return False
        self.recorded.append(progress)
        return True


class Intake:
    def __init__(self) -> None:
        self.stored: list[InboundMessage] = []

    async def __call__(self, message: InboundMessage) -> None:
        self.stored.append(message)


def polls_by(api: TelegramAPI, via: str) -> int:
    return len([call for call in api.calls_to("getUpdates") if call.via == via])


async def standing_by(one: TelegramAdapter, two: TelegramAdapter) -> tuple[Intake, Intake]:
    """Both started for sending only (what each hands over is kept)."""
    first, second = Intake(), Intake()
    # Before: start() took no receive argument, and every process polled (409 Conflict for all but one).
    await one.start(first, receive=False)
    await two.start(second, receive=False)
    return first, second


@pytest_asyncio.fixture
async def replicas(telegram_api: TelegramAPI) -> AsyncIterator[tuple[TelegramAdapter, TelegramAdapter]]:
    polling = PollingSettings(poll_timeout=1, stall_timeout=30, retry_base=0.2, retry_max=0.5)
    pair = tuple(
        TelegramAdapter(TelegramSettings(token=telegram_api.token, api_base_url=f"{telegram_api.base_url}/{via}",
                                         polling=polling))  # fmt: skip
        for via in ("r1", "r2")
    )
    yield pair  # type: ignore[misc]
    for adapter in pair:
        await adapter.close()


async def test_only_the_lease_holder_polls_and_the_other_sends(
    replicas: tuple[TelegramAdapter, TelegramAdapter], telegram_api: TelegramAPI
) -> None:
    one, two = replicas
    assert one.receiving_lease() == two.receiving_lease() == "telegram:poll:123456789"
    first, second = await standing_by(one, two)
    lease = Lease(fence=1)
    await one.start_receiving(lease.ownership)
    update = await telegram_api.say(ALICE, "hello")
    await eventually(lambda: first.stored, "the holder to hand the update over")
    await eventually(lambda: lease.recorded == [str(update["update_id"] + 1)], "the offset recorded with the lease")
    await two.send(OutboundMessage(chat_id=str(ALICE.id), text="sent by the other replica"))
    assert [call.via for call in telegram_api.calls_to("sendMessage")] == ["r2"]
    assert polls_by(telegram_api, "r2") == 0 and not second.stored
    assert (await two.probe_liveness([])).ok  # a replica that only sends is not deaf


async def test_a_holder_whose_lease_is_gone_stops_polling_hands_nothing_over_and_records_nothing(
    replicas: tuple[TelegramAdapter, TelegramAdapter], telegram_api: TelegramAPI
) -> None:
    one, two = replicas
    first, second = await standing_by(one, two)
    old = Lease(fence=1)
    await one.start_receiving(old.ownership)
    before = await telegram_api.say(ALICE, "before")
    await eventually(lambda: old.recorded == [str(before["update_id"] + 1)], "the first update handed over")
    await eventually(lambda: polls_by(telegram_api, "r1") >= 2 and len(telegram_api.calls) > len(telegram_api.answered),
                     "the holder's next long poll to be waiting")  # fmt: skip
    old.holds = False  # its replica froze past the expiry: what it had asked for comes back to a stale holder
    during = await telegram_api.say(ALICE, "while it was frozen")
    polls = polls_by(telegram_api, "r1")
    await asyncio.sleep(1.5)  # longer than a long poll: a stale holder would have polled again by now
    assert polls_by(telegram_api, "r1") == polls
    assert [m.text for m in first.stored] == ["before"] and old.recorded == [str(before["update_id"] + 1)]

    new = Lease(fence=2, progress=old.recorded[-1])
    await two.start_receiving(new.ownership)
    await eventually(lambda: second.stored, "the new holder to receive what the old one left")
    assert [m.event_id for m in second.stored] == [str(during["update_id"])]
    first_poll = next(call for call in telegram_api.calls_to("getUpdates") if call.via == "r2")
    assert int(first_poll.params["offset"]) == before["update_id"] + 1  # from the recorded progress
    assert polls_by(telegram_api, "r1") == polls


async def test_stop_receiving_hands_the_offset_over_and_sending_goes_on(
    replicas: tuple[TelegramAdapter, TelegramAdapter], telegram_api: TelegramAPI
) -> None:
    one, _ = replicas
    intake = Intake()
    await one.start(intake, receive=False)
    lease = Lease(fence=3)
    await one.start_receiving(lease.ownership)
    update = await telegram_api.say(ALICE, "one")
    await eventually(lambda: intake.stored, "the update handed over")
    await one.stop_receiving()
    assert lease.recorded[-1] == str(update["update_id"] + 1)
    assert telegram_api.confirmed_below == update["update_id"] + 1
    polls = polls_by(telegram_api, "r1")
    await telegram_api.say(ALICE, "two")
    await asyncio.sleep(1.5)  # longer than a long poll: a poller still running would have fetched it
    assert polls_by(telegram_api, "r1") == polls and len(intake.stored) == 1
    await one.send(OutboundMessage(chat_id=str(ALICE.id), text="still sending"))

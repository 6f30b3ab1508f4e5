"""The rate budget (``gateway/delivery/budget.py``) through the real Delivery, on a clock the test moves.

Every send and edit waits for its chat's rate and the platform's overall rate; a 429 holds back its
chat (only it) for the time the platform asked; callers waiting for the overall rate go in the order
they came; idle chats are forgotten.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from adapters.contract import Capabilities, Markup, OutboundMessage, Rate, RateLimited, RateLimits
from gateway.delivery.budget import MARGIN, ChatBudget
from gateway.delivery.outbox import Delivery
from gateway.operations.metrics import Metrics
from storage import Store
from tests.fakes.adapter import LoopbackAdapter
from tests.fakes.clock import FakeTime


class TimedAdapter(LoopbackAdapter):
    """Loopback that notes the clock at every call (sends and edits) it gets, per chat."""

    def __init__(self, time: FakeTime, rates: RateLimits) -> None:
        super().__init__()
        self.capabilities = Capabilities(max_message_length=4096, can_edit=True, markup=Markup.PLAIN, rates=rates)
        self.time = time
        self.calls: list[tuple[float, str]] = []

    async def send(self, message: OutboundMessage) -> str:
        self.calls.append((self.time(), message.chat_id))
        return await super().send(message)

    async def edit(self, chat_id: str, message_id: str, text: str, *, markup: Markup = Markup.PLAIN) -> None:
        self.calls.append((self.time(), chat_id))
        await super().edit(chat_id, message_id, text, markup=markup)

    def times(self, chat_id: str | None = None) -> list[float]:
        return [at for at, chat in self.calls if chat_id is None or chat == chat_id]


def most_in_any_window(times: list[float], per: float) -> int:
    """The most calls that fall in any ``per`` seconds."""
    return max((sum(1 for other in times if start <= other < start + per) for start in times), default=0)


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "state.db")
    yield opened
    await opened.close()


def delivery_for(store: Store, adapter: TimedAdapter) -> Delivery:
    return Delivery(store, {adapter.platform: adapter}, Metrics(), clock=adapter.time, sleep=adapter.time.sleep)


async def say(delivery: Delivery, chat_id: str, text: str, turn: str) -> list[str]:
    return await delivery.send_text(turn_id=turn, platform="loopback", chat_id=chat_id, text=text)


async def test_sends_and_edits_to_one_chat_keep_to_its_rate_and_other_chats_are_not_held_back(store: Store) -> None:
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(2, 1.0)))
    delivery = delivery_for(store, adapter)
    rows = []
    for n in range(4):
        ((row, sent),) = await delivery.send_text_rows(turn_id=f"t{n}", platform="loopback", chat_id="busy", text=f"r{n}")
        rows.append((row, sent))
    for n, (row, sent) in enumerate(rows):
        assert await delivery.edit_text(row, f"r{n} edited") == [sent]
    started = time()
    assert await say(delivery, "quiet", "hello", "q1")  # another chat goes at once
    busy = adapter.times("busy")
    assert len(busy) == 8 and most_in_any_window(busy, 1.0) == 2
    assert busy[-1] - busy[0] >= 3.0  # 8 calls at 2 a second
    assert adapter.times("quiet") == [started]


async def test_many_chats_together_keep_to_the_platform_s_overall_rate(store: Store) -> None:
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(100, 1.0), overall=Rate(3, 1.0)))
    delivery = delivery_for(store, adapter)
    await asyncio.gather(*(say(delivery, f"c{n}", "hello", f"t{n}") for n in range(10)))
    times = adapter.times()
    assert len(times) == 10 and most_in_any_window(times, 1.0) == 3


async def test_a_replica_of_three_keeps_to_a_third_of_the_overall_rate(store: Store) -> None:
    """Three gateways send for one bot (cluster mode): each keeps to its part, so together they keep to the rate."""
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(100, 1.0), overall=Rate(30, 1.0)))
    delivery = delivery_for(store, adapter)
    await say(delivery, "c0", "before the others joined", "t0")
    delivery.budget.share_with(3)
    await asyncio.gather(*(say(delivery, f"c{n}", "hello", f"t{n}") for n in range(1, 40)))
    assert most_in_any_window(adapter.times()[1:], 1.0) == 10
    delivery.budget.share_with(1)  # the others left: the whole rate again
    await asyncio.gather(*(say(delivery, f"d{n}", "hello", f"u{n}") for n in range(60)))
    assert most_in_any_window(adapter.times()[40:], 1.0) == 30


async def test_a_429_holds_back_its_chat_for_the_time_asked_and_no_other(store: Store) -> None:
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(5, 1.0)))
    delivery = delivery_for(store, adapter)
    adapter.failures.append(RateLimited(30.0))
    limited = asyncio.create_task(say(delivery, "limited", "first", "t1"))
    while not adapter.times("limited"):  # the 429 came back: the chat is held
        await asyncio.sleep(0)
    with time.held():  # the other chat's send is not held back: it goes before the 30 s are over
        assert await say(delivery, "other", "meanwhile", "t2")
    assert await limited
    assert adapter.texts() == ["meanwhile", "first"]
    (other,) = adapter.times("other")
    refused, limited_at = adapter.times("limited")
    assert other == refused and limited_at == refused + 30.0
    assert delivery.budget.available_in("loopback", "other") == 0.0


async def test_chats_waiting_for_the_overall_rate_go_in_the_order_they_came() -> None:
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(10, 1.0), overall=Rate(1, 1.0)))
    budget = ChatBudget({"loopback": adapter}, clock=time, sleep=time.sleep)
    served: list[str] = []

    async def write(chat_id: str, times: int = 1) -> None:
        for _ in range(times):
            await budget.take("loopback", chat_id)
            served.append(chat_id)
            await asyncio.sleep(0)  # the call itself
    # A chat with a lot to say started first; the others queue behind its first call, and its
    # later calls (made once the first one is done) queue behind them.
    await asyncio.gather(write("talkative", 3), *(write(f"c{n}") for n in range(5)))
    assert served == ["talkative", "c0", "c1", "c2", "c3", "c4", "talkative", "talkative"]


async def test_a_held_chat_does_not_hold_back_the_queue_for_the_overall_rate() -> None:
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(10, 1.0), overall=Rate(1, 1.0)))
    budget = ChatBudget({"loopback": adapter}, clock=time, sleep=time.sleep)
    budget.hold("loopback", "held", 60.0)
    served: list[tuple[str, float]] = []

    async def write(chat_id: str) -> None:
        await budget.take("loopback", chat_id)
        served.append((chat_id, time()))

    await asyncio.gather(write("held"), write("a"), write("b"))
    assert [chat for chat, _ in served] == ["a", "b", "held"]
    assert served[-1][1] >= 1060.0


async def test_available_in_says_how_long_a_take_would_wait() -> None:
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(1, 2.0)))
    budget = ChatBudget({"loopback": adapter}, clock=time, sleep=time.sleep)
    assert budget.available_in("loopback", "c1") == 0.0
    await budget.take("loopback", "c1")
    assert budget.available_in("loopback", "c1") == pytest.approx(2.0 + MARGIN)
    assert budget.available_in("loopback", "c2") == 0.0
    budget.hold("loopback", "c1", 10.0)
    assert budget.available_in("loopback", "c1") == pytest.approx(10.0)
    await budget.take("loopback", "c1")
    assert time.pauses == [pytest.approx(10.0)]


async def test_a_cancelled_wait_leaves_nothing_behind() -> None:
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(10, 1.0), overall=Rate(1, 1.0)))
    budget = ChatBudget({"loopback": adapter}, clock=time, sleep=time.sleep)
    await budget.take("loopback", "a")
    waiting = asyncio.create_task(budget.take("loopback", "b"))
    await asyncio.sleep(0)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await budget.take("loopback", "c")  # not behind the cancelled caller
    assert time() == pytest.approx(1000.0 + 1.0 + MARGIN)


async def test_idle_chats_are_forgotten() -> None:
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(1, 1.0)))
    budget = ChatBudget({"loopback": adapter}, clock=time, sleep=time.sleep)
    for n in range(5000):
        await budget.take("loopback", f"chat{n}")
        time.now += 0.01  # 100 new chats a second, each written to once
    assert budget.remembered() < 2100  # not all 5000: those idle for a second are swept out
    budget.hold("loopback", "chat4999", 3600.0)
    time.now += 10.0
    for n in range(3000):
        await budget.take("loopback", f"later{n}")
    assert budget.available_in("loopback", "chat4999") > 3500  # a hold is kept while it lasts


def test_the_stream_interval_is_the_configured_one_or_the_adapter_s() -> None:
    adapter = TimedAdapter(FakeTime(), RateLimits(stream_interval=0.5))
    assert ChatBudget({"loopback": adapter}).stream_interval("loopback") == 0.5
    assert ChatBudget({"loopback": adapter}, intervals={"loopback": 2.0}).stream_interval("loopback") == 2.0


class TelegramNamedAdapter(LoopbackAdapter):
    platform = "telegram"  # reads platforms.telegram of the config


async def test_the_gateway_s_budget_takes_the_configured_stream_interval(start_gateway) -> None:  # type: ignore[no-untyped-def]
    configured = await start_gateway({"platforms": {"telegram": {"stream_edit_interval": 2.5}}},
                                     adapter=TelegramNamedAdapter())  # fmt: skip
    assert configured.gateway.delivery.budget.stream_interval("telegram") == 2.5
    unset = await start_gateway(adapter=TelegramNamedAdapter())
    assert unset.gateway.delivery.budget.stream_interval("telegram") == 1.0  # the adapter's own


async def test_a_call_that_ended_late_counts_from_its_end_so_the_next_cannot_arrive_early() -> None:
    time = FakeTime()
    adapter = TimedAdapter(time, RateLimits(per_chat=Rate(1, 1.0)))
    budget = ChatBudget({"loopback": adapter}, clock=time, sleep=time.sleep)
    async with budget.write("loopback", "c1"):
        await time.sleep(0.7)  # the call takes 0.7 s: the platform may have counted it at any point of it
    # Counted from when it was let through, the next call could go 0.3 s after this one ended and
    # reach the platform less than a second after it did.
    assert budget.available_in("loopback", "c1") == pytest.approx(1.0 + MARGIN)
    async with budget.write("loopback", "c1", append=True):
        await time.sleep(0.4)
    assert budget.append_available_in("loopback", "c1") == pytest.approx(adapter.capabilities.rates.stream_interval + MARGIN)

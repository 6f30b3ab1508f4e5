"""``OutboundMessage.maybe_sent``: set only when an earlier attempt at the chunk may have reached the platform."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest_asyncio

from adapters.contract import DeliveryError, OutboundMessage, RateLimited, TransientDeliveryError
from gateway.delivery.outbox import Delivery
from gateway.delivery.policy import DeliveryPolicy, chunk_nonce
from gateway.operations.metrics import Metrics
from storage import OutboxChunk, Store
from tests.fakes.adapter import LoopbackAdapter
from tests.fakes.clock import FakeTime


class RecordingAdapter(LoopbackAdapter):
    """Loopback that remembers every attempt, also the ones that fail."""

    def __init__(self, *failures: DeliveryError) -> None:
        super().__init__()
        self.failures = list(failures)
        self.attempts: list[OutboundMessage] = []

    async def send(self, message: OutboundMessage) -> str:
        self.attempts.append(message)
        return await super().send(message)


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "state.db")
    yield opened
    await opened.close()


async def no_sleep(_: float) -> None:
    return None


async def send(store: Store, adapter: RecordingAdapter) -> list[str]:
    delivery = Delivery(store, {adapter.platform: adapter}, Metrics(), sleep=no_sleep)
    return await delivery.send_text(turn_id="t1", platform="loopback", chat_id="c1", text="hello")


async def test_a_first_attempt_is_not_maybe_sent(store: Store) -> None:
    adapter = RecordingAdapter()
    assert await send(store, adapter) == ["m1"]
    assert [m.maybe_sent for m in adapter.attempts] == [False]


async def test_a_retry_after_a_transient_error_is_maybe_sent(store: Store) -> None:
    adapter = RecordingAdapter(TransientDeliveryError("connection reset after the request went out"))
    assert await send(store, adapter) == ["m1"]
    first, retry = adapter.attempts
    assert (first.maybe_sent, retry.maybe_sent) == (False, True)
    assert first.nonce == retry.nonce is not None


async def test_a_retry_after_a_rate_limit_is_not_maybe_sent(store: Store) -> None:
    """A 429 means the platform did not take the chunk."""
    adapter = RecordingAdapter(RateLimited(0, "429"))
    assert await send(store, adapter) == ["m1"]
    assert [m.maybe_sent for m in adapter.attempts] == [False, False]


async def test_a_chunk_sent_by_resume_is_maybe_sent(store: Store) -> None:
    """The row does not record that an attempt started, so a chunk pending at restart may have landed."""
    await store.outbox_add("t1", "loopback", "c1", None, ["left over"])
    adapter = RecordingAdapter()
    delivery = Delivery(store, {adapter.platform: adapter}, Metrics(), sleep=no_sleep)
    assert await delivery.resume() == 1
    [resumed] = adapter.attempts
    assert (resumed.text, resumed.maybe_sent) == ("left over", True)


async def test_a_row_with_counted_attempts_is_maybe_sent(store: Store) -> None:
    (row,) = await store.outbox_add("t1", "loopback", "c1", None, ["tried before"])
    await store.outbox_mark_failed(row.id, "timed out")
    adapter = RecordingAdapter()
    delivery = Delivery(store, {adapter.platform: adapter}, Metrics(), sleep=no_sleep)
    assert await delivery.send_text(turn_id="t1", platform="loopback", chat_id="c1", text="tried before") == ["m1"]
    assert [m.maybe_sent for m in adapter.attempts] == [True]


async def test_a_chunk_failing_past_its_attempts_waits_and_the_chat_keeps_its_order(store: Store) -> None:
    adapter = RecordingAdapter(*[TransientDeliveryError("Telegram unreachable: connection reset")] * 6)
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)

    delivery = Delivery(store, {adapter.platform: adapter}, Metrics(), sleep=sleep)
    assert await delivery.send_text(turn_id="t1", platform="loopback", chat_id="c1", text="first") == []
    assert len(adapter.attempts) == 6 and len(pauses) == 5  # no pause after the last attempt
    (row,) = await store.outbox_pending()  # an outage: kept, to be tried again
    assert row.last_error == "still failing after 6 attempts: Telegram unreachable: connection reset"
    assert await delivery.send_text(turn_id="t2", platform="loopback", chat_id="c1", text="second") == []
    assert await delivery.send_text(turn_id="t3", platform="loopback", chat_id="c2", text="elsewhere") == ["m1"]
    assert len(adapter.attempts) == 7  # "second" waits behind "first" instead of overtaking it
    assert await delivery.retry_stalled() == 2  # the network is back
    assert adapter.texts() == ["elsewhere", "first", "second"] and await store.outbox_pending() == []


async def test_a_chunk_failing_past_its_attempts_for_too_long_is_given_up_with_the_reason(store: Store) -> None:
    adapter = RecordingAdapter(*[TransientDeliveryError("connection reset")] * 6)
    delivery = Delivery(store, {adapter.platform: adapter}, Metrics(), sleep=no_sleep, policy=DeliveryPolicy(keep_trying=0))
    assert await delivery.send_text(turn_id="t1", platform="loopback", chat_id="c1", text="hello") == []
    row = await store.outbox_get(1)
    assert row is not None and row.status == "failed"
    assert row.last_error == "still failing after 6 attempts: connection reset"


async def test_a_long_rate_limit_is_not_waited_out_by_the_sender(store: Store) -> None:
    adapter = RecordingAdapter(RateLimited(3600))
    time = FakeTime()
    delivery = Delivery(store, {adapter.platform: adapter}, Metrics(), sleep=time.sleep, clock=time)
    assert await delivery.send_text(turn_id="t1", platform="loopback", chat_id="c1", text="hello") == []
    assert time.pauses == []  # the turn is not held for an hour
    (row,) = await store.outbox_pending()
    assert row.last_error == "still failing after 1 attempt: rate limited (retry after 3600 s)"
    assert await delivery.retry_stalled() == 1  # the later retry honours the wait, then sends
    assert time.pauses == [3600.0] and adapter.texts() == ["hello"]


async def test_a_retry_after_a_send_that_never_left_is_not_maybe_sent(store: Store) -> None:
    """No connection could be made: the platform cannot have the chunk, so there is nothing to look for."""
    adapter = RecordingAdapter(TransientDeliveryError("connection refused", unsent=True))
    assert await send(store, adapter) == ["m1"]
    assert [m.maybe_sent for m in adapter.attempts] == [False, False]


async def test_a_streamed_message_whose_first_send_lost_its_answer_is_maybe_sent_once_the_answer_takes_it_over(
    store: Store,
) -> None:
    """The stream's first send got no id and the turn ended before another: the answer's send asks first."""
    live = await store.outbox_stream_open("t1", "loopback", "c1", None, OutboxChunk(text="", markup="plain"))
    assert await store.outbox_stream_attempted(live.id, "connection reset after the request went out")
    adapter = RecordingAdapter()
    delivery = Delivery(store, {adapter.platform: adapter}, Metrics(), sleep=no_sleep)
    assert await delivery.send_text(turn_id="t1", platform="loopback", chat_id="c1", text="the answer") == ["m1"]
    [sent] = adapter.attempts
    assert (sent.text, sent.maybe_sent, sent.nonce) == ("the answer", True, chunk_nonce(live))

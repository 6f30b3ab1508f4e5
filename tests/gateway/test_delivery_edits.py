"""Edits through the outbox: recorded before the adapter is asked, finished by resume, never re-sent."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from adapters.contract import Capabilities, DeliveryError, Markup, MarkupRejected, RateLimited, TransientDeliveryError
from gateway.delivery.outbox import Delivery
from gateway.operations.metrics import Metrics
from storage import OutboxRecord, Store
from tests.fakes.adapter import UNHURRIED, LoopbackAdapter
from tests.fakes.clock import FakeTime


class Crash(Exception):
    """Stands for the process dying: nothing after it runs."""


class EditingAdapter(LoopbackAdapter):
    """Loopback with scripted edit failures; remembers the outbox row as it stood at each edit call."""

    def __init__(self, store: Store | None = None) -> None:
        super().__init__()
        self.edit_failures: list[DeliveryError] = []
        self.edit_markups: list[Markup] = []
        self.rows_at_edit: list[OutboxRecord | None] = []
        self.store = store

    async def edit(self, chat_id: str, message_id: str, text: str, *, markup: Markup = Markup.PLAIN) -> None:
        if self.store is not None:
            pending = [r for r in await self.store.outbox_pending() if r.platform_message_id == message_id]
            self.rows_at_edit.append(pending[0] if pending else None)
        self.edit_markups.append(markup)
        if self.edit_failures:
            raise self.edit_failures.pop(0)
        await super().edit(chat_id, message_id, text, markup=markup)


class SmallHtmlAdapter(EditingAdapter):
    capabilities = Capabilities(max_message_length=40, length_unit="chars", can_edit=True, markup=Markup.TELEGRAM_HTML,
                                rates=UNHURRIED)  # fmt: skip


@pytest_asyncio.fixture
async def store(tmp_path: Path) -> AsyncIterator[Store]:
    opened = await Store.open(tmp_path / "state.db")
    yield opened
    await opened.close()


async def no_sleep(_: float) -> None:
    return None


def delivery_for(store: Store, adapter: LoopbackAdapter, sleep=no_sleep) -> Delivery:  # type: ignore[no-untyped-def]
    return Delivery(store, {adapter.platform: adapter}, Metrics(), sleep=sleep)


async def sent_row(delivery: Delivery, text: str = "first version") -> OutboxRecord:
    ((row, message_id),) = await delivery.send_text_rows(turn_id="t1", platform="loopback", chat_id="c1", text=text)
    assert message_id == "m1"
    return row


async def row_by_id(store: Store, outbox_id: int) -> OutboxRecord:
    row = await store.outbox_get(outbox_id)
    assert row is not None
    return row


async def test_an_edit_updates_the_recorded_message_instead_of_sending(store: Store) -> None:
    adapter = EditingAdapter(store)
    delivery = delivery_for(store, adapter)
    row = await sent_row(delivery)
    assert await delivery.edit_text(row.id, "second version") == ["m1"]
    assert [(e.message_id, e.text) for e in adapter.edits] == [("m1", "second version")]
    assert len(adapter.sent) == 1
    # The adapter was called with the new text already recorded and the row pending again.
    (during,) = adapter.rows_at_edit
    assert during is not None and during.text == "second version" and during.platform_message_id == "m1"
    after = await row_by_id(store, row.id)
    assert (after.status, after.text, after.platform_message_id) == ("sent", "second version", "m1")


async def test_a_crash_during_an_edit_leaves_it_pending_and_resume_edits_instead_of_resending(store: Store) -> None:
    adapter = EditingAdapter(store)
    row = await sent_row(delivery_for(store, adapter))

    async def crash(_: float) -> None:  # the process dies while backing off after the failed edit
        raise Crash

    adapter.edit_failures.append(TransientDeliveryError("connection reset"))
    with pytest.raises(Crash):
        await delivery_for(store, adapter, sleep=crash).edit_text(row, "edited before the crash")
    assert adapter.edits == []
    (pending,) = await store.outbox_pending()
    assert (pending.id, pending.status, pending.platform_message_id, pending.text) == (
        row.id, "pending", "m1", "edited before the crash",
    )  # fmt: skip

    assert await delivery_for(store, adapter).resume() == 1  # a fresh process
    assert [(e.message_id, e.text) for e in adapter.edits] == [("m1", "edited before the crash")]
    assert len(adapter.sent) == 1  # never sent again
    assert await store.outbox_pending() == []
    assert (await row_by_id(store, row.id)).status == "sent"


async def test_rejected_markup_on_edit_falls_back_to_plain_text(store: Store) -> None:
    adapter = SmallHtmlAdapter()
    delivery = delivery_for(store, adapter)
    row = await sent_row(delivery, "short")
    adapter.edit_failures.append(MarkupRejected("can't parse entities"))
    assert await delivery.edit_text(row, "now **bold** & <b>") == ["m1"]
    assert adapter.edit_markups == [Markup.TELEGRAM_HTML, Markup.PLAIN]
    assert "&amp;" not in adapter.edits[-1].text and "bold" in adapter.edits[-1].text
    assert len(adapter.sent) == 1


async def test_rate_limited_edit_waits_as_asked_then_edits(store: Store) -> None:
    adapter = EditingAdapter()
    time = FakeTime()
    delivery = Delivery(store, {adapter.platform: adapter}, Metrics(), sleep=time.sleep, clock=time)
    row = await sent_row(delivery)
    adapter.edit_failures.append(RateLimited(7.0))
    assert await delivery.edit_text(row, "after the wait") == ["m1"]
    assert time.pauses == [7.0]
    assert [e.text for e in adapter.edits] == ["after the wait"]


async def test_an_edit_that_no_longer_fits_edits_the_first_chunk_and_sends_the_rest(store: Store) -> None:
    adapter = SmallHtmlAdapter()
    delivery = delivery_for(store, adapter)
    row = await sent_row(delivery, "short")
    long_text = " ".join(f"word{i}" for i in range(30))
    ids = await delivery.edit_text(row, long_text)
    assert ids[0] == "m1" and len(ids) > 2 and len(adapter.edits) == 1
    shown = " ".join([adapter.edits[0].text, *adapter.texts()[1:]]).split()
    assert shown == long_text.split()  # nothing truncated, in order
    assert all(len(t) <= 40 for t in [adapter.edits[0].text, *adapter.texts()])
    # The same edit again (a replay) sends none of the overflow twice.
    sent_before = len(adapter.sent)
    await delivery.edit_text(row, long_text)
    assert len(adapter.sent) == sent_before


async def test_a_chunk_that_never_reached_the_platform_is_not_edited(store: Store) -> None:
    adapter = EditingAdapter()
    (row,) = await store.outbox_add("t9", "loopback", "c1", None, ["never sent"])
    assert await delivery_for(store, adapter).edit_text(row, "new") == []
    assert adapter.edits == [] and adapter.sent == []
    assert (await row_by_id(store, row.id)).text == "never sent"


async def test_resume_skips_nothing_it_should_send_and_edits_what_it_should_edit(store: Store) -> None:
    adapter = EditingAdapter()
    first, second = await store.outbox_add("t2", "loopback", "c1", None, ["one", "two"])
    await store.outbox_mark_sent(first.id, "m-old")
    assert await store.outbox_edit(first.id, "one, edited") is not None
    assert await delivery_for(store, adapter).resume() == 2
    assert [(e.message_id, e.text) for e in adapter.edits] == [("m-old", "one, edited")]
    assert adapter.texts() == ["two"]

"""Bulk writes: many callers' small writes of one kind, applied together in one transaction.

Each test holds the writer busy while it queues its writes, so that they land in the same batch
(a write queued at once could otherwise start a batch of its own before the rest are queued),
and checks that every caller gets the answer it would have got alone.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Awaitable, Sequence
from pathlib import Path
from typing import Any

from storage import MessageRecord, NewMessage, OutboxChunk, SessionNotFoundError, Store
from tests.storage.conftest import Watched, new_session, transaction_sizes, user


class _OneBatch:
    """Holds the writer inside a transaction of its own while a test queues its writes, so that they
    all wait and are taken as one batch; ``sizes``: the size of every batch taken after that."""

    def __init__(self, faults: Watched) -> None:
        self._faults = faults
        self._gate = threading.Event()
        self._held: asyncio.Future[object] | None = None

    @property
    def sizes(self) -> list[int]:
        return self._faults.batch_sizes

    async def __aenter__(self) -> _OneBatch:
        started = threading.Event()

        def hold(conn: sqlite3.Connection) -> None:
            started.set()
            self._gate.wait(10)

        self._held = self._faults.on_writer(hold)
        assert await asyncio.to_thread(started.wait, 10)
        self.sizes.clear()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._gate.set()
        assert self._held is not None
        await self._held

    async def gather(self, *writes: Awaitable[Any], return_exceptions: bool = False) -> list[Any]:
        gathered = asyncio.gather(*writes, return_exceptions=return_exceptions)
        await asyncio.sleep(0)  # coroutines wrapped in tasks queue their writes on their first step
        await asyncio.sleep(0)
        self._gate.set()
        return await gathered


async def test_a_batch_of_accepts_answers_each_event_as_if_alone(store: Store, faults: Watched) -> None:
    await store.inbox_accept("telegram", "seen", "telegram:1", {})
    async with _OneBatch(faults) as batches:
        results = await batches.gather(
            store.inbox_accept("telegram", "a", "telegram:1", {"n": 1}),
            store.inbox_accept("telegram", "seen", "telegram:1", {}),  # accepted in an earlier transaction
            store.inbox_accept("telegram", "a", "telegram:1", {"n": 2}),  # the same event twice in one batch
            store.inbox_accept("discord", "a", "discord:1", {"n": 3}),
        )
    assert batches.sizes == [4]
    assert results == [True, False, False, True]
    unfinished = {(r.platform, r.event_id): r.payload for r in await store.inbox_unfinished()}
    assert unfinished[("telegram", "a")] == {"n": 1}  # the first one queued wins
    assert unfinished[("discord", "a")] == {"n": 3}


async def test_a_batch_of_done_marks(store: Store, faults: Watched) -> None:
    for event in ("a", "b"):
        await store.inbox_accept("slack", event, "slack:T:C", {})
    async with _OneBatch(faults) as batches:
        results = await batches.gather(
            store.inbox_mark_done("slack", "a"),
            store.inbox_mark_done("slack", "a"),
            store.inbox_mark_done("slack", "missing"),
            store.inbox_mark_done("slack", "b"),
        )
    assert batches.sizes == [4]
    assert results == [True, False, False, True]
    assert await store.inbox_unfinished() == []


async def test_usage_of_several_calls_in_one_batch_adds_up(store: Store, faults: Watched) -> None:
    first = await new_session(store, "telegram:1")
    second = await new_session(store, "telegram:2")
    async with _OneBatch(faults) as batches:
        results = await batches.gather(
            store.add_usage(first.id, input_tokens=100, output_tokens=10, cache_read_tokens=7, last_prompt_tokens=900,
                            cost_usd=0.25),
            store.add_usage("no-such-session", input_tokens=1),
            store.add_usage(second.id, input_tokens=5, cache_write_tokens=3, last_prompt_tokens=50),
            store.add_usage(first.id, input_tokens=20, output_tokens=2, last_prompt_tokens=1200, cost_usd=0.5),
            return_exceptions=True,
        )  # fmt: skip
    assert batches.sizes == [4]
    assert results[0] is None and results[2] is None and results[3] is None
    assert isinstance(results[1], SessionNotFoundError)
    one = await store.get_session(first.id)
    two = await store.get_session(second.id)
    assert one is not None and two is not None
    assert (one.input_tokens, one.output_tokens, one.cache_read_tokens, one.cost_usd) == (120, 12, 7, 0.75)
    assert one.last_prompt_tokens == 1200  # the later call's prompt size
    assert (two.input_tokens, two.cache_write_tokens, two.last_prompt_tokens) == (5, 3, 50)
    totals = await store.usage_since(0)
    assert (totals.calls, totals.input_tokens) == (3, 125)  # one log row per call, none for the unknown session


async def test_replies_queued_in_one_batch_get_their_own_rows(store: Store, faults: Watched) -> None:
    earlier = await store.outbox_add("t0", "telegram", "1", None, ["already", "queued"])
    async with _OneBatch(faults) as batches:
        one, again, two = await batches.gather(
            store.outbox_add("t1", "telegram", "1", None, [OutboxChunk(text="<b>a</b>", plain="a", markup="html",
                                                                       reply_to="m1"), "b"]),
            store.outbox_add("t0", "telegram", "1", None, ["already", "queued"]),  # a replay: the same rows back
            store.outbox_add("t2", "discord", "9", "th", ["c"]),
        )  # fmt: skip
    assert batches.sizes == [3]
    assert [(r.turn_id, r.chunk_index, r.text) for r in one] == [("t1", 0, "<b>a</b>"), ("t1", 1, "b")]
    assert (one[0].plain, one[0].markup, one[0].reply_to, one[1].reply_to) == ("a", "html", "m1", None)
    assert [r.id for r in again] == [r.id for r in earlier]
    assert [(r.platform, r.chat_id, r.thread_id, r.text) for r in two] == [("discord", "9", "th", "c")]
    assert len(await store.outbox_pending()) == 5


async def test_sent_marks_in_one_batch(store: Store, faults: Watched) -> None:
    rows = await store.outbox_add("t1", "telegram", "1", None, ["a", "b"])
    async with _OneBatch(faults) as batches:
        results = await batches.gather(
            store.outbox_mark_sent(rows[0].id, "m-1"),
            store.outbox_mark_sent(rows[0].id, "m-again"),
            store.outbox_mark_sent(rows[1].id, None),
            store.outbox_mark_sent(999_999, "m-x"),
        )
    assert batches.sizes == [4]
    assert results == [True, False, True, False]
    assert await store.outbox_pending() == []
    row = await store.outbox_get(rows[0].id)
    assert row is not None and (row.status, row.platform_message_id, row.attempts) == ("sent", "m-1", 1)


async def test_bookkeeping_that_fails_leaves_no_caller_of_the_batch_waiting(store: Store, faults: Watched) -> None:
    session = await new_session(store)

    def broken(_: str, records: Sequence[MessageRecord]) -> None:
        if records[0].content == "a":  # the first append's bookkeeping fails, the second's does not
            raise RuntimeError("bookkeeping bug")

    faults.break_bookkeeping = broken
    async with _OneBatch(faults) as batches:
        first = store.append_messages(session.id, [user("a")])
        results = await asyncio.wait_for(batches.gather(first, store.append_messages(session.id, [user("b")])), 10)
    assert batches.sizes == [2]  # one transaction: the failing bookkeeping ran first
    assert [[r.content for r in records] for records in results] == [["a"], ["b"]]
    assert [m.content for m in await store.load_messages(session.id)] == ["a", "b"]


async def test_text_with_a_nul_character_is_written_whole(store: Store) -> None:
    # SQLite's JSON functions cut a string at NUL; such batches take the row-at-a-time path.
    rows = await store.outbox_add("t-nul", "telegram", "1", None, ["before\0after"])
    assert rows[0].text == "before\0after"
    assert await store.inbox_accept("telegram", "e\0nul", "telegram:1", {"text": "x\0y"}) is True
    assert await store.inbox_accept("telegram", "e\0nul", "telegram:1", {}) is False
    assert await store.inbox_mark_done("telegram", "e\0nul") is True
    assert await store.outbox_mark_sent(rows[0].id, "id\0x") is True
    # A key with a NUL in it (a platform's event id ends up in the turn id) is looked up whole too.
    again = await store.outbox_add("turn\0nul", "telegram", "1", None, ["a", "b"])
    assert [(r.turn_id, r.chunk_index) for r in again] == [("turn\0nul", 0), ("turn\0nul", 1)]
    assert [r.id for r in await store.outbox_add("turn\0nul", "telegram", "1", None, ["a", "b"])] == [r.id for r in again]


async def test_appends_and_other_writes_interleaved_in_one_batch(store: Store, db_path: Path,
                                                                faults: Watched) -> None:  # fmt: skip
    sessions = [await new_session(store, f"telegram:{n}") for n in range(3)]
    async with _OneBatch(faults) as batches:
        calls = []
        for n, session in enumerate(sessions):
            calls.append(store.inbox_accept("telegram", f"e{n}", f"telegram:{n}", {}))
            calls.append(store.append_messages(session.id, [NewMessage("user", f"hello {n}")]))
            calls.append(store.add_usage(session.id, input_tokens=n + 1))
            calls.append(store.append_messages(session.id, [NewMessage("assistant", f"hi {n}")]))
        results = await batches.gather(*calls)
    assert batches.sizes == [12]
    for n, session in enumerate(sessions):
        history = await store.load_messages(session.id)
        assert [(m.seq, m.content) for m in history] == [(1, f"hello {n}"), (2, f"hi {n}")]
        assert results[4 * n + 1][0].seq == 1 and results[4 * n + 3][0].seq == 2
    with sqlite3.connect(db_path) as conn:
        ids = [row[0] for row in conn.execute("SELECT id FROM messages ORDER BY id")]
    assert len(ids) == len(set(ids)) == 6


async def test_a_crowd_of_appends_queued_while_the_writer_was_busy_goes_in_one_transaction(
    store: Store, db_path: Path, faults: Watched
) -> None:
    # Already waiting when the writer comes for them (as under the gateway's load), 120 appends are
    # one transaction: two would only add a hand-back for a busy event loop (SPLIT_MIN_APPENDS).
    sessions = [await new_session(store, f"telegram:{n}") for n in range(120)]
    async with _OneBatch(faults) as batch:
        await batch.gather(*(store.append_messages(s.id, [user(f"hello from {s.id}")]) for s in sessions))
    assert transaction_sizes(db_path) == [120]
    for session in sessions:
        assert [m.content for m in await store.load_messages(session.id)] == [f"hello from {session.id}"]

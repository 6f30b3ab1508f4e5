"""The inbox and outbox on PostgreSQL where a server adds risks SQLite does not have: several stores (processes) on
one database accepting the same event or finishing the same turn at once, writes queued per key instead of on one
writer, text that may not hold a NUL, and JSON read back through ``->>`` as text."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import asyncpg
import pytest_asyncio
from structlog.testing import capture_logs

from storage import MessageAppend, NewMessage, OutboxChunk, PostgresStore, TurnEnd
from tests.fakes.postgres_server import PostgresServer
from tests.waiting import eventually

NUL_STANDS_IN = "\ufffd"


@pytest_asyncio.fixture
async def stores(postgres_dsn: str) -> AsyncIterator[tuple[PostgresStore, PostgresStore]]:
    """Two stores on one database, as two gateway processes would have."""
    first = await PostgresStore.open(postgres_dsn)
    second = await PostgresStore.open(postgres_dsn)
    try:
        yield first, second
    finally:
        await second.close()
        await first.close()


def turn(turn_id: str, texts: list[str], **fields: object) -> TurnEnd:
    return TurnEnd(turn_id, "telegram", "1", None, [OutboxChunk(text=t) for t in texts], **fields)  # type: ignore[arg-type]


async def test_of_two_stores_accepting_one_event_at_once_exactly_one_stores_it(
    stores: tuple[PostgresStore, PostgresStore], postgres_dsn: str
) -> None:
    first, second = stores
    for n in range(5):
        accepts = [store.inbox_accept("slack", f"Ev{n}", "slack:T:C", {"n": n, "by": i})
                   for i, store in enumerate((first, second, first, second, second, first))]  # fmt: skip
        assert sorted(await asyncio.gather(*accepts)) == [False] * 5 + [True]
    conn = await asyncpg.connect(postgres_dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM inbox") == 5
    finally:
        await conn.close()
    assert [r.event_id for r in await second.inbox_unfinished()] == [f"Ev{n}" for n in range(5)]


async def test_a_turn_finished_again_from_another_store_returns_the_first_rows(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = stores
    await first.inbox_accept("telegram", "u1", "telegram:1", {})
    rows = await first.finish_turn(turn("turn-u1", ["one", "two"], answered=[("telegram", "u1")]))
    again = await second.finish_turn(turn("turn-u1", ["one, again", "two, again", "three"], answered=[("telegram", "u1")]))
    assert again[:2] == rows  # kept as first queued, by whichever store asks
    assert [(r.chunk_index, r.text) for r in again] == [(0, "one"), (1, "two"), (2, "three")]
    assert await second.inbox_unfinished() == []


async def test_two_stores_finishing_one_turn_at_once_queue_it_once(stores: tuple[PostgresStore, PostgresStore]) -> None:
    first, second = stores
    for n in range(5):
        await first.inbox_accept("telegram", f"u{n}", "telegram:1", {})
        ends = [store.finish_turn(turn(f"turn-u{n}", ["a", "b", "c"], answered=[("telegram", f"u{n}")]))
                for store in (first, second, first, second)]  # fmt: skip
        results = await asyncio.gather(*ends)
        assert all(rows == results[0] for rows in results)
    assert len(await second.outbox_pending()) == 15 and await first.inbox_unfinished() == []


async def test_a_live_row_opened_by_one_store_is_taken_over_by_the_turn_end_of_another(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    first, second = stores
    live = await first.outbox_stream_open("turn-u0", "telegram", "1", None, OutboxChunk(text=""))
    assert await first.outbox_stream_shown(live.id, "so far", "m7")
    (row,) = await second.finish_turn(turn("turn-u0", ["the answer"]))
    assert (row.id, row.status, row.text, row.platform_message_id) == (live.id, "pending", "the answer", "m7")
    assert await first.outbox_live() == []


async def test_a_conversations_events_are_stored_in_the_order_they_were_handed_over(postgres_dsn: str) -> None:
    async with await PostgresStore.open(postgres_dsn) as store:
        accepts = [store.inbox_accept("telegram", f"u{n}", "telegram:1", {"n": n}) for n in range(30)]
        assert all(await asyncio.gather(*accepts))
        assert [r.payload["n"] for r in await store.inbox_unfinished()] == list(range(30))


async def test_the_marks_of_one_outbox_row_land_in_the_order_they_were_asked_for_across_an_outage(
    postgres: PostgresServer, postgres_dsn: str
) -> None:
    # While the server is away every write is retried after its own jittered delay: queued per row, a row's
    # second mark waits for its first instead of racing it when the server is back.
    async with await PostgresStore.open(postgres_dsn) as store:
        rows = await store.outbox_add("notice", "telegram", "1", None, [f"chunk {n}" for n in range(20)])
        await asyncio.to_thread(postgres.pause)
        try:
            with capture_logs() as logs:
                marks = []
                for row in rows:  # each row's send, then a failure that comes too late: the row is sent by then
                    marks += [store.outbox_mark_sent(row.id, f"m{row.chunk_index}"),
                              store.outbox_mark_failed(row.id, "late", give_up=True)]  # fmt: skip
                await eventually(lambda: sum(e["event"] == "storage.retrying" for e in logs) >= 40, "retries")
        finally:
            await asyncio.to_thread(postgres.resume)
        assert await asyncio.gather(*marks) == [True, False] * 20
        assert [(r.status, r.last_error) for r in [await store.outbox_get(row.id) for row in rows]] == [("sent", None)] * 20


async def test_a_nul_in_the_inbox_and_the_outbox_is_stored_as_the_replacement_character(postgres_dsn: str) -> None:
    async with await PostgresStore.open(postgres_dsn) as store:
        payload = {"text": "a\x00b", "raw": "\\u0000 stays", "nested": [{"k\x00": "v"}]}
        assert await store.inbox_accept("telegram", "u\x001", "telegram:1", payload) is True
        assert await store.inbox_accept("telegram", "u\x001", "telegram:1", {}) is False  # the same key, cleaned alike
        (event,) = await store.inbox_unfinished()
        assert event.event_id == f"u{NUL_STANDS_IN}1"
        assert event.payload == {"text": f"a{NUL_STANDS_IN}b", "raw": "\\u0000 stays", "nested": [{f"k{NUL_STANDS_IN}": "v"}]}

        live = await store.outbox_stream_open("turn\x00nul", "telegram", "1", None, OutboxChunk(text="so\x00far"))
        assert await store.outbox_stream_shown(live.id, "so far\x00", "m\x007")
        first, second = await store.finish_turn(turn("turn\x00nul", ["final\x00", "more"], answered=[("telegram", "u\x001")]))
        assert (first.id, first.turn_id, first.text) == (live.id, f"turn{NUL_STANDS_IN}nul", f"final{NUL_STANDS_IN}")
        assert (first.platform_message_id, second.platform_message_id) == (f"m{NUL_STANDS_IN}7", None)
        assert await store.inbox_unfinished() == []
        edited = await store.outbox_edit(first.id, "new\x00")  # a row with a message id: editable
        assert edited is not None and edited.text == f"new{NUL_STANDS_IN}"
        assert await store.outbox_mark_failed(second.id, "bad\x00byte") is True
        assert (await store.outbox_get(second.id)).last_error == f"bad{NUL_STANDS_IN}byte"  # type: ignore[union-attr]


async def test_an_event_whose_payload_has_a_float_json_cannot_hold_is_accepted(postgres_dsn: str) -> None:
    async with await PostgresStore.open(postgres_dsn) as store:
        payload = {"timestamp": float("nan"), "text": "NaN and Infinity", "scores": [1.5, float("inf"), -float("inf")]}
        assert await store.inbox_accept("telegram", "u1", "telegram:1", payload) is True
        (event,) = await store.inbox_unfinished()
        assert event.payload == {"timestamp": None, "text": "NaN and Infinity", "scores": [1.5, None, None]}


async def test_a_turn_end_with_messages_numbers_them_after_the_appends_of_another_store(
    stores: tuple[PostgresStore, PostgresStore],
) -> None:
    # Needs the sessions part (create_session).
    first, second = stores
    session = await first.create_session(session_key="telegram:1", platform="telegram", chat_id="1")
    appends = [first.append_messages(session.id, [NewMessage("user", f"q{n}")]) for n in range(5)]
    ends = [second.finish_turn(turn(f"turn-{n}", [f"a{n}"], messages=MessageAppend(session.id, [NewMessage("assistant", f"a{n}")])))
            for n in range(5)]  # fmt: skip
    await asyncio.gather(*appends, *ends)
    history = await second.load_messages(session.id)
    assert [m.seq for m in history] == list(range(1, 11))
    assert [m.content for m in history if m.role == "assistant"] == [f"a{n}" for n in range(5)]  # in call order


async def test_the_last_heard_mark_compares_send_times_as_numbers(postgres_dsn: str) -> None:
    # Needs the sessions part (create_session). The payload's timestamp is JSON; read as text, "99.5" > "100.0".
    async with await PostgresStore.open(postgres_dsn) as store:
        await store.create_session(session_key="slack:dm:D1", platform="slack", chat_id="D1", chat_type="dm")
        for message_id, at in (("100.0", 100.0), ("99.5", 99.5)):  # read back after a reconnect: stored late
            await store.inbox_accept("slack", f"D1:{message_id}", "slack:dm:D1",
                                     {"chat_id": "D1", "message_id": message_id, "thread_id": None, "timestamp": at})  # fmt: skip
        await store.inbox_accept("slack", "D1:odd", "slack:dm:D1", {"chat_id": "D1", "message_id": "x", "timestamp": "soon"})
        (chat,) = await store.last_heard("slack")
        assert (chat.message_id, chat.message_at) == ("100.0", 100.0)

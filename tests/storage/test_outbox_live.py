"""Live outbox rows: a streamed reply's message is on record from its first send, and the turn's end takes it over."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from storage import MessageAppend, NewMessage, OutboxChunk, Store, WriteFailedError
from storage.migrations import upgrade
from tests.storage.test_finish_turn import Reopen, database, end, refused, reopen  # noqa: F401  (fixtures)

pytestmark = pytest.mark.both_engines

CHUNK = OutboxChunk(text="", markup="telegram_html", reply_to="u0-msg")


async def _shown(store: Store, turn_id: str = "turn-u0", text: str = "The answer so", message_id: str | None = "m7"):
    row = await store.outbox_stream_open(turn_id, "telegram", "1", None, CHUNK)
    assert row.live and row.chunk_index == 0 and row.platform_message_id is None
    assert await store.outbox_stream_shown(row.id, text, message_id, plain=text)
    return row


async def test_a_live_row_is_never_pending_and_a_crash_leaves_it_to_be_adopted(store: Store, reopen: Reopen) -> None:
    row = await _shown(store)
    assert await store.outbox_pending() == []
    fresh = await reopen()  # the next run, past every cache
    (left,) = await fresh.outbox_live()
    assert (left.id, left.text, left.platform_message_id, left.stream) == (row.id, "The answer so", "m7", "edit")
    adopted = await fresh.outbox_stream_open("turn-u0", "telegram", "1", None, CHUNK)
    assert adopted.id == row.id and adopted.live and adopted.platform_message_id == "m7"
    assert await fresh.outbox_pending() == []


async def test_the_turns_end_makes_the_live_row_its_first_chunk(store: Store) -> None:
    session = await store.create_session(session_key="telegram:dm:1", platform="telegram", chat_id="1")
    await store.inbox_accept("telegram", "u0", "telegram:1", {})
    row = await _shown(store)
    final = MessageAppend(session.id, [NewMessage("assistant", "the answer")])
    first, second = await store.finish_turn(end("turn-u0", ["the answer, part 1", "part 2"],
                                                answered=[("telegram", "u0")], messages=final))  # fmt: skip
    assert (first.id, first.status, first.text, first.platform_message_id) == (row.id, "pending", "the answer, part 1", "m7")
    assert (second.status, second.platform_message_id) == ("pending", None)
    assert await store.outbox_pending() == [first, second]
    assert await store.outbox_live() == [] and await store.inbox_unfinished() == []
    # Finished again (a replay): the same rows, nothing adopted twice.
    assert await store.finish_turn(end("turn-u0", ["the answer, part 1", "part 2"])) == [first, second]


async def test_outbox_add_takes_over_a_live_row_too(store: Store) -> None:
    row = await _shown(store, "notice-1")
    (queued,) = await store.outbox_add("notice-1", "telegram", "1", None, ["final"])
    assert (queued.id, queued.text, queued.status, queued.platform_message_id) == (row.id, "final", "pending", "m7")


@pytest.mark.parametrize(("table", "event", "when"), [
    ("inbox", "UPDATE", "true"),
    ("outbox", "INSERT", "NEW.chunk_index = 1"),  # after the live row was taken over, in the same transaction
])  # fmt: skip
async def test_a_turn_end_that_fails_half_way_leaves_the_live_row_as_it_was(
    store: Store, database: Path | str, table: str, event: str, when: str
) -> None:
    await store.inbox_accept("telegram", "u0", "telegram:1", {})
    row = await _shown(store)
    (before,) = await store.outbox_live()
    turn = end("turn-u0", ["final 1", "final 2"], answered=[("telegram", "u0")])
    async with refused(database, table, event, when):
        with pytest.raises(WriteFailedError, match="simulated write failure"):
            await store.finish_turn(turn)
    assert await store.outbox_live() == [before] and await store.outbox_pending() == []
    assert [r.event_id for r in await store.inbox_unfinished()] == ["u0"]
    first, _ = await store.finish_turn(turn)
    assert (first.id, first.text, first.platform_message_id) == (row.id, "final 1", "m7")


async def test_closing_a_shown_row_queues_an_edit_and_one_never_shown_is_dropped(store: Store) -> None:
    row = await _shown(store)
    closed = await store.outbox_stream_close(row.id, "The answer so\n\n— stopped", plain="The answer so — stopped")
    assert closed is not None and (closed.status, closed.text, closed.platform_message_id) == (
        "pending", "The answer so\n\n— stopped", "m7")  # fmt: skip
    assert await store.outbox_pending() == [closed] and await store.outbox_live() == []
    assert await store.outbox_stream_close(row.id, "again") is None  # no longer live: unchanged
    assert not await store.outbox_stream_shown(row.id, "late update", "m7")
    assert await store.outbox_get(row.id) == closed

    unseen = await store.outbox_stream_open("turn-u1", "telegram", "1", None, CHUNK)
    assert await store.outbox_stream_close(unseen.id, "— stopped") is None
    assert await store.outbox_get(unseen.id) is None


async def test_a_closed_row_goes_live_again_when_its_turn_runs_again(store: Store) -> None:
    row = await _shown(store)
    await store.outbox_stream_close(row.id, "— stopped")
    again = await store.outbox_stream_open("turn-u0", "telegram", "1", None, CHUNK)
    assert (again.id, again.live, again.platform_message_id) == (row.id, True, "m7")


async def test_native_stays_native_so_the_stream_is_stopped_before_the_final_edit(store: Store) -> None:
    row = await store.outbox_stream_open("turn-s", "slack", "C", "171.1", CHUNK, mode="native")
    assert await store.outbox_stream_shown(row.id, "partial", "171.2", mode="edit")  # went on editing
    (final,) = await store.outbox_add("turn-s", "slack", "C", "171.1", ["final"])
    assert (final.stream, final.platform_message_id) == ("native", "171.2")


async def test_housekeeping_never_prunes_a_live_row(store: Store) -> None:
    await _shown(store)
    assert await store.outbox_prune(older_than=1e12) == 0
    assert len(await store.outbox_live()) == 1


async def test_version_7_outbox_rows_survive_the_rebuild(db_path: Path) -> None:
    with sqlite3.connect(db_path, isolation_level=None) as conn:
        conn.execute("PRAGMA journal_mode = WAL")
        assert upgrade(conn, db_path, target=7) == 7
        conn.execute(
            """INSERT INTO outbox (turn_id, platform, chat_id, thread_id, chunk_index, text, status,
                                   platform_message_id, attempts, created_at, updated_at, last_error)
               VALUES ('t1', 'telegram', '1', NULL, 0, 'sent one', 'sent', 'm1', 1, 10.0, 11.0, NULL),
                      ('t2', 'telegram', '1', NULL, 0, 'waiting', 'pending', NULL, 2, 12.0, 13.0, 'rate limited')"""
        )
        with pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE outbox SET status = 'live' WHERE turn_id = 't1'")  # version 7 has no live rows
    async with await Store.open(db_path) as store:
        (pending,) = await store.outbox_pending()
        assert (pending.turn_id, pending.attempts, pending.last_error, pending.stream) == ("t2", 2, "rate limited", None)
        sent = await store.outbox_get(pending.id - 1)
        assert sent is not None and (sent.status, sent.platform_message_id, sent.created_at) == ("sent", "m1", 10.0)
        # new rows number on from the old ones
        (row,) = await store.outbox_add("t3", "telegram", "1", None, ["x"])
        assert row.id == pending.id + 1
        live = await store.outbox_stream_open("t4", "telegram", "1", None, CHUNK)
        assert live.live


@pytest.mark.sqlite_only  # SQLite's path for a value JSON cannot carry; PostgreSQL's NUL policy: tests/storage/postgres
async def test_a_live_row_is_taken_over_on_the_row_at_a_time_path_too(store: Store) -> None:
    row = await _shown(store, "turn\x00nul")  # a NUL cannot go through the JSON path
    first, second = await store.outbox_add("turn\x00nul", "telegram", "1", None, ["final\x00", "more"])
    assert (first.id, first.text, first.status, first.platform_message_id) == (row.id, "final\x00", "pending", "m7")
    assert second.platform_message_id is None

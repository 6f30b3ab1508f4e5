"""Appending and loading messages: order, fields, group commit, and the history cache's coherence."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from pathlib import Path

import pytest

from agent.messages import ChatMessage, ToolCall
from storage import (
    FaultSeam,
    MergePolicy,
    MessageRecord,
    NewMessage,
    SessionNotFoundError,
    Store,
    ToolCallRecord,
    Usage,
)
from storage.records import _MESSAGE_FIELDS, message_record
from storage.schema import FTS_USERMERGE
from tests.storage.conftest import Opener, Watched, new_session, traced, user
from tests.waiting import eventually

pytestmark = pytest.mark.both_engines


def turn(n: int) -> list[NewMessage]:
    call = {"id": f"call_{n}", "name": "read_file", "arguments": '{"path": "/tmp/x.py"}'}
    return [
        NewMessage("user", f"question {n}", platform_message_id=f"pm{n}", token_estimate=4),
        NewMessage("assistant", "", tool_calls=[call], reasoning="need the file"),
        NewMessage("tool", "print('hi')", tool_call_id=f"call_{n}", tool_name="read_file"),
        NewMessage("assistant", f"answer {n}"),
    ]


async def test_append_returns_records_that_load_back_equal(store: Store) -> None:
    session = await new_session(store)
    appended = await store.append_messages(session.id, turn(1))
    assert [m.seq for m in appended] == [1, 2, 3, 4]
    assert appended[1].tool_calls == (ToolCallRecord("call_1", "read_file", '{"path": "/tmp/x.py"}'),)
    assert appended[0].platform_message_id == "pm1" and appended[0].token_estimate == 4
    assert await store.load_messages(session.id) == appended


async def test_records_convert_to_the_agent_message_type(store: Store) -> None:
    session = await new_session(store)
    agent_messages = [
        ChatMessage.user("hi"),
        ChatMessage.assistant("", [ToolCall("c1", "terminal", '{"cmd": "ls"}')]),
        ChatMessage.tool("c1", "a.txt", tool_name="terminal"),
    ]
    new = [NewMessage(**{k: v for k, v in m.to_dict().items() if k != "meta"}) for m in agent_messages]
    records = await store.append_messages(session.id, new)
    assert [ChatMessage.from_dict(r.to_dict()) for r in records] == agent_messages


async def test_appends_keep_submission_order_under_concurrency(store: Store) -> None:
    session = await new_session(store)
    results = await asyncio.gather(*(store.append_messages(session.id, [user(f"m{i}")]) for i in range(200)))
    assert [r[0].seq for r in results] == list(range(1, 201))
    loaded = await store.load_messages(session.id)
    assert [m.content for m in loaded] == [f"m{i}" for i in range(200)]


async def test_appending_to_an_unknown_session_fails_alone(store: Store) -> None:
    good = await new_session(store)
    outcomes = await asyncio.gather(
        store.append_messages(good.id, [user("one")]),
        store.append_messages("missing", [user("lost")]),
        store.append_messages(good.id, [user("two")]),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], SessionNotFoundError)
    assert [m.content for m in await store.load_messages(good.id)] == ["one", "two"]
    with pytest.raises(SessionNotFoundError):
        await store.load_messages("missing")


async def test_a_failing_operation_does_not_sink_its_batch(store: Store) -> None:
    session = await new_session(store)
    other = await new_session(store, "telegram:2", title="taken")
    outcomes = await asyncio.gather(
        store.append_messages(session.id, [user("kept 1")]),
        store.set_title(session.id, "taken"),  # fails: other holds it
        store.append_messages(session.id, [user("kept 2")]),
        store.end_session(other.id, "user"),
        return_exceptions=True,
    )
    assert isinstance(outcomes[1], Exception) and outcomes[3] is True
    assert [m.content for m in await store.load_messages(session.id)] == ["kept 1", "kept 2"]


async def test_empty_append_is_a_no_op(store: Store) -> None:
    session = await new_session(store)
    assert await store.append_messages(session.id, []) == []
    assert await store.load_messages(session.id) == []


@pytest.mark.parametrize(
    "text",
    ["nul\x00inside", "emoji 😀 and 𠀀", 'quotes " and \\ backslashes', "\u2028 line sep", "x" * 100_000],
)
async def test_content_round_trips_exactly(store: Store, other_store: Opener, engine_name: str, text: str) -> None:
    session = await new_session(store)
    await store.append_messages(session.id, [user("before"), user(text), user("after")])
    other = await other_store()  # a fresh store: no cache, straight from the database
    loaded = await other.load_messages(session.id)
    if engine_name == "postgresql":  # its text cannot hold a NUL: storage/postgres/text.py
        text = text.replace("\x00", "\ufffd")
    assert [m.content for m in loaded] == ["before", text, "after"]


async def test_role_is_validated() -> None:
    with pytest.raises(ValueError, match="role"):
        NewMessage("robot", "hi")


async def test_history_seen_by_one_store_follows_appends_from_another(store: Store, other_store: Opener) -> None:
    first, second = store, await other_store()
    session = await new_session(first)
    await first.append_messages(session.id, [user("a")])
    assert [m.content for m in await first.load_messages(session.id)] == ["a"]  # now cached in `first`
    await second.append_messages(session.id, [user("b"), user("c")])
    assert [m.content for m in await first.load_messages(session.id)] == ["a", "b", "c"]
    await first.append_messages(session.id, [user("d")])  # first's writer must notice second's rows
    assert [m.seq for m in await second.load_messages(session.id)] == [1, 2, 3, 4]
    assert [m.content for m in await first.load_messages(session.id)] == ["a", "b", "c", "d"]


async def test_last_seq_from_a_fresh_session_record_revalidates_the_cache(store: Store, other_store: Opener) -> None:
    first, second = store, await other_store()
    session = await new_session(first)
    await first.append_messages(session.id, [user("a")])
    assert [m.content for m in await first.load_messages(session.id)] == ["a"]  # cached in `first`
    await second.append_messages(session.id, [user("b")])
    record = await first.get_session(session.id)
    assert record is not None and record.message_count == 2
    loaded = await first.load_messages(session.id, last_seq=record.message_count)
    assert [m.content for m in loaded] == ["a", "b"]


async def test_a_new_sessions_history_is_known_yet_follows_other_stores(store: Store, other_store: Opener) -> None:
    """A session starts with an empty history in its store's cache (no read for its second turn);
    that entry is revalidated like any other."""
    first, second = store, await other_store()
    session = await new_session(first)
    assert await first.load_messages(session.id, last_seq=0) == []
    await first.append_messages(session.id, [user("a")])
    await second.append_messages(session.id, [user("b")])
    record = await first.get_session(session.id)
    assert record is not None
    assert [m.content for m in await first.load_messages(session.id, last_seq=record.message_count)] == ["a", "b"]
    other = await new_session(first)
    await second.append_messages(other.id, [user("x")])
    assert [m.content for m in await first.load_messages(other.id)] == ["x"]


async def test_a_store_appending_after_another_stores_rows_takes_fresh_ids(db_path: Path) -> None:
    """The writer's second append to a session is one statement with ids it worked out itself; when
    another store has taken those ids meanwhile (in another session), the statement fails whole and
    the batch goes in again, with fresh ids."""
    first, second = await Store.open(db_path), await Store.open(db_path)
    try:
        mine, theirs = await new_session(first, "telegram:1"), await new_session(first, "telegram:2")
        await first.append_messages(mine.id, [user("a")])  # first's writer now knows id 1 is the last
        await second.append_messages(theirs.id, [user("x"), user("y")])  # ids 2 and 3
        (record,) = await first.append_messages(mine.id, [user("b")])
        assert (record.id, record.seq) == (4, 2)
        await first.append_messages(mine.id, [user("c")])
    finally:
        await first.close()
        await second.close()
    with sqlite3.connect(db_path) as conn:
        rows = conn.execute("SELECT id, session_id, seq, content FROM messages ORDER BY id").fetchall()
    assert rows == [
        (1, mine.id, 1, "a"), (2, theirs.id, 1, "x"), (3, theirs.id, 2, "y"), (4, mine.id, 2, "b"), (5, mine.id, 3, "c"),
    ]  # fmt: skip


def verbs(statements: list[str]) -> list[str]:
    """The first word of each statement SQLite ran, upper case."""
    return [sql.split()[0].upper() for sql in statements]


@pytest.mark.sqlite_only  # SQLite's statements, traced
async def test_plain_appends_to_a_known_session_commit_without_a_transaction_of_their_own(
    store: Store, faults: Watched
) -> None:
    session = await new_session(store)
    async with traced(faults) as statements:
        await store.append_messages(session.id, [user("the writer learns this session's last seq")])
        assert verbs(statements)[0] == "BEGIN"
        statements.clear()
        await store.append_messages(session.id, [user("plain"), user("appends")])
        plain = list(statements)
        statements.clear()
        await store.append_messages(session.id, [user("nul\x00inside")])  # needs a statement of its own
        with_nul = list(statements)
        statements.clear()
        await store.append_messages(session.id, [user("with usage")], usage=Usage(input_tokens=3, output_tokens=1))
        with_usage = list(statements)
    assert verbs(plain)[0] == "INSERT" and not {"BEGIN", "COMMIT"} & set(verbs(plain))
    assert verbs(with_nul)[0] == "BEGIN" and verbs(with_usage)[0] == "BEGIN"
    assert [m.content for m in await store.load_messages(session.id)][1:] == [
        "plain", "appends", "nul\x00inside", "with usage",
    ]  # fmt: skip
    record = await store.get_session(session.id)
    assert record is not None and (record.input_tokens, record.output_tokens) == (3, 1)


async def test_loaded_lists_are_copies(store: Store) -> None:
    session = await new_session(store)
    await store.append_messages(session.id, [user("a")])
    loaded = await store.load_messages(session.id)
    loaded.append(loaded[0])
    assert len(await store.load_messages(session.id)) == 1


async def test_records_are_immutable(store: Store) -> None:
    session = await new_session(store)
    (record,) = await store.append_messages(session.id, [user("a")])
    assert isinstance(record, MessageRecord)
    with pytest.raises(AttributeError):
        record.content = "changed"  # type: ignore[misc]


def test_the_fast_record_constructor_builds_the_same_record() -> None:
    values = (7, "s1", 3, "assistant", "text", (ToolCallRecord("c1", "terminal", "{}"),), None, None, "why", 12,
              1.5, "p9")  # fmt: skip
    fast = message_record(*values)
    assert fast == MessageRecord(*values)
    assert hash(fast) == hash(MessageRecord(*values))
    assert [f.name for f in dataclasses.fields(MessageRecord)] == list(_MESSAGE_FIELDS)
    with pytest.raises(AttributeError):
        fast.content = "changed"  # type: ignore[misc]


async def test_index_stays_consistent_through_many_batches_and_merges(db_path: Path) -> None:
    store = await Store.open(db_path, merge=MergePolicy(rows_per_slice=10, pages_per_slice=2))
    try:
        sessions = [await new_session(store, f"telegram:{n}") for n in range(20)]

        async def talk(session_id: str) -> None:
            for i in range(20):
                await store.append_messages(session_id, [user(f"needle{i % 4} filler words {i}")])

        await asyncio.gather(*(talk(s.id) for s in sessions))
        assert len(await store.search("needle0", limit=500)) == 20 * 5
        assert len(await store.search("filler", limit=500)) == 20 * 20
    finally:
        await store.close()
    with sqlite3.connect(db_path) as conn:
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_no_merge_transaction_runs_before_there_is_a_merge_step_to_do(db_path: Path) -> None:
    # A merge step combines FTS_USERMERGE segments of one level, and each append awaited on its own
    # is a transaction and one new segment. With fewer, a merge slice would find nothing to do and
    # still cost the writer a transaction. Merging is owed from the first message here.
    faults = FaultSeam()
    store = await Store.open(db_path, merge=MergePolicy(pages_per_row=100.0), faults=faults)
    try:
        async with traced(faults) as statements:

            def slices() -> int:
                return sum("('merge'" in sql for sql in statements)

            session = await new_session(store)
            for i in range(FTS_USERMERGE - 1):
                await store.append_messages(session.id, [user(f"message {i}")])
            assert slices() == 0
            await store.append_messages(session.id, [user("one segment more")])
            await eventually(slices, "a merge step")
    finally:
        await store.close()
    with sqlite3.connect(db_path) as conn:
        segments = conn.execute("SELECT COUNT(DISTINCT segid) FROM messages_fts_idx").fetchone()[0]
        conn.execute("INSERT INTO messages_fts(messages_fts, rank) VALUES ('integrity-check', 1)")
    assert 1 <= segments < FTS_USERMERGE  # the step ran: the segments became one


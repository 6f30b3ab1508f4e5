"""The open session of a routing key, answered from memory: always what the database holds.

``find_open_session`` is asked at the start of every turn; the store keeps its answer in
memory and moves it with its own writes (``storage/open_sessions.py``). These tests compare
its answer with a fresh read (``get_session``) after each kind of write, and check that a
change made by another process is seen.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from storage import NewMessage, SessionRecord, Store
from storage.open_sessions import OpenSessions
from tests.storage.conftest import Opener, new_session, user

pytestmark = pytest.mark.both_engines


async def same_as_database(store: Store, key: str) -> SessionRecord | None:
    found = await store.find_open_session(key)
    if found is not None:
        assert found == await store.get_session(found.id)
    return found


async def test_answer_follows_appends_and_usage(store: Store) -> None:
    session = await new_session(store, "telegram:1")
    assert await same_as_database(store, "telegram:1") == session
    await store.append_messages(session.id, [user("hi"), NewMessage("assistant", "hello")])
    await asyncio.gather(
        store.add_usage(session.id, input_tokens=10, output_tokens=2, cache_read_tokens=5, last_prompt_tokens=300,
                        cost_usd=0.25),
        store.add_usage(session.id, input_tokens=1, cache_write_tokens=7, last_prompt_tokens=320, cost_usd=0.5),
    )  # fmt: skip
    found = await same_as_database(store, "telegram:1")
    assert found is not None
    assert (found.message_count, found.input_tokens, found.output_tokens) == (2, 11, 2)
    assert (found.cache_read_tokens, found.cache_write_tokens, found.last_prompt_tokens) == (5, 7, 320)
    assert found.cost_usd == 0.75


async def test_usage_for_an_unknown_session_leaves_the_answers_right(store: Store) -> None:
    session = await new_session(store, "telegram:1")
    await store.find_open_session("telegram:1")
    results = await asyncio.gather(
        store.add_usage("no-such-session", input_tokens=5), store.add_usage(session.id, input_tokens=3),
        return_exceptions=True,
    )  # fmt: skip
    assert isinstance(results[0], Exception) and results[1] is None
    found = await same_as_database(store, "telegram:1")
    assert found is not None and found.input_tokens == 3


async def test_ended_session_is_no_longer_the_answer(store: Store) -> None:
    session = await new_session(store, "telegram:1")
    await store.find_open_session("telegram:1")
    await store.end_session(session.id, "reset")
    assert await same_as_database(store, "telegram:1") is None
    newer = await new_session(store, "telegram:1")
    assert await same_as_database(store, "telegram:1") == newer


async def test_title_and_split_are_followed(store: Store) -> None:
    session = await new_session(store, "telegram:1")
    await store.find_open_session("telegram:1")
    await store.set_title(session.id, "Plans")
    found = await same_as_database(store, "telegram:1")
    assert found is not None and found.title == "Plans"
    child = await store.split_session(session.id, [user("summary")], system_prompt="compact")
    found = await same_as_database(store, "telegram:1")
    assert found is not None and found.id == child.id and found.parent_session_id == session.id
    assert found.message_count == 1 and found.title == "Plans #2"


@pytest.mark.parametrize("known", [False, True], ids=["first-append", "plain-append"])
async def test_another_process_ending_the_session_is_seen_at_the_next_write(
    store: Store, other_store: Opener, known: bool
) -> None:
    # known: the writer appended to `other` before, so the next append is one statement with no
    # transaction (no probe at its start); it must notice the other store's commit all the same.
    session = await new_session(store, "telegram:1")
    other = await new_session(store, "telegram:2")
    if known:
        await store.append_messages(other.id, [user("first")])
    await store.find_open_session("telegram:1")
    outside = await other_store()
    await outside.end_session(session.id, "user")
    await outside.close()
    await store.append_messages(other.id, [user("any write of this store notices the other one's commit")])
    assert await same_as_database(store, "telegram:1") is None


async def test_an_idle_store_reads_again_after_max_age(db_path: Path) -> None:
    store = await Store.open(db_path, open_session_max_age=0.0)
    try:
        session = await new_session(store, "telegram:1")
        await store.find_open_session("telegram:1")
        outside = await Store.open(db_path)
        try:
            await outside.append_messages(session.id, [user("from elsewhere")])
        finally:
            await outside.close()
        found = await same_as_database(store, "telegram:1")
        assert found is not None and found.message_count == 1
    finally:
        await store.close()


def test_a_read_that_overlapped_a_change_is_not_kept() -> None:
    record = SessionRecord(
        id="s1", session_key="k", platform="p", chat_id="c", chat_type=None, thread_id=None, user_id=None,
        title=None, model=None, system_prompt=None, parent_session_id=None, started_at=0.0, ended_at=None,
        end_reason=None, message_count=0, input_tokens=0, output_tokens=0, cache_read_tokens=0,
        cache_write_tokens=0, last_prompt_tokens=0, cost_usd=0.0,
    )  # fmt: skip
    known = OpenSessions()
    before = known.generation
    known.forget("s1")  # e.g. the session ended while the read was under way
    known.remember(record, generation=before)
    assert known.get("k") is None
    known.remember(record, generation=known.generation)
    assert known.get("k") == record


def test_entries_are_bounded_and_age_out() -> None:
    now = [0.0]
    known = OpenSessions(max_entries=2, max_age=10.0, clock=lambda: now[0])
    for n in range(3):
        record = SessionRecord(
            id=f"s{n}", session_key=f"k{n}", platform="p", chat_id="c", chat_type=None, thread_id=None,
            user_id=None, title=None, model=None, system_prompt=None, parent_session_id=None, started_at=0.0,
            ended_at=None, end_reason=None, message_count=0, input_tokens=0, output_tokens=0,
            cache_read_tokens=0, cache_write_tokens=0, last_prompt_tokens=0, cost_usd=0.0,
        )  # fmt: skip
        known.written(record)
    assert len(known) == 2 and known.get("k0") is None and known.get("k2") is not None
    now[0] = 10.5
    assert known.get("k2") is None and len(known) == 1

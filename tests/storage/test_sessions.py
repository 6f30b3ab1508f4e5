"""Sessions: creation, the first end reason winning, titles, listing, routing lookups, usage."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from storage import InvalidTitleError, NewMessage, SessionNotFoundError, Store, TitleInUseError, Usage
from tests.storage.conftest import new_session, user

pytestmark = pytest.mark.both_engines


async def test_create_and_get_round_trip(store: Store) -> None:
    created = await store.create_session(
        session_key="discord:guild:chan:thread",
        platform="discord",
        chat_id="chan",
        chat_type="group",
        thread_id="thread",
        user_id="u1",
        model="claude",
        system_prompt="You are helpful.",
        title="  My   chat ",
    )
    assert created.title == "My chat"
    assert created.is_open and created.message_count == 0 and created.cost_usd == 0.0
    assert await store.get_session(created.id) == created


async def test_ids_sort_by_creation(store: Store) -> None:
    ids = [(await new_session(store, f"telegram:{n}")).id for n in range(20)]
    assert ids == sorted(ids) and len(set(ids)) == 20 and all(len(i) == 26 for i in ids)


async def test_get_unknown_session_is_none(store: Store) -> None:
    assert await store.get_session("nope") is None


async def test_first_end_reason_wins(store: Store) -> None:
    session = await new_session(store)
    assert await store.end_session(session.id, "idle") is True
    assert await store.end_session(session.id, "user") is False
    ended = await store.get_session(session.id)
    assert ended is not None and ended.end_reason == "idle" and ended.ended_at is not None
    with pytest.raises(SessionNotFoundError):
        await store.end_session("nope", "user")


async def test_titles_are_unique_and_cleaned(store: Store) -> None:
    first, second = await new_session(store, "telegram:1"), await new_session(store, "telegram:2")
    assert await store.set_title(first.id, "plan\u200b\tA") == "plan A"
    with pytest.raises(TitleInUseError) as raised:
        await store.set_title(second.id, "plan A")
    assert raised.value.holder_id == first.id
    assert await store.set_title(first.id, "   ") is None  # blank clears
    assert await store.set_title(second.id, "plan A") == "plan A"
    with pytest.raises(InvalidTitleError):
        await store.set_title(second.id, "x" * 101)
    with pytest.raises(SessionNotFoundError):
        await store.set_title("nope", "t")
    with pytest.raises(TitleInUseError):
        await new_session(store, "telegram:3", title="plan A")


async def test_list_sessions_newest_first_with_platform_filter_and_limit(store: Store) -> None:
    made = [await new_session(store, f"{p}:{n}", platform=p) for n in range(3) for p in ("telegram", "slack")]
    listed = await store.list_sessions()
    assert [s.id for s in listed] == [s.id for s in reversed(made)]
    assert {s.platform for s in await store.list_sessions(platform="slack")} == {"slack"}
    assert len(await store.list_sessions(platform="slack")) == 3
    assert len(await store.list_sessions(limit=2)) == 2


async def test_find_open_session_is_the_newest_not_ended(store: Store) -> None:
    older = await new_session(store, "telegram:9")
    newer = await new_session(store, "telegram:9")
    await new_session(store, "telegram:10")
    found = await store.find_open_session("telegram:9")
    assert found is not None and found.id == newer.id
    await store.end_session(newer.id, "reset")
    found = await store.find_open_session("telegram:9")
    assert found is not None and found.id == older.id
    await store.end_session(older.id, "daily")
    assert await store.find_open_session("telegram:9") is None


async def test_usage_adds_counters_and_replaces_last_prompt(store: Store) -> None:
    session = await new_session(store)
    await store.add_usage(session.id, input_tokens=100, output_tokens=20, cache_read_tokens=5,
                          cache_write_tokens=7, last_prompt_tokens=900, cost_usd=0.25)  # fmt: skip
    await store.add_usage(session.id, input_tokens=50, output_tokens=10, last_prompt_tokens=1200, cost_usd=0.5)
    got = await store.get_session(session.id)
    assert got is not None
    assert (got.input_tokens, got.output_tokens, got.cache_read_tokens, got.cache_write_tokens) == (150, 30, 5, 7)
    assert got.last_prompt_tokens == 1200 and got.cost_usd == pytest.approx(0.75)
    with pytest.raises(SessionNotFoundError):
        await store.add_usage("nope", input_tokens=1)


async def test_message_count_follows_appends(store: Store) -> None:
    session = await new_session(store)
    await store.append_messages(session.id, [user("a"), user("b")])
    await store.append_messages(session.id, [user("c")])
    got = await store.get_session(session.id)
    assert got is not None and got.message_count == 3


@pytest.mark.sqlite_only  # reads the SQLite file; tests/storage/postgres/test_sessions.py checks the server's table
async def test_system_prompts_are_stored_once(store: Store, db_path: Path) -> None:
    prompt = "You are Switchboard. " * 500
    sessions = [await new_session(store, f"telegram:{n}", system_prompt=prompt) for n in range(5)]
    for session in sessions:
        got = await store.get_session(session.id)
        assert got is not None and got.system_prompt == prompt
    with sqlite3.connect(db_path) as conn:
        assert conn.execute("SELECT COUNT(*) FROM prompts").fetchone()[0] == 1


async def test_parent_must_exist(store: Store) -> None:
    with pytest.raises(SessionNotFoundError):
        await new_session(store, parent_session_id="nope")


async def test_callers_may_choose_the_session_id(store: Store) -> None:
    from storage import new_session_id

    chosen = new_session_id()
    created = await new_session(store, session_id=chosen)
    assert created.id == chosen and await store.get_session(chosen) == created


async def test_usage_can_ride_on_the_append_of_the_message_it_produced(store: Store) -> None:
    session = await new_session(store)
    usage = Usage(input_tokens=7, output_tokens=3, cache_read_tokens=2, last_prompt_tokens=90, cost_usd=0.5)
    await store.append_messages(session.id, [user("q")])
    before = await store.usage_since(0.0)
    records = await store.append_messages(session.id, [NewMessage("assistant", "a")], usage=usage)
    assert [r.seq for r in records] == [2]
    stored = await store.get_session(session.id)
    assert stored is not None
    assert (stored.input_tokens, stored.output_tokens, stored.cache_read_tokens) == (7, 3, 2)
    assert (stored.last_prompt_tokens, stored.cost_usd, stored.message_count) == (90, 0.5, 2)
    after = await store.usage_since(0.0)
    assert after.calls == before.calls + 1 and after.input_tokens == before.input_tokens + 7
    with pytest.raises(SessionNotFoundError):
        await store.append_messages("no-such-session", [user("q")], usage=usage)
    assert (await store.usage_since(0.0)).calls == after.calls

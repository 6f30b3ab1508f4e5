"""Lineage: splitting a session for compression, chained titles, walking and resolving chains."""

from __future__ import annotations

import asyncio

import pytest

from storage import END_COMPRESSION, NewMessage, SessionNotFoundError, Store
from tests.storage.conftest import new_session, user

pytestmark = pytest.mark.both_engines

SUMMARY = [NewMessage("user", "[summary of earlier turns]"), NewMessage("assistant", "ok, continuing")]


async def test_split_ends_parent_and_continues_in_a_child(store: Store) -> None:
    parent = await new_session(store, "slack:T:C", platform="slack", chat_id="C", thread_id="ts1", user_id="U",
                               chat_type="channel", model="m1", system_prompt="prompt v1", title="release")  # fmt: skip
    await store.append_messages(parent.id, [user(f"old {i}") for i in range(5)])
    child = await store.split_session(parent.id, SUMMARY)
    ended = await store.get_session(parent.id)
    assert ended is not None and ended.end_reason == END_COMPRESSION and ended.ended_at is not None
    assert child.parent_session_id == parent.id and child.is_open
    routing = ("session_key", "platform", "chat_id", "chat_type", "thread_id", "user_id", "model", "system_prompt")
    assert all(getattr(child, f) == getattr(parent, f) for f in routing)
    assert child.title == "release #2" and child.message_count == 2
    assert [m.content for m in await store.load_messages(child.id)] == [m.content for m in SUMMARY]
    assert [m.seq for m in await store.load_messages(child.id)] == [1, 2]
    found = await store.find_open_session("slack:T:C")
    assert found is not None and found.id == child.id


async def test_split_can_take_a_new_system_prompt(store: Store) -> None:
    parent = await new_session(store, system_prompt="before")
    child = await store.split_session(parent.id, SUMMARY, system_prompt="after")
    assert child.system_prompt == "after"


async def test_first_end_reason_wins_over_compression(store: Store) -> None:
    parent = await new_session(store)
    await store.end_session(parent.id, "user")
    child = await store.split_session(parent.id, SUMMARY)
    ended = await store.get_session(parent.id)
    assert ended is not None and ended.end_reason == "user"
    assert child.parent_session_id == parent.id
    assert await store.end_session(parent.id, END_COMPRESSION) is False


async def test_titles_chain_and_lineage_runs_root_to_newest(store: Store) -> None:
    root = await new_session(store, title="notes")
    chain = [root]
    for _ in range(3):
        chain.append(await store.split_session(chain[-1].id, SUMMARY))
    assert [s.title for s in chain] == ["notes", "notes #2", "notes #3", "notes #4"]
    for member in chain:
        assert [s.id for s in await store.lineage(member.id)] == [s.id for s in chain]
    resolved = await store.resolve_title("notes")
    assert resolved is not None and resolved.id == chain[-1].id
    resolved = await store.resolve_title("notes #2")
    assert resolved is not None and resolved.id == chain[-1].id


async def test_untitled_sessions_split_into_untitled_children(store: Store) -> None:
    parent = await new_session(store)
    child = await store.split_session(parent.id, [])
    assert child.title is None and child.message_count == 0


async def test_wildcard_characters_in_titles_match_literally(store: Store) -> None:
    await new_session(store, "telegram:1", title="a_b")
    await new_session(store, "telegram:2", title="axb #7")  # would match a LIKE 'a_b #%'
    await new_session(store, "telegram:3", title="50% #4")
    await new_session(store, "telegram:4", title="50x #9")
    underscore = await store.resolve_title("a_b")
    assert underscore is not None
    child = await store.split_session(underscore.id, SUMMARY)
    assert child.title == "a_b #2"
    percent = await new_session(store, "telegram:5", title="50%")
    assert (await store.split_session(percent.id, SUMMARY)).title == "50% #5"


async def test_next_title_skips_numbers_in_use(store: Store) -> None:
    base = await new_session(store, "telegram:1", title="plan")
    await new_session(store, "telegram:2", title="plan #2")  # renamed by hand, not a child
    child = await store.split_session(base.id, SUMMARY)
    assert child.title == "plan #3"


async def test_lineage_follows_the_newest_branch(store: Store) -> None:
    root = await new_session(store, title="fork")
    first = await store.split_session(root.id, SUMMARY)
    second = await store.split_session(root.id, SUMMARY)  # splitting an ended parent again: a fork
    assert [s.id for s in await store.lineage(root.id)] == [root.id, second.id]
    assert [s.id for s in await store.lineage(first.id)] == [root.id, first.id]


async def test_resolve_unknown_title_is_none(store: Store) -> None:
    assert await store.resolve_title("nothing") is None
    assert await store.resolve_title("x" * 500) is None


async def test_split_and_lineage_of_unknown_sessions(store: Store) -> None:
    with pytest.raises(SessionNotFoundError):
        await store.split_session("nope", SUMMARY)
    with pytest.raises(SessionNotFoundError):
        await store.lineage("nope")


async def test_concurrent_appends_and_split_stay_consistent(store: Store) -> None:
    parent = await new_session(store, title="busy")
    appends = [store.append_messages(parent.id, [user(f"m{i}")]) for i in range(20)]
    results = await asyncio.gather(*appends, store.split_session(parent.id, SUMMARY))
    child = results[-1]
    assert [m.seq for m in await store.load_messages(parent.id)] == list(range(1, 21))
    assert [m.seq for m in await store.load_messages(child.id)] == [1, 2]
    after = await store.append_messages(child.id, [user("next")])
    assert after[0].seq == 3


async def test_a_maximal_title_still_chains(store: Store) -> None:
    parent = await new_session(store, title="t" * 100)
    child = await store.split_session(parent.id, SUMMARY)
    assert child.title == "t" * 100 + " #2"
    newest = await store.split_session(child.id, SUMMARY)
    assert newest.title == "t" * 100 + " #3"
    resolved = await store.resolve_title("t" * 100 + " #2")
    assert resolved is not None and resolved.id == newest.id

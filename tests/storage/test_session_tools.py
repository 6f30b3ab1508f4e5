"""A session's frozen tool list (``sessions.tools_id``) and the pictures tools return, on both engines.

The tool list is the text the agent wrote when the session started; the store keeps it as given, interned
with the system prompts, hands it back on every read, and a compaction's child keeps its parent's. A tool
message's media parts are stored with it like a user message's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg
import pytest

from agent.media import MediaPart
from agent.messages import ChatMessage
from gateway.turn.convert import to_chat, to_new
from storage import NewMessage, Store
from storage.migrations import upgrade
from tests.storage.conftest import Opener, new_session

pytestmark = pytest.mark.both_engines

TOOLS = ('[{"name":"github__search_issues","description":"Search issues.","parameters":{"type":"object",'
         '"properties":{"q":{"type":"string"},"a":{"type":"integer"}},"required":["q"]}}]')
"""Key order on purpose not sorted: it must come back exactly as written."""
CHART = MediaPart(kind="image", mime="image/png", sha256="cd" * 32, size=20_480, origin="tool", width=800, height=600,
                  sent_at=1_767_225_601.0)  # fmt: skip


async def count_texts(engine_name: str, db_path: Path, request: pytest.FixtureRequest, text: str) -> int:
    if engine_name == "postgresql":
        conn = await asyncpg.connect(request.getfixturevalue("postgres_dsn"))
        try:
            return int(await conn.fetchval("SELECT count(*) FROM prompts WHERE text = $1", text))
        finally:
            await conn.close()
    with sqlite3.connect(db_path) as conn:
        return int(conn.execute("SELECT count(*) FROM prompts WHERE text = ?", (text,)).fetchone()[0])


async def test_a_sessions_tool_list_is_kept_as_written_and_stored_once(
    store: Store, other_store: Opener, engine_name: str, db_path: Path, request: pytest.FixtureRequest
) -> None:
    first = await new_session(store, "telegram:1", system_prompt="You help.", tool_specs=TOOLS)
    second = await new_session(store, "telegram:2", system_prompt="You help.", tool_specs=TOOLS)
    bare = await new_session(store, "telegram:3", system_prompt="You help.")
    assert (first.tool_specs, second.tool_specs, bare.tool_specs) == (TOOLS, TOOLS, None)
    fresh = await other_store()  # read back from the tables, past any cache
    assert [(await fresh.get_session(s.id)).tool_specs for s in (first, second, bare)] == [TOOLS, TOOLS, None]
    assert (await fresh.find_open_session("telegram:2")).tool_specs == TOOLS
    assert [s.tool_specs for s in await fresh.list_sessions()] == [None, TOOLS, TOOLS]
    assert await count_texts(engine_name, db_path, request, TOOLS) == 1  # interned like the system prompt
    assert "tool_specs" not in first.to_json_dict(include_prompt=False)


async def test_a_compactions_child_keeps_its_parents_tools(store: Store, other_store: Opener) -> None:
    parent = await new_session(store, system_prompt="You help.", tool_specs=TOOLS)
    child = await store.split_session(parent.id, [NewMessage("user", "summary: so far")], system_prompt="You help.")
    assert child.tool_specs == TOOLS
    assert (await (await other_store()).get_session(child.id)).tool_specs == TOOLS


async def test_a_tool_messages_pictures_are_stored_with_it(store: Store, other_store: Opener) -> None:
    session = await new_session(store)
    message = ChatMessage(role="tool", content="the chart", tool_call_id="call_1", tool_name="charts__plot",
                          media=(CHART,))  # fmt: skip
    await store.append_messages(session.id, [NewMessage("user", "plot it"), to_new(message)])
    loaded = await (await other_store()).load_messages(session.id)
    assert to_chat(loaded[1]) == message and to_chat(loaded[1]).media == (CHART,)


async def test_a_database_from_before_gives_its_sessions_no_tool_list(db_path: Path) -> None:
    with sqlite3.connect(db_path, isolation_level=None) as conn:
        assert upgrade(conn, db_path, target=10) == 10
        conn.execute("INSERT INTO sessions (id, session_key, platform, chat_id, started_at) "
                     "VALUES ('old', 'telegram:1', 'telegram', '1', 1000.0)")  # fmt: skip
    async with await Store.open(db_path) as store:
        assert (await store.get_session("old")).tool_specs is None
        new = await store.create_session(session_key="telegram:2", platform="telegram", chat_id="2", tool_specs=TOOLS)
        assert (await store.get_session(new.id)).tool_specs == TOOLS

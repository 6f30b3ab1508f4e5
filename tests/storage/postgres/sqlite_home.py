"""A SQLite database filled through the real SQLite ``Store`` with a bit of everything, and the raw rows of both
engines' tables, for the tests of copying a SQLite home into PostgreSQL (``switchboard storage migrate``)."""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import asyncpg

from storage import NewMessage, OutboxChunk, PairingCode, Store, ToolCallRecord, TurnEnd, Usage
from storage.postgres.copy_from_sqlite import COPIED_TABLES
from storage.postgres.text import clean, clean_json

NOW = 1_767_225_600.25
PROMPT = "You are terse. Answer in the user's language."
PHOTO = {"kind": "image", "mime": "image/jpeg", "sha256": "ab" * 32, "size": 183_004, "origin": "photo",
         "width": 1280, "height": 960, "sent_at": 1_767_225_600.5}  # fmt: skip
CHART = {"kind": "image", "mime": "image/png", "sha256": "cd" * 32, "size": 20_480, "origin": "tool",
         "width": 800, "height": 600, "sent_at": 1_767_225_601.0}  # fmt: skip
"""A picture a tool returned: it rides on the tool's message."""
TOOLS = ('[{"name":"web_search","description":"Search the web.","parameters":{"type":"object","properties":'
         '{"query":{"type":"string"}},"required":["query"]}}]')
"""A session's frozen tool list, as the agent writes it (interned in ``prompts`` beside the system prompt)."""
CJK = "東京の天気はどうですか？明日は雨の予報です。"
WITH_NUL = "the tool printed a\0b and stopped"
CALL = ToolCallRecord("call_1", "web_search", '{"query": "Zürich weather", "days": 3, "raw": "x\\u0000y"}')
NUL_IN_ARGUMENTS = ToolCallRecord("call_2", "run", '{"cmd": "printf a\0b"}')
JSON_TABLES = {"messages": ("tool_calls", "media"), "inbox": ("payload",)}
SQLITE_ONLY_COLUMNS = {"messages": ("search_cjk",)}


async def fill(path: Path) -> dict[str, str]:
    """Sessions with lineage, titles and a frozen tool list, tool calls, media (a tool's picture too), CJK, a NUL, usage, pairing, inbox and outbox rows of each
    state; the ids of the sessions by role (``root``, ``child``, ``other``)."""
    store = await Store.open(path)
    try:
        root = await store.create_session(session_key="telegram:42", platform="telegram", chat_id="42",
                                          chat_type="private", user_id="42", model="claude-sonnet-4-5",
                                          system_prompt=PROMPT, title="Trip to Zürich", tool_specs=TOOLS)  # fmt: skip
        await store.append_messages(root.id, [
            NewMessage("user", "what's the weather in Zürich for 3 days?", platform_message_id="tg-101"),
            NewMessage("assistant", "", tool_calls=(CALL, NUL_IN_ARGUMENTS), reasoning="look it up", token_estimate=40),
            NewMessage("tool", '{"temp": 3.5, "rain": true}', tool_call_id="call_1", tool_name="web_search", media=(CHART,)),
            NewMessage("user", "and this one?", media=(PHOTO,), platform_message_id="tg-102"),
            NewMessage("user", CJK),
            NewMessage("tool", WITH_NUL, tool_call_id="call_2", tool_name="run"),
        ], usage=Usage(input_tokens=1200, output_tokens=80, cache_read_tokens=900, last_prompt_tokens=1200,
                       cost_usd=0.0123))  # fmt: skip
        await store.add_usage(root.id, input_tokens=300, output_tokens=20, cost_usd=0.001)
        child = await store.split_session(root.id, [NewMessage("user", "summary: Zürich, 3 days, rain")],
                                          system_prompt=PROMPT)  # fmt: skip
        await store.set_title(child.id, "Trip to Zürich #2")
        await store.append_messages(child.id, [NewMessage("assistant", "明日は傘を持って行ってください。")])
        other = await store.create_session(session_key="discord:7:9", platform="discord", chat_id="7",
                                           thread_id="9", system_prompt="You help with code.")  # fmt: skip
        await store.append_messages(other.id, [NewMessage("user", "hi")], usage=Usage(input_tokens=10, cost_usd=1e-05))
        await store.end_session(other.id, "reset")

        pairing = store.pairing
        await pairing.add_code(PairingCode(code="K7Q2", platform="telegram", user_id="99", user_name="Ann",
                                           chat_id="99", created_at=NOW, expires_at=NOW + 3600))  # fmt: skip
        await pairing.add_code(PairingCode(code="ZZ11", platform="slack", user_id="U2", user_name=None, chat_id=None,
                                           created_at=NOW, expires_at=NOW + 3600))  # fmt: skip
        await pairing.take_code("telegram", "K7Q2", NOW + 60)
        await pairing.approve("telegram", "99", "Ann", NOW + 60)
        await pairing.record_failure("slack", NOW + 5)
        await pairing.record_failure("slack", NOW + 6)

        payload = {"text": CJK, "from": {"id": 42, "name": "Zoë"}, "score": 1e20, "ratio": 0.1, "nested": [1, [2.5]],
                   "nul": "a\0b"}  # fmt: skip
        assert await store.inbox_accept("telegram", "u1", "telegram:42", payload)
        assert await store.inbox_accept("telegram", "u2", "telegram:42", {"text": "second", "b": 1, "a": 2})
        assert await store.inbox_accept("discord", "d1", "discord:7:9", {"text": "not done yet"})
        await store.inbox_mark_done("telegram", "u1")
        sent, pending = await store.finish_turn(TurnEnd(
            turn_id="turn-1", platform="telegram", chat_id="42", thread_id=None, answered=[("telegram", "u2")],
            chunks=[OutboxChunk(text="<b>Rain</b> all week", plain="Rain all week", markup="telegram_html", reply_to="tg-102"),
                    OutboxChunk(text="take an umbrella")],
        ))  # fmt: skip
        assert await store.outbox_mark_sent(sent.id, "tg-201")
        await store.outbox_mark_failed(pending.id, "timed out")
        live = await store.outbox_stream_open("turn-2", "discord", "7", "9", OutboxChunk(text="typing..."), mode="native")
        assert await store.outbox_stream_shown(live.id, "typing... more", "dc-301")
    finally:
        await store.close()
    return {"root": root.id, "child": child.id, "other": other.id}


def sqlite_rows(path: Path) -> dict[str, list[dict[str, Any]]]:
    """Every copied table's rows, as PostgreSQL is to hold them: SQLite-only columns left out, text and JSON after the
    NUL policy of ``storage/postgres/text.py``, JSON parsed; ordered by their first column."""
    tables: dict[str, list[dict[str, Any]]] = {}
    with closing(sqlite3.connect(path)) as conn:
        conn.row_factory = sqlite3.Row
        for table in COPIED_TABLES:
            rows = [dict(row) for row in conn.execute(f"SELECT * FROM {table}")]  # noqa: S608
            for row in rows:
                for column in SQLITE_ONLY_COLUMNS.get(table, ()):
                    del row[column]
                for column, value in row.items():
                    if column in JSON_TABLES.get(table, ()):
                        row[column] = None if value is None else json.loads(clean_json(value))
                    elif isinstance(value, str):
                        row[column] = clean(value)
            tables[table] = _ordered(rows)
    for session in tables["sessions"]:  # kept by the PostgreSQL store alone: the seq of the session's last message
        session["last_seq"] = max((m["seq"] for m in tables["messages"] if m["session_id"] == session["id"]), default=0)
    return tables


async def postgres_rows(dsn: str) -> dict[str, list[dict[str, Any]]]:
    """Every copied table's rows in PostgreSQL (generated columns left out), JSON parsed; ordered by their first
    column."""
    conn = await asyncpg.connect(dsn)
    try:
        tables = {}
        for table in COPIED_TABLES:
            generated = {r["attname"] for r in await conn.fetch(
                "SELECT attname FROM pg_attribute WHERE attrelid = to_regclass($1) AND attgenerated <> ''", table)}  # fmt: skip
            rows = [dict(row) for row in await conn.fetch(f"SELECT * FROM {table}")]  # noqa: S608
            for row in rows:
                for column in generated:
                    del row[column]
                if table == "outbox":  # which replica sends a chunk: none yet, right after a copy
                    assert row.pop("claimed_by") is None
                for column in JSON_TABLES.get(table, ()):
                    if row[column] is not None:
                        row[column] = json.loads(row[column])
            tables[table] = _ordered(rows)
        return tables
    finally:
        await conn.close()


def _ordered(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(rows, key=lambda row: tuple(str(v) for v in row.values()))

"""Search on PostgreSQL beyond the shared suite (tests/storage/test_search.py, test_substring.py): short CJK
through the pair words of the generated vector, tool calls in the vector, and plans that read an index for
the queries people type most (a rare word, two CJK characters, a prefix, a part of a word)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import asyncpg
import pytest
import pytest_asyncio

from storage import NewMessage, PostgresStore
from storage.postgres.search import statement
from storage.search.fulltext import HIGHLIGHT

OPEN, CLOSE = HIGHLIGHT


@pytest_asyncio.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresStore]:
    async with await PostgresStore.open(postgres_dsn) as opened:
        yield opened


@pytest_asyncio.fixture
async def conn(postgres_dsn: str, store: PostgresStore) -> AsyncIterator[asyncpg.Connection]:
    connection = await asyncpg.connect(postgres_dsn)
    try:
        yield connection
    finally:
        await connection.close()


async def session(conn: asyncpg.Connection, session_id: str = "s1", platform: str = "telegram") -> str:
    """A session row as the sessions code writes it (this file tests search, not sessions)."""
    await conn.execute(
        "INSERT INTO sessions (id, session_key, platform, chat_id, started_at) VALUES ($1, $1, $2, '1', 0)",
        session_id, platform,
    )  # fmt: skip
    return session_id


async def test_two_cjk_characters_are_found_in_text_tool_names_and_arguments(
    store: PostgresStore, conn: asyncpg.Connection
) -> None:
    sid = await session(conn)
    call = {"id": "c1", "name": "搜索工具", "arguments": json.dumps({"q": "大别山的风景"})}  # escaped: \u5927...
    text, named, called = await store.append_messages(sid, [
        NewMessage("user", "我们用docker部署了服务"),
        NewMessage("tool", "done", tool_call_id="c1", tool_name="翻译工具"),
        NewMessage("assistant", "", tool_calls=[call]),
    ])  # fmt: skip
    for query, expected in [("部署", text), ("署了", text), ("翻译", named), ("工具", None), ("别山", called),
                            ("風景", None), ("风景", called), ("山", called)]:  # fmt: skip
        hits = await store.search(query)
        if expected is None:
            continue
        assert [hit.message_id for hit in hits] == [expected.id], query
        assert f"{OPEN}{query}{CLOSE}" in hits[0].snippet
    assert {hit.message_id for hit in await store.search("工具")} == {named.id, called.id}
    assert await store.search("風景") == []  # traditional, not the simplified characters stored


async def test_tool_names_and_argument_values_are_words_of_the_vector(
    store: PostgresStore, conn: asyncpg.Connection
) -> None:
    sid = await session(conn)
    call = {"id": "c1", "name": "run_shell", "arguments": json.dumps({"cmd": "make\ntestsuite", "city": "Zürich"})}
    await store.append_messages(sid, [NewMessage("assistant", "", tool_calls=[call]),
                                      NewMessage("tool", "ok", tool_call_id="c1", tool_name="webfetcher")])  # fmt: skip
    words = [set(row[0]) for row in await conn.fetch("SELECT tsvector_to_array(words) FROM messages ORDER BY seq")]
    assert {"run", "shell", "make", "testsuite", "zurich"} <= words[0] and "cmd" not in words[0]
    assert "ntestsuite" not in words[0] and "u00fc" not in " ".join(words[0])
    assert "webfetcher" in words[1]


async def test_a_message_written_by_another_program_is_searchable(store: PostgresStore, conn: asyncpg.Connection) -> None:
    """The vector is a generated column: an INSERT of our own (``storage migrate``, an operator's script) keeps it."""
    sid = await session(conn)
    await conn.execute(
        "INSERT INTO messages (session_id, seq, role, content, created_at) VALUES ($1, 1, 'user', $2, 0)",
        sid, "在大别山部署",
    )  # fmt: skip
    assert [hit.seq for hit in await store.search("部署")] == [1]


@pytest.mark.parametrize(
    ("query", "substrings", "index"),
    [
        ("zanzibar", False, "messages_words"),  # a rare word
        ("部署", False, "messages_words"),  # two CJK characters
        ("山", False, "messages_words"),  # one: a prefix of the pair words
        ("zanz*", False, "messages_words"),  # a prefix
        ("P2", False, "messages_words"),  # a part of a token the parser keeps whole ("P2.2")
        ("anzib", True, "search_vocabulary_trigrams"),  # a part of a word: the second pass reads the vocabulary
        ("anzib", True, "messages_words"),  # ... and finds the messages of its words with the word index
    ],
)
async def test_the_plan_reads_an_index(
    store: PostgresStore, conn: asyncpg.Connection, query: str, substrings: bool, index: str
) -> None:
    sid = await session(conn)
    filler = [NewMessage("user", f"message {n} about the weekly deployment of service{n % 50} 你好世界")
              for n in range(3000)]  # fmt: skip
    for start in range(0, len(filler), 500):
        await store.append_messages(sid, filler[start : start + 500])
    await store.append_messages(sid, [NewMessage("user", "a trip to zanzibar for P2.2, 我们部署了服务在大别山")])
    await conn.execute("VACUUM ANALYZE messages, search_vocabulary")  # as autovacuum would (the GIN pending lists)
    await conn.execute("SET enable_seqscan = off")  # a few thousand rows: make the planner show what it can use
    planned = statement(query, substrings=substrings)
    assert planned is not None
    sql, params = planned
    plan = "\n".join(row[0] for row in await conn.fetch("EXPLAIN " + sql, *params))
    assert f"Bitmap Index Scan on {index}" in plan, plan
    hits = await store.search(query)
    assert hits and any("zanzibar" in hit.snippet for hit in hits), query

"""The search query language on PostgreSQL (storage/postgres/search_query.py), against a real server: a small
table shaped like the engine's messages (content, ``to_tsvector('simple', content)`` generated, GIN indexes on
the vector and on the content's trigrams) and the same corpus and hostile queries as the SQLite search tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import asyncpg
import pytest
import pytest_asyncio

from storage.postgres.search_query import excerpt, pg_search_query
from storage.search.cjk import cjk_tokens
from storage.search.fulltext import HIGHLIGHT
from storage.search.query import MAX_QUERY_LENGTH

OPEN, CLOSE = HIGHLIGHT

_TABLE = """
    CREATE EXTENSION IF NOT EXISTS pg_trgm;
    CREATE TABLE messages (
        id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        session_id TEXT NOT NULL,
        content TEXT NOT NULL,
        search_cjk TEXT,
        search_vector TSVECTOR GENERATED ALWAYS AS (to_tsvector('simple', {indexed})) STORED
    );
    CREATE INDEX messages_search_vector ON messages USING GIN (search_vector);
    CREATE INDEX messages_content_trigrams ON messages USING GIN (content gin_trgm_ops);
"""
CORPUS = {
    "question": "How do I deploy the chat-send service to staging? See ticket P2.2",
    "call": "kubectl apply -f my-app.config.ts",
    "result": "deployment.apps/chat-send configured",
    "todo": 'TODO: fix the flaky test (it\'s "sometimes" red)',
    "chinese": "我们用docker部署了服务，大别山的风景很好",
    "japanese": "日本語のテキストも検索できます",
    "korean": "서울에서 만나요",
    "production": "Deploying to production is scheduled for Friday",
    "redeploy": "The redeployment of key: value pairs finished",
}


@dataclass(frozen=True)
class Hit:
    name: str
    rank: float
    excerpt: str


class Table:
    def __init__(self, conn: asyncpg.Connection, ids: dict[int, str], *, cjk_pairs: bool) -> None:
        self.conn, self.names, self.cjk_pairs = conn, ids, cjk_pairs

    async def search(self, text: str, limit: int = 20) -> list[Hit]:
        query = pg_search_query(text, first=2, cjk_pairs=self.cjk_pairs)
        if query is None:
            return []
        rows = await self.conn.fetch(
            f"""
            WITH hit AS (
                SELECT id, {query.rank} AS rank FROM messages WHERE {query.condition}
                ORDER BY rank DESC, id DESC LIMIT $1
            )
            SELECT m.id, hit.rank, m.content, {query.headline} AS headline
            FROM hit JOIN messages AS m USING (id) ORDER BY hit.rank DESC, m.id DESC
            """,
            limit,
            *query.params,
        )
        return [
            Hit(self.names[row["id"]], row["rank"], excerpt(row["headline"], row["content"], query.needles))
            for row in rows
        ]

    async def names_found(self, text: str) -> set[str]:
        return {hit.name for hit in await self.search(text)}


async def _table(dsn: str, *, cjk_pairs: bool) -> AsyncIterator[Table]:
    conn = await asyncpg.connect(dsn)
    try:
        indexed = "content || ' ' || coalesce(search_cjk, '')" if cjk_pairs else "content"
        await conn.execute(_TABLE.format(indexed=indexed))
        ids = {}
        for name, content in CORPUS.items():
            row = await conn.fetchval(
                "INSERT INTO messages (session_id, content, search_cjk) VALUES ('s1', $1, $2) RETURNING id",
                content,
                cjk_tokens([content]),
            )
            ids[row] = name
        yield Table(conn, ids, cjk_pairs=cjk_pairs)
    finally:
        await conn.close()


@pytest_asyncio.fixture
async def table(postgres_dsn: str) -> AsyncIterator[Table]:
    """The messages' vector is ``to_tsvector('simple', content)``: CJK is found with the trigram index."""
    async for made in _table(postgres_dsn, cjk_pairs=False):
        yield made


@pytest_asyncio.fixture
async def paired(postgres_dsn: str) -> AsyncIterator[Table]:
    """The messages' vector also holds the CJK pair stream (``cjk_tokens``): CJK is found as pairs of words."""
    async for made in _table(postgres_dsn, cjk_pairs=True):
        yield made


@pytest.mark.parametrize(
    "query",
    ["chat-send", "P2.2", '"sometimes', 'a "b" "c', "key: value", "", "   ", "!?.,;", "--", "'", "\\", "''''",
     '"', '""', "*", ":", "AND", "OR NOT", "(", ")", "^", "content:staging", "NEAR(a b)", "{content}: x", "a\x00b",
     "%", "_", "100%_done\\", "deploy\udcff", "\ud83d", "\u200b", "*deploy", "de*ploy", "&|!<->", "a:* & !b",
     "x" * 5000, "é" * 1100, "a" + "😀" * 999, "部" * 3000, "deploy " * 600, "OR " * 600, "\"a\" NOT " * 300],
)  # fmt: skip
async def test_hostile_and_odd_queries_never_raise(table: Table, query: str) -> None:
    await table.search(query)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("staging", {"question"}),
        ("chat-send", {"question", "result"}),
        ("P2.2", {"question"}),
        ("my-app.config.ts", {"call"}),
        ('"flaky test"', {"todo"}),
        ('"test flaky"', set()),  # a phrase keeps its order
        ("TODO: fix", {"todo"}),
        ('"sometimes', {"todo"}),
        ("it's", {"todo"}),
        ("key: value", {"redeploy"}),
        ("staging OR production", {"question", "production"}),
        ("deploy* NOT staging", {"result", "production", "redeploy"}),
        ("AND staging OR", {"question"}),
        ("content:nothingmatches", set()),
        ("zebra", set()),
    ],
)
async def test_words_phrases_punctuation_and_operators(table: Table, query: str, expected: set[str]) -> None:
    assert await table.names_found(query) == expected


async def test_a_prefix_finds_the_words_it_starts_and_a_quoted_word_only_itself(table: Table) -> None:
    assert await table.names_found("deploy*") == {"question", "result", "production", "redeploy"}
    assert await table.names_found('"deploy"') == {"question"}
    assert await table.names_found("Deploy") == {"question", "result", "production", "redeploy"}  # and inside words


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("ploy", {"question", "result", "production", "redeploy"}),  # part of a word, 3 letters or more
        ("ubect", {"call"}),
        ("docker", {"chinese"}),  # latin glued to CJK: one token for the parser, found as a part
        ("部署", {"chinese"}),  # two CJK characters
        ("山", {"chinese"}),
        ("大别山", {"chinese"}),
        ("部署了服务", {"chinese"}),
        ("用docker部署", {"chinese"}),
        ("検索", {"japanese"}),
        ("テキスト", {"japanese"}),
        ("서울", {"korean"}),
        ("服务大别", set()),  # both pairs exist, but a comma separates them
        ("不存在", set()),
        ("50%", set()),  # LIKE's wildcards are taken literally
        ("a_b", set()),
    ],
)
async def test_parts_of_words_and_cjk_are_found_with_the_match_marked(
    table: Table, query: str, expected: set[str]
) -> None:
    hits = await table.search(query)
    assert {hit.name for hit in hits} == expected
    for hit in hits:
        assert OPEN in hit.excerpt and CLOSE in hit.excerpt, hit


@pytest.mark.parametrize(
    ("query", "expected"),
    [("部署", {"chinese"}), ("山", {"chinese"}), ("大别山", {"chinese"}), ("部署了服务", {"chinese"}),
     ("用docker部署", {"chinese"}), ("docker", {"chinese"}), ("検索", {"japanese"}), ("서울", {"korean"}),
     ("服务大别", set()), ("别山风", set()), ("不存在", set()), ("docker NOT 部署", set())],
)  # fmt: skip
async def test_cjk_as_indexed_pairs_finds_the_same_as_sqlite(paired: Table, query: str, expected: set[str]) -> None:
    hits = await paired.search(query)
    assert {hit.name for hit in hits} == expected
    for hit in hits:
        assert OPEN in hit.excerpt and CLOSE in hit.excerpt and hit.rank > 0, hit


@pytest.mark.parametrize("query", ["部署", "山", "'部署'", "部署:*", "大别山 OR 'x'", "部" * 3000])
async def test_cjk_pairs_take_hostile_queries_too(paired: Table, query: str) -> None:
    await paired.search(query)


async def test_the_two_character_cjk_excerpt_marks_the_characters(table: Table) -> None:
    (hit,) = await table.search("部署")
    assert f"{OPEN}部署{CLOSE}" in hit.excerpt


async def test_word_hits_rank_by_ts_rank_before_hits_inside_longer_words(table: Table) -> None:
    release = await table.conn.fetchval(
        "INSERT INTO messages (session_id, content) VALUES ('s2', 'release notes: the release of the release')"
        " RETURNING id"
    )
    table.names[release] = "release"
    hits = await table.search("deploy")
    assert hits[0].name == "question" and hits[0].rank > 0  # the word itself
    assert {hit.name for hit in hits[1:]} == {"result", "production", "redeploy"}
    assert all(hit.rank == 0 for hit in hits[1:])  # only inside longer words
    assert hits[0].excerpt.count(f"{OPEN}deploy{CLOSE}") == 1

    ranked = await table.search("release OR staging")
    assert [hit.rank > 0 for hit in ranked] == [True, True]
    assert ranked[0].rank > ranked[1].rank and "release" in ranked[0].excerpt  # three times beats once


async def test_word_excerpts_mark_the_words_with_ts_headline(table: Table) -> None:
    (hit,) = await table.search('"flaky test"')
    assert f"{OPEN}flaky{CLOSE} {OPEN}test{CLOSE}" in hit.excerpt
    hits = await table.search("chat-send")
    assert all(f"{OPEN}chat{CLOSE}-{OPEN}send{CLOSE}" in hit.excerpt for hit in hits), hits


async def test_values_are_bound_never_written_into_the_sql() -> None:
    hostile = "x'); DROP TABLE messages; -- 部署 ploy* \"a b\" NOT c"
    query = pg_search_query(hostile)
    assert query is not None
    for text in ("DROP", "ploy", "部署", "x'"):
        assert text not in query.condition and text not in query.rank and text not in query.headline
    assert len(pg_search_query("w " * MAX_QUERY_LENGTH).params) <= MAX_QUERY_LENGTH  # type: ignore[union-attr]


def test_nothing_searchable_is_no_query() -> None:
    for text in ("", "   ", "!?.,;", '""', "AND OR", "*", "\x00"):
        assert pg_search_query(text) is None, text

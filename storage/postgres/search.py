"""Full-text search on PostgreSQL (``PostgresStore.search``): the answers of ``storage/search/fulltext.py``.

The query language is the SQLite search's own, turned into SQL by ``storage/postgres/search_query.py``,
over the columns ``storage/postgres/schema.py`` keeps: the word index (``messages.words``: words of
the text, tool names and tool-call values, accents off, CJK runs as character pairs, the parts of
tokens joined by punctuation) and the vocabulary of those words with its trigram index
(``search_vocabulary``, ``storage/postgres/vocabulary.py``). A search runs as SQLite's does:

1. the words as typed (words, ``prefix*``, phrases, CJK of any length): index lookups, best first by
   ``ts_rank`` (ties: the older message first);
2. when they find fewer than ``limit`` messages and a term of 3 or more letters may lie inside longer
   words ("ploy" in "redeployment"), the query again with those terms also matching the vocabulary's
   words that contain them (at most ``MAX_EXPANSION``, shortest first), looked up in the word index.
   Its further hits follow the first ones, densest first: the share of the message's words that
   contain the term (SQLite ranks the words it found with BM25; a dense short message comes first
   there too).

Excerpts are cut and marked in Python by ``storage.search.fulltext.snippet`` from the content, the
tool calls as the index reads them, and the tool name, so both engines show the same excerpt.
"""

from __future__ import annotations

from typing import Any, Final

from storage.postgres.connection import Connection
from storage.postgres.schema import TEXT_SEARCH_CONFIG
from storage.postgres.search_query import PgSearchQuery, pg_search_query
from storage.records import SearchHit
from storage.search.fulltext import MAX_HITS, SearchOwner, search_hit
from storage.search.query import parse_query

__all__ = ["search", "statement"]

_RANKED: Final = """
    WITH hit AS (
        SELECT m.id, {rank} AS rank
        FROM messages AS m{sessions}
        WHERE ({condition}){where}
        ORDER BY rank DESC, m.id LIMIT $1
    )
    SELECT m.session_id, m.id, m.seq, m.role, m.content, m.tool_name, m.tool_calls::text, s.platform, m.created_at,
           s.title
    FROM hit JOIN messages AS m ON m.id = hit.id JOIN sessions AS s ON s.id = m.session_id
    ORDER BY hit.rank DESC, hit.id
"""
# The share of a message's words (counted with repeats) that contain one of the patterns.
_DENSITY: Final = """(SELECT coalesce(sum(cardinality(u.positions)) FILTER (WHERE u.lexeme LIKE ANY ({patterns}::text[])),
                     0)::real / greatest(sum(cardinality(u.positions)), 1) FROM unnest(m.words) AS u)"""
_LIKE_SPECIAL: Final = str.maketrans({"\\": "\\\\", "%": "\\%", "_": "\\_"})


async def search(
    conn: Connection, *, query: str, limit: int, platform: str | None, owner: SearchOwner | None
) -> list[SearchHit]:
    """``platform``: only that platform's sessions; ``owner``: only one person's or conversation's."""
    parsed = parse_query(query)
    if not parsed.expression or limit <= 0:
        return []
    limit = min(limit, MAX_HITS)
    where = _sessions(platform, owner)
    if where is None:
        return []
    words = _query(query, where, substrings=False)
    if words is None:
        return []
    rows = await _ranked(conn, words, where, limit)
    needles = words.needles
    if len(rows) < limit and parsed.substrings:
        inside = _query(query, where, substrings=True) or words  # the same text: never None here
        patterns = [_pattern(term) for term in parsed.substrings]
        seen = {row[1] for row in rows}
        more = await _ranked(conn, inside, where, limit, density=patterns)
        rows = [*rows, *(row for row in more if row[1] not in seen)][:limit]
        needles = inside.needles
    return [search_hit(row, needles) for row in rows]


class _Where:
    """The sessions a search may read, as SQL on ``s`` with its parameters from ``$2`` on."""

    def __init__(self, sql: str, params: tuple[str | None, ...]) -> None:
        self.sql, self.params = sql, params


def _sessions(platform: str | None, owner: SearchOwner | None) -> _Where | None:
    """None when the filters exclude each other (an owner on another platform than ``platform``)."""
    if owner is not None:
        if platform is not None and platform != owner.platform:
            return None
        if owner.user_id is not None:
            return _Where("s.platform = $2 AND s.user_id = $3", (owner.platform, owner.user_id))
        return _Where(
            "s.platform = $2 AND s.user_id IS NULL AND s.chat_id = $3 AND s.thread_id IS NOT DISTINCT FROM $4",
            (owner.platform, owner.chat_id, owner.thread_id),
        )
    if platform is not None:
        return _Where("s.platform = $2", (platform,))
    return _Where("", ())


def _query(text: str, where: _Where, *, substrings: bool) -> PgSearchQuery | None:
    return pg_search_query(
        text, content="m.content", vector="m.words", first=2 + len(where.params), cjk_pairs=True,
        config=TEXT_SEARCH_CONFIG, vocabulary=True, substrings=substrings,
    )  # fmt: skip


async def _ranked(
    conn: Connection, query: PgSearchQuery, where: _Where, limit: int, *, density: list[str] | None = None
) -> list[Any]:
    sql, params = _statement(query, where, limit, density=density)
    return list(await conn.fetch(sql, *params))


def statement(
    text: str, *, limit: int = 20, platform: str | None = None, owner: SearchOwner | None = None,
    substrings: bool = False,
) -> tuple[str, list[Any]] | None:  # fmt: skip
    """The SQL and parameters of one pass of a search (the first, or with ``substrings`` the second), for
    looking at its plan; None when the search would not run."""
    where = _sessions(platform, owner)
    query = _query(text, where, substrings=substrings) if where is not None else None
    if where is None or query is None:
        return None
    terms = parse_query(text).substrings if substrings else ()
    return _statement(query, where, limit, density=[_pattern(term) for term in terms] if terms else None)


def _pattern(term: str) -> str:
    return "%" + term.translate(_LIKE_SPECIAL) + "%"


def _statement(
    query: PgSearchQuery, where: _Where, limit: int, *, density: list[str] | None
) -> tuple[str, list[Any]]:
    params: list[Any] = [limit, *where.params, *query.params]
    rank = query.rank
    if density is not None:
        params.append(density)
        rank = f"{rank} + {_DENSITY.format(patterns=f'${len(params)}')}"
    sql = _RANKED.format(
        rank=rank,
        sessions=" JOIN sessions AS s ON s.id = m.session_id" if where.sql else "",
        condition=query.condition,
        where=f" AND {where.sql}" if where.sql else "",
    )
    return sql, params

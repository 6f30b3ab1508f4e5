"""Full-text search over messages, best match (BM25) first, each hit with a highlighted excerpt.

The ranking query touches only the index; message text is read for the hits
that are returned, and the excerpt is cut in Python around the first place a
query term occurs (content first, then tool-call arguments, then the tool
name). Highlights are marked ``«like this»``.

Substrings (``storage/search/words.py``): when the words as typed find fewer than
``limit`` messages and the query has a term of 3 or more letters, each such
term is looked up in the vocabulary of message words ("ploy" -> "deploy",
"redeployment", ...) and the query runs again with those words OR'ed in.
Hits of the words as typed come first, in their own rank order; then the
further hits of the widened query, in its rank order. 1- and 2-letter Latin
terms are never searched as substrings (only as words or ``prefix*``).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

import aiosqlite

from storage.search.call_text import readable_calls
from storage.search.cjk import CJK_CLASS
from storage.search.query import Needle, ParsedQuery, parse_query
from storage.records import SearchHit, tool_calls_from_json
from storage.search.words import words_containing

__all__ = ["HIGHLIGHT", "MAX_HITS", "SearchOwner", "search", "search_hit", "snippet"]

HIGHLIGHT: Final = ("«", "»")
_ELLIPSIS: Final = "…"
_BEFORE: Final = 60
_WIDTH: Final = 200
MAX_HITS: Final = 500
"""The most hits one search returns, whatever limit is asked for."""
_NOT_AFTER_WORD: Final = rf"(?<![^\W_{CJK_CLASS}])"  # word start; CJK next to a word counts as a boundary
_WORD_END: Final = rf"(?![^\W_{CJK_CLASS}])"

_HIT_COLUMNS: Final = """
    m.session_id, m.id, m.seq, m.role, m.content, m.tool_name, m.tool_calls, s.platform, m.created_at, s.title
"""
_SEARCH: Final = f"""
    WITH hit AS (
        SELECT rowid AS id, rank FROM messages_fts WHERE messages_fts MATCH ? ORDER BY rank LIMIT ?
    )
    SELECT {_HIT_COLUMNS}
    FROM hit JOIN messages AS m ON m.id = hit.id JOIN sessions AS s ON s.id = m.session_id
    ORDER BY hit.rank
"""
_SEARCH_SESSIONS: Final = f"""
    WITH hit AS (
        SELECT f.rowid AS id, f.rank AS rank
        FROM messages_fts AS f JOIN messages AS m ON m.id = f.rowid JOIN sessions AS s ON s.id = m.session_id
        WHERE f.messages_fts MATCH ? AND {{sessions}} ORDER BY f.rank LIMIT ?
    )
    SELECT {_HIT_COLUMNS}
    FROM hit JOIN messages AS m ON m.id = hit.id JOIN sessions AS s ON s.id = m.session_id
    ORDER BY hit.rank
"""
_SEARCH_PLATFORM: Final = _SEARCH_SESSIONS.format(sessions="s.platform = ?")
_SEARCH_PERSON: Final = _SEARCH_SESSIONS.format(sessions="s.platform = ? AND s.user_id = ?")
_SEARCH_CONVERSATION: Final = _SEARCH_SESSIONS.format(
    sessions="s.platform = ? AND s.user_id IS NULL AND s.chat_id = ? AND s.thread_id IS ?"
)


@dataclass(frozen=True, slots=True)
class SearchOwner:
    """Whose sessions a search may read: one person's (``user_id``: their DMs and per-user group
    sessions) or, without ``user_id``, one shared conversation's (``chat_id``, and ``thread_id``
    for a thread). The agent's session_search tool always searches with one."""

    platform: str
    user_id: str | None = None
    chat_id: str | None = None
    thread_id: str | None = None


async def search(
    conn: aiosqlite.Connection,
    *,
    query: str,
    limit: int = 20,
    platform: str | None = None,
    owner: SearchOwner | None = None,
) -> list[SearchHit]:
    """``platform``: only that platform's sessions; ``owner``: only one person's or conversation's."""
    parsed = parse_query(query)
    if not parsed.expression or limit <= 0:
        return []
    limit = min(limit, MAX_HITS)
    rows = await _ranked(conn, parsed, limit, platform, owner)
    if len(rows) < limit and parsed.substrings:
        words = {term: await words_containing(conn, term) for term in parsed.substrings}
        if any(found != [term] and found for term, found in words.items()):
            parsed = parsed.expanded(words)
            seen = {row[1] for row in rows}
            more = await _ranked(conn, parsed, limit, platform, owner)
            rows = [*rows, *(row for row in more if row[1] not in seen)][:limit]
    return [search_hit(row, parsed.needles) for row in rows]


def search_hit(row: Sequence[Any], needles: tuple[Needle, ...]) -> SearchHit:
    """A hit from a row of ``_HIT_COLUMNS`` (``tool_calls`` as JSON text), its excerpt marking ``needles``."""
    session_id, message_id, seq, role, content, tool_name, tool_calls, platform, created_at, title = row
    return SearchHit(
        session_id=session_id,
        message_id=message_id,
        seq=seq,
        role=role,
        snippet=snippet((content, _readable_calls(tool_calls), tool_name), needles),
        platform=platform,
        created_at=created_at,
        session_title=title,
    )


async def _ranked(
    conn: aiosqlite.Connection, parsed: ParsedQuery, limit: int, platform: str | None, owner: SearchOwner | None
) -> list[Any]:
    if owner is not None:
        if owner.user_id is not None:
            sql, where = _SEARCH_PERSON, (owner.platform, owner.user_id)
        else:
            sql, where = _SEARCH_CONVERSATION, (owner.platform, owner.chat_id, owner.thread_id)
        if platform is not None and platform != owner.platform:
            return []
    elif platform is not None:
        sql, where = _SEARCH_PLATFORM, (platform,)
    else:
        sql, where = _SEARCH, ()
    return list(await conn.execute_fetchall(sql, (parsed.expression, *where, limit)))


def _readable_calls(tool_calls_json: str | None) -> str | None:
    """Tool calls as the index reads them (``storage/search/call_text.py``), for excerpts."""
    return readable_calls(tool_calls_from_json(tool_calls_json))


def _pattern(needles: tuple[Needle, ...]) -> re.Pattern[str] | None:
    alternatives = []
    for needle in sorted(needles, key=lambda n: len(n.text), reverse=True):
        text = re.escape(_fold_in_place(needle.text))
        if needle.cjk:
            alternatives.append(text)
        elif needle.substring:  # the whole word it was found inside
            alternatives.append(rf"[^\W_{CJK_CLASS}]*{text}[^\W_{CJK_CLASS}]*")
        else:
            end = rf"[^\W_{CJK_CLASS}]*" if needle.prefix else _WORD_END
            alternatives.append(f"{_NOT_AFTER_WORD}{text}{end}")
    return re.compile("|".join(alternatives), re.IGNORECASE) if alternatives else None


class _Folding(dict[int, int]):
    """For ``str.translate``: a character's code -> the code of its letter without accents (é -> e), found once."""

    def __missing__(self, code: int) -> int:
        parts = unicodedata.normalize("NFD", chr(code))
        base = ord(parts[0]) if len(parts) > 1 and all(unicodedata.combining(part) for part in parts[1:]) else code
        self[code] = base
        return base


_FOLDING: Final = _Folding()


def _fold_in_place(text: str) -> str:
    """``text`` with accents taken off letter by letter, as the index's tokenizer does; the same length,
    so a position in it is the same position in ``text`` (``storage.search.words.fold`` also lower-cases and
    drops combining marks, which moves positions: right for comparing words, not for excerpts)."""
    return text if text.isascii() else text.translate(_FOLDING)


def _highlight(window: str, pattern: re.Pattern[str]) -> str:
    parts, done = [], 0
    for match in pattern.finditer(_fold_in_place(window)):
        parts += [window[done : match.start()], HIGHLIGHT[0], window[match.start() : match.end()], HIGHLIGHT[1]]
        done = match.end()
    return "".join(parts) + window[done:]


def snippet(texts: tuple[str | None, ...], needles: tuple[Needle, ...]) -> str:
    """An excerpt of the first text where a needle occurs, needles highlighted; else the start of the first text."""
    pattern = _pattern(needles)
    for text in texts:
        if not text or pattern is None:
            continue
        match = pattern.search(_fold_in_place(text))
        if match is not None:
            return _excerpt(text, match.start(), pattern)
    first = next((text for text in texts if text), "")
    return _excerpt(first, 0, None)


def _excerpt(text: str, position: int, pattern: re.Pattern[str] | None) -> str:
    start = max(0, position - _BEFORE)
    if start > 0:
        space = text.find(" ", start, position)
        start = space + 1 if space != -1 else start
    end = min(len(text), start + _WIDTH)
    if end < len(text):
        space = text.rfind(" ", position, end)
        end = space if space > position else end
    window = " ".join(text[start:end].split())
    if pattern is not None:
        window = _highlight(window, pattern)
    return (_ELLIPSIS if start > 0 else "") + window + (_ELLIPSIS if end < len(text) else "")

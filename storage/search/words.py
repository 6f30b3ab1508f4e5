"""Substring search inside Latin words, through a vocabulary of the words messages use.

The word index (``messages_fts``, unicode61) finds whole words and word
prefixes. To find "ploy" inside "redeployment" the store keeps every distinct
word of the messages in ``search_words``, with a trigram index over that
vocabulary (``search_words_tri``). A substring query then takes two steps:

1. the trigram index lists the known words containing the substring
   ("deploy", "redeployment", ...), and
2. the word index runs with the query term replaced by those words, OR'ed, so
   ranking (BM25), operators, the platform filter and snippets work exactly as
   for any word query.

Why a vocabulary instead of a trigram index over the messages themselves: the
vocabulary grows far slower than the text (a new message mostly repeats known
words), so keeping it current means cutting new messages into words and
writing only the words never seen before, instead of indexing every
three-character window of every message, and the trigram index stays a few
megabytes. The append path is unchanged: no trigger or column was added to
``messages``.

The vocabulary is filled in the background (``storage/search/indexer.py``), in
slices of messages above a watermark (``search_progress.words_through``).
Messages above the watermark (the tail: a few rows when the writer is idle, up
to ``TAIL_ROWS`` less 10,000 during a burst of appends, when the indexer holds
back) are scanned with ``LIKE`` when a query runs, so a message is found the
moment its append returns. The scan grows with the tail (``bench.storage``
reports it), and is paid only while a burst lasts. A
stale word (one no message contains any more) only costs a wasted OR branch,
so removing messages never has to touch the vocabulary.

Limits, by design: the substring must lie inside one word as unicode61 cuts
them (letters and digits; ``my-app`` is two words), be 3 characters or more
(shorter terms stay whole-word/prefix queries), and words longer than
``MAX_WORD`` characters (hashes, base64) are not in the vocabulary. At most
``MAX_EXPANSION`` words are used per term, shortest first. In the unindexed
tail, ``LIKE`` folds ASCII case only, so accented text there is found once
the indexer has passed it.
"""

from __future__ import annotations

import json
import re
import sqlite3
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Final

import aiosqlite

from storage.search.call_text import readable_calls_sql
from storage.search.cjk import CJK_CLASS
from storage.schema import TOKENIZER

__all__ = [
    "MAX_EXPANSION",
    "MAX_WORD",
    "MIN_SUBSTRING",
    "TAIL_ROWS",
    "Slice",
    "backlog",
    "fold",
    "message_words",
    "read_slice",
    "record_words",
    "words_containing",
]

MIN_SUBSTRING: Final = 3
"""Shortest query term searched as a substring (the trigram index cannot look up less)."""
MIN_WORD: Final = MIN_SUBSTRING + 1
"""Shorter words need no vocabulary entry: a 3-letter word contains a 3-letter term only if it is the term."""
MAX_WORD: Final = 64
MAX_EXPANSION: Final = 64
"""Words one query term may expand to (the shortest, i.e. closest to the term, are kept)."""
TAIL_ROWS: Final = 50_000
"""The most unindexed messages a query scans; past that, only what the indexer has covered is found.

The word indexer (``storage/search/indexer.py``) keeps the tail shorter than this even during a burst."""

_CJK_ONLY: Final = re.compile(f"[{CJK_CLASS}]+")
_WORD: Final = re.compile(r"[^\W_]+")


def fold(text: str) -> str:
    """Lower case without diacritics, as the word index compares words (``"Déployé"`` -> ``"deploye"``)."""
    text = text.lower()
    if text.isascii():
        return text
    decomposed = unicodedata.normalize("NFD", text)
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def message_words(texts: Iterable[str | None]) -> set[str]:
    """The vocabulary entries of a message's searchable texts (content, tool name, tool-call JSON).

    Words are cut as the word index cuts them (runs of letters and digits, CJK
    included: CJK alone has its own pair index, so pure-CJK words are left out).
    """
    words: set[str] = set()
    for text in texts:
        if text:
            words.update(
                word for word in _WORD.findall(fold(text))
                if MIN_WORD <= len(word) <= MAX_WORD and not _CJK_ONLY.fullmatch(word)
            )  # fmt: skip
    return words


# -- the background indexer's side ------------------------------------------------------------------
# A slice is cut into words by SQLite itself, with the word index's own tokenizer,
# in a scratch full-text table private to the indexer's connection (TEMP: no lock
# on the database; the sqlite3 module lets go of the GIL meanwhile). So the
# vocabulary holds exactly the words the word index knows, and no Python loop
# runs over message text.

_SCRATCH: Final = (
    f"""CREATE VIRTUAL TABLE IF NOT EXISTS temp.word_scratch USING fts5(content, tool_name, tool_calls,
        content='', detail='none', tokenize='{TOKENIZER}')""",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.word_scratch_terms USING fts5vocab('temp', 'word_scratch', 'row')",
)
_CLEAR_SCRATCH: Final = "INSERT INTO temp.word_scratch(word_scratch) VALUES ('delete-all')"
_SLICE_END: Final = """
    SELECT max(id), count(*) FROM (
        SELECT id FROM messages
        WHERE id > (SELECT words_through FROM search_progress WHERE singleton = 1)
        ORDER BY id LIMIT ?
    )
"""
_FILL_SCRATCH: Final = f"""
    INSERT INTO temp.word_scratch (rowid, content, tool_name, tool_calls)
    SELECT id, content, tool_name, {readable_calls_sql("tool_calls")} FROM messages
    WHERE id > (SELECT words_through FROM search_progress WHERE singleton = 1) AND id <= ?
"""
_BACKLOG: Final = """
    SELECT max(0, coalesce((SELECT max(id) FROM messages), 0) - words_through)
    FROM search_progress WHERE singleton = 1
"""
_NEW_WORDS: Final = f"""
    SELECT term FROM temp.word_scratch_terms
    WHERE length(term) BETWEEN {MIN_WORD} AND {MAX_WORD}
      AND NOT EXISTS (SELECT 1 FROM main.search_words WHERE word = term)
"""


@dataclass(frozen=True, slots=True)
class Slice:
    """What one slice of unindexed messages adds to the vocabulary."""

    through: int
    """The last message id of the slice: the watermark once ``words`` are recorded."""
    rows: int
    words: tuple[str, ...]
    """Words of the slice not in the vocabulary yet."""


def read_slice(conn: sqlite3.Connection, *, rows: int) -> Slice:
    """The new words of up to ``rows`` messages above the watermark (nothing is written to the database)."""
    for statement in _SCRATCH:
        conn.execute(statement)
    through, count = conn.execute(_SLICE_END, (rows,)).fetchone()
    if not count:
        return Slice(through=0, rows=0, words=())
    conn.execute(_CLEAR_SCRATCH)  # in case an earlier slice was interrupted
    conn.execute(_FILL_SCRATCH, (through,))
    try:
        found = conn.execute(_NEW_WORDS).fetchall()
    finally:
        conn.execute(_CLEAR_SCRATCH)
    words = tuple(sorted(term for (term,) in found if not _CJK_ONLY.fullmatch(term)))
    return Slice(through=int(through), rows=int(count), words=words)


def backlog(conn: sqlite3.Connection) -> int:
    """How many messages lie above the watermark, at most (two index probes; ids may have gaps)."""
    row = conn.execute(_BACKLOG).fetchone()
    return int(row[0] or 0)


def record_words(conn: sqlite3.Connection, *, words: Sequence[str], through: int) -> None:
    """Write operation: add ``words`` to the vocabulary and move the watermark up to ``through``."""
    if words:
        conn.execute("INSERT OR IGNORE INTO search_words (word) SELECT value FROM json_each(?)", (json.dumps(words),))
    conn.execute(
        "UPDATE search_progress SET words_through = max(words_through, ?) WHERE singleton = 1", (through,)
    )


# -- the query's side -------------------------------------------------------------------------------

# One round trip per term: vocabulary words containing it (trigram index), then the
# searchable texts of unindexed messages that contain it (bounded LIKE scan).
_LOOKUP: Final = f"""
    SELECT 0, word FROM (
        SELECT w.word AS word FROM search_words_tri AS t JOIN search_words AS w ON w.id = t.rowid
        WHERE search_words_tri MATCH ?1 ORDER BY length(w.word), w.word LIMIT {MAX_EXPANSION}
    )
    UNION ALL
    SELECT 1, json_array(m.content, m.tool_name, calls) FROM (
        SELECT content, tool_name, {readable_calls_sql("tool_calls")} AS calls FROM messages
        WHERE id > (
            SELECT max(p.words_through, coalesce((SELECT max(id) FROM messages), 0) - {TAIL_ROWS})
            FROM search_progress AS p WHERE p.singleton = 1
        )
    ) AS m
    WHERE m.content LIKE ?2 OR m.tool_name LIKE ?2 OR m.calls LIKE ?2
"""


async def words_containing(conn: aiosqlite.Connection, term: str) -> list[str]:
    """Words of the messages that contain ``term`` (already folded, ``MIN_SUBSTRING`` letters or more).

    Indexed words come first, shortest first; at most ``MAX_EXPANSION`` in all.
    """
    rows = await conn.execute_fetchall(_LOOKUP, ('"' + term + '"', f"%{term}%"))
    found: dict[str, None] = {}
    tail: set[str] = set()
    for kind, value in rows:
        if kind == 0:
            found[value] = None
        else:
            tail |= message_words(json.loads(value))
    for word in sorted((w for w in tail if term in w), key=lambda w: (len(w), w)):
        found.setdefault(word, None)
    return list(found)[:MAX_EXPANSION]

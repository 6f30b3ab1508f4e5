"""The vocabulary on PostgreSQL: every distinct word the messages use, where search finds parts of words.

As on SQLite (``storage/search/words.py``), "ploy" is found inside "redeployment" in two steps: a
trigram index over ``search_vocabulary`` lists the known words that contain it, and the word index
(``messages.words``) finds the messages holding those words. The vocabulary grows far slower than
the text (a new message mostly repeats known words), so keeping it costs an append a probe of the
primary key per distinct word and a few trigram keys for the rare new one, where a trigram index
over each message's words took some 300 keys a message.

Unlike SQLite's, the vocabulary is written in the statement that appends the messages
(``storage/postgres/messages.py``), so a word is found the moment its append returns, and no
message is ever left to scan. Whatever writes messages another way fills it from them with
``fill``: ``storage migrate`` after its copy, the benchmark after its preload. A word no message
holds any more only costs a wasted branch of a query, so removing messages leaves it alone.

The words are the lexemes of ``messages.words`` as they are (lower case, no accents), of
``MIN_WORD`` to ``MAX_WORD`` characters and not made of CJK only (the word index finds CJK by its
character pairs), the same rule as SQLite's ``message_words``.
"""

from __future__ import annotations

from typing import Final

from storage.postgres.connection import Connection
from storage.search.cjk import CJK_CLASS
from storage.search.words import MAX_EXPANSION, MAX_WORD, MIN_WORD

__all__ = ["KEPT", "expansion", "fill"]

KEPT: Final = f"""char_length({{word}}) BETWEEN {MIN_WORD} AND {MAX_WORD}
    AND {{word}} !~ '^[{CJK_CLASS}]+$'"""
"""The condition on a lexeme ``{word}`` (an SQL expression) to be a word of the vocabulary."""

_FILL: Final = f"""
    INSERT INTO search_vocabulary (word)
    SELECT DISTINCT w.word COLLATE "C" FROM messages AS m, unnest(tsvector_to_array(m.words)) AS w(word)
    WHERE {KEPT.format(word="w.word")}
    ON CONFLICT DO NOTHING
"""


def expansion(term: str) -> str:
    """A ``tsquery`` (SQL) OR-ing the vocabulary words that contain ``term`` (a bound parameter holding a LIKE
    pattern body, already folded and escaped), at most ``MAX_EXPANSION`` of them, shortest first. The words go in
    as lexemes, quoted, never parsed again; no word at all gives the empty query, which matches nothing."""
    return f"""(SELECT coalesce(string_agg(
            '''' || replace(replace(v.word, '\\', '\\\\'), '''', '''''') || '''', ' | '), '')::tsquery
        FROM (SELECT word FROM search_vocabulary WHERE word LIKE '%' || {term}::text || '%'
              ORDER BY char_length(word), word LIMIT {MAX_EXPANSION}) AS v)"""


async def fill(conn: Connection) -> None:
    """Add the words of every message to the vocabulary (for messages written by other means than an append)."""
    await conn.execute(_FILL)

"""The search query language of ``storage/search/query.py`` as a PostgreSQL condition, rank and excerpt.

What a person typed is parsed once, by ``parse_query`` (the SQLite search's own parser). Its
output is a small language this module wrote itself: double-quoted strings (``*`` after one for
a prefix), ``AND``/``OR``/``NOT`` and parentheses, plus the terms that may also match inside
longer words. Each quoted string becomes one condition:

* words become ``vector @@ to_tsquery('simple', $n)``, the string passed as ONE single-quoted
  ``tsquery`` operand (``':*'`` after it for a prefix). PostgreSQL cuts a quoted operand with the
  same parser as ``to_tsvector('simple', content)`` cut the message, and joins the pieces with
  ``<->``: ``"chat-send"`` -> ``'chat-send' <-> 'chat' <-> 'send'``, ``"P2.2"`` -> ``'p2.2'``,
  ``"flaky test"`` -> ``'flaky' <-> 'test'``; so a term is cut exactly as the text it should find.
* CJK runs become ``content ILIKE '%' || $n || '%'`` (the default parser sees a whole CJK run as
  one word), which a GIN ``gin_trgm_ops`` index on ``content`` serves from three characters; one
  and two characters give the index no trigram, so those are checked on every row the rest of
  the condition leaves (correct, but a sequential scan: measured 8.5 ms at 20,000 rows). With
  ``cjk_pairs`` (the vector also holds ``cjk_tokens``' pairs) they are tsquery pair lookups.
  Latin text glued to CJK ("用docker部署") is one word for the parser too, so without pairs it is
  searched the same way inside such a term.
* a term with punctuation inside ("chat-send", "my-app.config.ts") may sit in text the parser
  reads as one URL, host or file name ("deployment.apps/chat-send": no lexeme "chat-send"), so
  it is also searched as written: ``(vector @@ ... OR content ILIKE '%chat-send%')``.
* a bare single word of 3 or more letters (``ploy``, ``config*``) also matches inside longer
  words: ``(vector @@ ... OR content ILIKE '%ploy%')``.

``FTS5``'s ``a NOT b`` is ``a AND NOT b``; the precedence of NOT, AND, OR is the same in SQL.
Every value is a bound parameter; only the column names the caller passes and text of this
module reach the SQL. Word hits rank by ``ts_rank`` over every word term not excluded by NOT;
hits found only as parts of words or CJK rank 0 (the caller orders them after, e.g. newest
first). The excerpt is ``ts_headline`` around the words, marked ``«like this»``; where it marks
nothing (a CJK or part-of-word hit), ``excerpt`` cuts and marks one in Python, as SQLite does.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from storage.postgres.vocabulary import expansion
from storage.search.cjk import has_cjk
from storage.search.fulltext import HIGHLIGHT, snippet
from storage.search.query import Needle, parse_query
from storage.search.words import fold

__all__ = ["HEADLINE_OPTIONS", "PgSearchQuery", "excerpt", "pg_search_query"]

HEADLINE_OPTIONS: Final = f"StartSel={HIGHLIGHT[0]}, StopSel={HIGHLIGHT[1]}, MaxWords=35, MinWords=15, MaxFragments=1"
_PIECE: Final = re.compile(r'"((?:[^"]|"")*)"(\*?)|([()])|\b(AND|OR|NOT)\b')
_JOINED: Final = re.compile(r"[^\W_][^\w\s]+[^\W_]")  # punctuation inside a term: "chat-send", "P2.2"
_LIKE_SPECIAL: Final = re.compile(r"([\\%_])")


@dataclass(frozen=True, slots=True)
class PgSearchQuery:
    """A parsed query as SQL: ``condition`` (boolean), ``rank`` (real) and ``headline`` (text or NULL),
    with placeholders ``$first`` .. ``$first + len(params) - 1`` to bind ``params`` to."""

    condition: str
    rank: str
    headline: str
    params: tuple[str, ...]
    needles: tuple[Needle, ...]
    """What ``excerpt`` marks where ``ts_headline`` marked nothing."""


class _Builder:
    def __init__(
        self, *, content: str, vector: str, first: int, cjk_pairs: bool, config: str, vocabulary: bool
    ) -> None:  # fmt: skip
        self.content, self.vector, self.first, self.cjk_pairs = content, vector, first, cjk_pairs
        self.config, self.vocabulary = config, vocabulary
        self.params: list[str] = []
        self.ranked: list[str] = []  # tsquery operands of the terms not excluded

    def bind(self, value: str) -> str:
        self.params.append(value)
        return f"${self.first + len(self.params) - 1}"

    def words(self, operand: str, *, negated: bool) -> str:
        if not negated:
            self.ranked.append(operand)
        return f"{self.vector} @@ to_tsquery('{self.config}', {self.bind(operand)}::text)"

    def inside(self, text: str) -> str:
        if self.vocabulary:  # the words holding it, folded as the index folded them
            return f"{self.vector} @@ {expansion(self.bind(_like(fold(text))))}"
        return f"{self.content} ILIKE '%' || {self.bind(_like(text))}::text || '%'"

    def expression(self, expression: str, *, negated: bool) -> str:
        """One term of ``parse_query``'s output (a quoted string, or a group of them) as SQL."""
        pieces = _PIECE.findall(expression)
        glued = not self.cjk_pairs and any(quoted and has_cjk(quoted) for quoted, _, _, _ in pieces)
        sql: list[str] = []
        for quoted, star, paren, operator in pieces:
            if paren or operator:
                sql.append(paren or operator)
                continue
            text = quoted.replace('""', '"')
            if has_cjk(text) and self.cjk_pairs:  # the index tokens, as a phrase ("山" alone: a prefix)
                operand = " <-> ".join(_operand(token, prefix=bool(star)) for token in text.split())
                sql.append(self.words(operand, negated=negated))
                continue
            if has_cjk(text):
                sql.append(self.inside(_cjk_run(text)))
                continue
            condition = self.words(_operand(text, prefix=bool(star)), negated=negated)
            literal = glued or _JOINED.search(text) is not None
            sql.append(f"({condition} OR {self.inside(text)})" if literal else condition)
        return "(" + " ".join(sql) + ")"


def _like(text: str) -> str:
    return _LIKE_SPECIAL.sub(r"\\\1", text)  # LIKE's own escape character is the backslash


def _operand(text: str, *, prefix: bool) -> str:
    """``text`` as one single-quoted tsquery operand, whatever it holds."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'" + (":*" if prefix else "")


def _cjk_run(text: str) -> str:
    """The CJK run ``parse_query`` wrote as its index tokens: ``"大别 别山"`` -> ``"大别山"``."""
    tokens = text.split()
    return tokens[0] + "".join(token[-1] for token in tokens[1:])


def pg_search_query(
    text: str,
    *,
    content: str = "content",
    vector: str = "search_vector",
    first: int = 1,
    cjk_pairs: bool = False,
    config: str = "simple",
    vocabulary: bool = False,
    substrings: bool = True,
) -> PgSearchQuery | None:
    """What the person typed as SQL over the columns ``content`` (text) and ``vector``
    (``to_tsvector('simple', content)``); None when nothing searchable was typed.

    ``cjk_pairs``: ``vector`` also holds the CJK pair stream of ``storage.search.cjk.cjk_tokens``
    (``to_tsvector('simple', content || ' ' || coalesce(pairs, ''))``), so CJK of any length is an
    index lookup of pairs, as in SQLite, instead of an ``ILIKE`` the trigram index cannot serve
    below three characters.

    ``config``: the text search configuration ``vector`` was parsed with. ``vocabulary``: parts of words
    are looked for in ``search_vocabulary`` (``storage/postgres/vocabulary.py``), the words found then
    in ``vector``, instead of in ``content``; the query text is folded (lower case, no accents) as the
    words are. ``substrings=False``: the words as typed only, no part-of-word lookups
    (the first pass of a search; the second one, with them, runs when the first finds too few)."""
    parsed = parse_query(text)
    if not parsed.parts:
        return None
    build = _Builder(
        content=content, vector=vector, first=first, cjk_pairs=cjk_pairs, config=config, vocabulary=vocabulary
    )  # fmt: skip
    sql: list[str] = []
    inside: list[Needle] = []
    negated = False
    for part in parsed.parts:
        if isinstance(part, str) and part in ("AND", "OR", "NOT"):
            negated = part == "NOT"
            sql.append("AND NOT" if negated else part)
        elif isinstance(part, str):
            sql.append(build.expression(part, negated=negated))
        elif not substrings:
            sql.append(build.expression(part.expression, negated=negated))
        else:  # a bare word that may also lie inside longer words
            word = build.expression(part.expression, negated=negated)
            sql.append(f"({word} OR {build.inside(part.word)})")
            inside.append(Needle(part.word, substring=True))
    if build.ranked:
        ranked = build.bind(" | ".join(build.ranked))
        rank = f"ts_rank({vector}, to_tsquery('{config}', {ranked}::text))"
        headline = f"ts_headline('{config}', {content}, to_tsquery('{config}', {ranked}::text), '{HEADLINE_OPTIONS}')"
    else:
        rank, headline = "0::real", "NULL::text"
    return PgSearchQuery(" ".join(sql), rank, headline, tuple(build.params), parsed.needles + tuple(inside))


def excerpt(headline: str | None, content: str, needles: Sequence[Needle]) -> str:
    """The excerpt of a hit: ``ts_headline``'s where it marked a word, else one cut around the first
    CJK run or part of a word, marked as the SQLite search marks it."""
    if headline and headline.count(HIGHLIGHT[0]) > content.count(HIGHLIGHT[0]):
        return headline
    return snippet((content,), tuple(needles))

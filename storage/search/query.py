"""Turning what a person typed into a safe FTS5 query.

Raw user text never reaches ``MATCH``. The text is split into terms, each
term becomes one or more double-quoted FTS5 strings, and only the operators
this module writes itself appear outside quotes. So quotes, colons, hyphens,
``*``, ``^``, parentheses and stray operators can never break the syntax or
select a column.

What people can use:

* ``deploy docker``: both words (implicit AND).
* ``"exact phrase"``: a phrase; an unbalanced quote is ignored.
* ``deploy*``: a prefix (a ``*`` elsewhere in a term is dropped).
* ``docker OR podman``, ``docker NOT compose``: upper-case operators between
  terms; a dangling or repeated operator is dropped, except a ``NOT`` with no
  term before it, which is searched as the word (``NOT FOUND``): dropping it
  would find what the user asked to leave out.
* ``my-app.config.ts``, ``P2.2``: punctuation splits the term into a phrase of
  its parts, as the index tokenized them.
* CJK of any length, also glued to other text (``用docker部署``): see
  ``storage/search/cjk.py``.
* Substrings of words: a bare single-word term of ``MIN_SUBSTRING`` (3) or
  more letters (``ploy``, ``config*``) may also match inside longer words
  ("redeployment"); ``ParsedQuery.substrings`` lists those terms and
  ``ParsedQuery.expanded()`` rewrites the expression with the words they were
  found in (``storage/search/words.py``). Quoted phrases, terms with punctuation
  inside (``my-app``), terms after ``NOT`` and 1-2 letter terms stay
  whole-word (or prefix) queries.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from storage.search.cjk import query_tokens, split_runs
from storage.search.words import MIN_SUBSTRING, fold

__all__ = ["MAX_QUERY_LENGTH", "Needle", "ParsedQuery", "parse_query"]

MAX_QUERY_LENGTH: Final = 1000
_OPERATORS: Final = frozenset({"AND", "OR", "NOT"})
_CHUNK: Final = re.compile(r'"([^"]*)"|([^\s"]+)')
_WORD_CHARS: Final = re.compile(r"[^\W_]+")
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")  # FTS5 reads a NUL as the end of the query; SQLite takes no lone surrogate


@dataclass(frozen=True, slots=True)
class Needle:
    """Something to highlight in a hit: a word (matched at a word start), a CJK run or a substring (anywhere)."""

    text: str
    prefix: bool = False
    cjk: bool = False
    substring: bool = False


@dataclass(frozen=True, slots=True)
class _Slot:
    """A term that may also be searched as a substring: its own expression, and the folded word."""

    expression: str
    word: str


@dataclass(frozen=True, slots=True)
class ParsedQuery:
    expression: str
    """The FTS5 MATCH expression; empty when nothing searchable was typed."""
    needles: tuple[Needle, ...]
    parts: tuple[str | _Slot, ...] = ()
    """Operators, expressions and substring slots, in order (``expression`` is them rendered)."""

    @property
    def substrings(self) -> tuple[str, ...]:
        """The folded terms that may be searched as substrings, each once, in the order typed."""
        return tuple(dict.fromkeys(part.word for part in self.parts if isinstance(part, _Slot)))

    def expanded(self, words: Mapping[str, Sequence[str]]) -> ParsedQuery:
        """The query with each substring term also matching the whole ``words[term]`` it was found inside."""
        rendered: list[str] = []
        for part in self.parts:
            if isinstance(part, _Slot):
                extra = [_quote(word) for word in words.get(part.word, ()) if word != part.word]
                rendered.append("(" + " OR ".join([part.expression, *extra]) + ")" if extra else part.expression)
            else:
                rendered.append(part)
        needles = self.needles + tuple(Needle(term, substring=True) for term in self.substrings if words.get(term))
        return ParsedQuery(" ".join(rendered), needles, self.parts)


def _quote(text: str) -> str:
    return '"' + text.replace('"', '""') + '"'


def _slot(expression: str, text: str) -> str | _Slot:
    """``expression`` as a substring slot when the bare term ``text`` is a single long enough word."""
    words = _WORD_CHARS.findall(text)
    if len(words) != 1 or split_runs(text) != [(text, False)]:
        return expression
    word = fold(words[0])
    if len(word) < MIN_SUBSTRING or not _WORD_CHARS.fullmatch(word):
        return expression
    return _Slot(expression, word)


def _term(text: str, *, prefix: bool) -> tuple[str | None, list[Needle]]:
    """One FTS5 sub-expression for one typed term (or quoted phrase), and what to highlight for it."""
    pieces: list[str] = []
    needles: list[Needle] = []
    for segment, is_cjk in split_runs(text):
        if is_cjk:
            tokens, is_prefix = query_tokens(segment)
            pieces.append(_quote(" ".join(tokens)) + ("*" if is_prefix else ""))
            needles.append(Needle(segment, cjk=True))
            continue
        words = _WORD_CHARS.findall(segment)
        if words:
            pieces.append(_quote(segment.strip()))
            needles.extend(Needle(word) for word in words)
    if not pieces:
        return None, []
    if prefix and not needles[-1].cjk:
        pieces[-1] += "*"
        needles[-1] = Needle(needles[-1].text, prefix=True)
    expression = pieces[0] if len(pieces) == 1 else "(" + " AND ".join(pieces) + ")"
    return expression, needles


def _balanced(text: str) -> str:
    """Drop the last double quote when there is an odd number of them."""
    if text.count('"') % 2 == 0:
        return text
    cut = text.rfind('"')
    return text[:cut] + " " + text[cut + 1 :]


def parse_query(text: str) -> ParsedQuery:
    """``parse_query('deploy* "my app" OR x-y')`` -> ``'"deploy"* AND "my app" OR "x-y"'``."""
    parts: list[str | _Slot] = []  # terms and operators, alternating once cleaned
    needles: list[Needle] = []
    for phrase, bare in _CHUNK.findall(_balanced(_CONTROL.sub(" ", text[:MAX_QUERY_LENGTH]))):
        follows_term = bool(parts) and parts[-1] not in _OPERATORS
        if bare in _OPERATORS and (follows_term or bare != "NOT"):
            if follows_term:
                parts.append(bare)
            continue
        # A NOT with no term before it excludes nothing (FTS5 has no "everything but"): dropping it
        # would search for what the user wanted left out, so it is taken as the word ("NOT FOUND").
        raw = phrase if not bare else bare
        prefix = bool(bare) and bare.endswith("*")
        expression, term_needles = _term(raw.replace("*", " ") if bare else raw, prefix=prefix)
        if expression is None:
            continue
        if parts and parts[-1] not in _OPERATORS:
            parts.append("AND")  # FTS5 accepts implicit AND between phrases, not next to a group
        negated = bool(parts) and parts[-1] == "NOT"
        parts.append(_slot(expression, raw.replace("*", " ")) if bare and not negated else expression)
        needles.extend(term_needles)
    while parts and parts[-1] in _OPERATORS:
        parts.pop()
    rendered = " ".join(part.expression if isinstance(part, _Slot) else part for part in parts)
    return ParsedQuery(rendered, tuple(needles), tuple(parts))

"""CJK text as overlapping character pairs, so short CJK queries are index lookups.

Chinese and Japanese are written without spaces, so a word tokenizer sees a
whole run ("我们部署了服务") as one token and a query for "部署" finds nothing.
A trigram index only helps from three characters up. Instead each CJK run is
indexed as its overlapping pairs plus its last character on its own:

    "大别山"  ->  "大别 别山 山"

Every character of the run then starts some token, so

* a 1-character query is a prefix query (``"山"*``),
* a 2-character query is one token (``"别山"``),
* a longer query is a phrase of pairs (``"大别 别山"``), whose tokens are
  adjacent only inside one run; the lone last character sits between runs,
  so a phrase never matches across them.

Latin words glued to CJK ("用docker部署") are one token for the word tokenizer
too, so the text between runs is kept, in place, in the same stream:
"用 docker 部署 署". Messages store this stream in the ``search_cjk`` column
(NULL for text with no CJK at all), which the full-text index covers along
with the content.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Final

from storage.search.call_text import readable_calls
from storage.records import ToolCallRecord

__all__ = ["CJK_CLASS", "cjk_tokens", "has_cjk", "message_cjk_tokens", "query_tokens", "split_runs"]

# The characters of a CJK run (a regex class body): Han (with extensions and
# compatibility ideographs), kana, Hangul syllables and jamo, halfwidth katakana.
# Punctuation (U+3000-U+303F, U+30FB) stays out: the word tokenizer treats it
# as a separator.
CJK_CLASS: Final = (
    "\u1100-\u11ff\u3041-\u3096\u309d-\u309f\u30a1-\u30fa\u30fc-\u30ff\u3131-\u318e"
    "\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\ua960-\ua97f\uac00-\ud7a3\ud7b0-\ud7ff"
    "\uf900-\ufaff\uff66-\uff9d\U00020000-\U0003134f"
)
_RUN: Final = re.compile(f"[{CJK_CLASS}]+")
_ANY: Final = re.compile(f"[{CJK_CLASS}]")


def has_cjk(text: str) -> bool:
    return not text.isascii() and _ANY.search(text) is not None


def split_runs(text: str) -> list[tuple[str, bool]]:
    """``text`` cut into alternating pieces: ``(piece, is_cjk_run)``, empty pieces left out."""
    pieces: list[tuple[str, bool]] = []
    position = 0
    for match in _RUN.finditer(text):
        if match.start() > position:
            pieces.append((text[position : match.start()], False))
        pieces.append((match.group(), True))
        position = match.end()
    if position < len(text):
        pieces.append((text[position:], False))
    return pieces


def _run_tokens(run: str) -> list[str]:
    pairs = [run[i : i + 2] for i in range(len(run) - 1)]
    pairs.append(run[-1])
    return pairs


def cjk_tokens(texts: Iterable[str | None]) -> str | None:
    """The ``search_cjk`` value for a message's searchable texts; None when there is no CJK."""
    parts: list[str] = []
    for text in texts:
        if not text or not has_cjk(text):
            continue
        position = 0
        for match in _RUN.finditer(text):
            parts.append(text[position : match.start()])
            parts.extend(_run_tokens(match.group()))
            position = match.end()
        parts.append(text[position:])
    return " ".join(part for part in parts if part) if parts else None


def query_tokens(run: str) -> tuple[list[str], bool]:
    """Index tokens that find one CJK query run, and whether they form a prefix query.

    ``"山"`` -> (["山"], True); ``"别山"`` -> (["别山"], False);
    ``"大别山"`` -> (["大别", "别山"], False).
    """
    if len(run) == 1:
        return [run], True
    return [run[i : i + 2] for i in range(len(run) - 1)], False


def message_cjk_tokens(content: str, tool_name: str | None, tool_calls: Sequence[ToolCallRecord]) -> str | None:
    """The ``search_cjk`` value of one message: its content, tool name and tool calls (as the index reads them)."""
    calls = readable_calls(tool_calls) if any(_may_hold_cjk(call) for call in tool_calls) else None
    return cjk_tokens([content, tool_name, calls])


def _may_hold_cjk(call: ToolCallRecord) -> bool:
    """Whether a call's readable text can hold CJK: written out, or as ``\\u`` escapes in its arguments.

    Decoding the arguments is the costly part, and most calls hold neither.
    """
    return "\\u" in call.arguments or has_cjk(call.arguments) or has_cjk(call.name)

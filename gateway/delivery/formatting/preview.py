"""The preview of a reply still being written: its Markdown so far, shown safely in one message.

A streamed reply is shown many times before it is finished, and each time its text may stop
anywhere: inside a word, a link's address, bold text, a code span or a code block. :func:`render`
already turns any text into markup the platform accepts (an unclosed fence is closed, an unpaired
``**`` is shown as written); the preview also makes the unfinished end read the way the finished
text will:

* the last word is held back until it is complete (the ASCII characters after the last space or
  line break), so half a word, half an address or half a credential (which the masking
  recognises only once whole) is never shown;
* bold, italics, strikethrough, spoilers and a code span open on the last line are closed;
* a link whose address is unfinished shows its text alone; a lone ``[`` is left out;
* a code fence with nothing in it yet, or a table's lone header row, waits for its next line.

Only the first message's worth is shown (:func:`preview` cuts at the platform's limit); what does
not fit waits for the final text's chunks.
"""

from __future__ import annotations

import re
from typing import Final

from adapters.contract import Markup
from gateway.delivery.formatting import Chunk, render
from gateway.delivery.formatting.inline import closers
from gateway.delivery.formatting.markdown import open_fence

_UNFINISHED_WORD: Final = re.compile(r"[!-~]+\Z")
"""Printable ASCII at the very end: a word (or address, or token) that may still grow. Other scripts
(CJK has no spaces between words) are shown as they come."""
_HALF_LINK: Final = re.compile(r"\[([^\[\]]*)\](?:\([^()\s]*)?\Z")
"""``[text](partial address`` or ``[text]`` at the end: the link is not finished."""
_LONE_BRACKET: Final = re.compile(r"\[(?=[^\[\]]*\Z)")
"""A ``[`` with no ``]`` after it: perhaps a link's start."""

_TABLE_ROW: Final = re.compile(r"[ \t]*\|(?!\|)")
"""A line of a pipe table (``||`` starts a spoiler instead)."""

EMPTY: Final = Chunk("", "")
"""Nothing to show yet."""


def preview(text: str, markup: Markup, *, max_length: int, length_unit: str) -> Chunk:
    """The partial model Markdown ``text`` rendered in ``markup`` as one message of at most ``max_length``
    (counted in ``length_unit``): markup the platform accepts whatever the text stops at, and the
    unfinished end shown the way the finished text will show it (see the module's docstring).
    :data:`EMPTY` while there is nothing to show."""
    shown = _settled(text)
    if not shown:
        return EMPTY
    chunks = render(shown, markup, max_length=max_length, length_unit=length_unit)
    return chunks[0] if chunks else EMPTY


def _settled(text: str) -> str:
    """``text`` with its unfinished end closed or left out (still model Markdown)."""
    text = text.replace("\r\n", "\n")
    if text and not text[-1].isspace():
        text = _UNFINISHED_WORD.sub("", text)
    text = text.rstrip()
    head, _, last = text.rpartition("\n")
    fence = open_fence(text)
    if fence is not None:
        lines = text.split("\n")
        return "\n".join(lines[:fence]).rstrip() if len(lines) == fence + 1 else text  # an empty block waits
    if _TABLE_ROW.match(last) and not _TABLE_ROW.match(head.rpartition("\n")[2]):
        return head.rstrip()  # a table's header row: it becomes a table with the row under it
    if not closers(last).startswith("`"):  # inside a code span a bracket is just code
        last = _LONE_BRACKET.sub("", _HALF_LINK.sub(r"\1", last)).rstrip()
    last += closers(last)
    return f"{head}\n{last}" if head else last

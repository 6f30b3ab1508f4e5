"""Inline code that holds backticks, cut into chunks at every possible place.

A code span is delimited by a backtick run longer than any inside it. When the chunker cuts
one, each part is closed and reopened with that delimiter; if the part itself begins or ends
with a backtick, the two runs merge into a longer one ("``a`" + "``" reads "``a```"), the span
no longer closes, and Discord shows the rest of the message as a code block. Here every limit
from the smallest up to the whole message moves the cut through the span, and each chunk must
read, on its own, as code spans holding consecutive parts of the original code, with no stray
backtick outside them.
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from adapters.contract import Markup
from gateway.delivery.formatting import MIN_LENGTH, measure, render
from gateway.delivery.formatting.layout import longest_backtick_run
from tests.gateway.test_formatting_checks import telegram_errors, telegram_text

_ESCAPED = re.compile(r"\\.", re.DOTALL)


def code_spans(text: str) -> tuple[list[str], str]:
    """The inline code spans in ``text`` by CommonMark's backtick rules, and the text outside them.

    A span opens with a run of N backticks and closes at the next run of exactly N; one space
    at each end is padding when both ends have one. A backslash escapes the character after it
    outside code. A run that never closes is left outside, as literal backticks.
    """
    spans: list[str] = []
    outside: list[str] = []
    index = 0
    while index < len(text):
        char = text[index]
        if char == "\\":
            outside.append(text[index : index + 2])
            index += 2
            continue
        if char != "`":
            outside.append(char)
            index += 1
            continue
        opening = _run(text, index)
        end = _closing(text, index + opening, opening)
        if end is None:
            outside.append("`" * opening)
            index += opening
            continue
        content = text[index + opening : end]
        if len(content) > 2 and content[0] == content[-1] == " " and content.strip(" "):
            content = content[1:-1]
        spans.append(content)
        index = end + opening
    return spans, "".join(outside)


def _run(text: str, at: int) -> int:
    end = at
    while end < len(text) and text[end] == "`":
        end += 1
    return end - at


def _closing(text: str, start: int, length: int) -> int | None:
    """Where the first run of exactly ``length`` backticks at or after ``start`` begins."""
    while (found := text.find("`", start)) >= 0:
        run = _run(text, found)
        if run == length:
            return found
        start = found + run
    return None


def markdown_for(code: str) -> str:
    delimiter = "`" * (longest_backtick_run(code) + 1)
    pad = " " if code.startswith("`") or code.endswith("`") else ""
    return f"{delimiter}{pad}{code}{pad}{delimiter}"


codes = st.text(alphabet="ab` ", min_size=2, max_size=60).filter(lambda code: code == code.strip() and "`" in code)
lead = st.text(alphabet="cd ", max_size=30).map(str.strip)


def _squeezed(text: str) -> str:
    return re.sub(r"\s", "", text)


def test_the_check_reads_spans_as_commonmark_does() -> None:
    assert code_spans("a ``x`y`` b `z` \\`") == (["x`y", "z"], "a  b  \\`")
    assert code_spans("``a```") == ([], "``a```")  # the bug: the closing run merged with a backtick of the code
    assert code_spans("`` `a ``") == (["`a"], "")


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(code=codes, before=lead, after=lead)
def test_every_cut_through_code_with_backticks_leaves_each_discord_chunk_a_complete_span(
    code: str, before: str, after: str
) -> None:
    source = f"{before} {markdown_for(code)} {after}".strip()
    [whole] = render(source, Markup.DISCORD_MARKDOWN, max_length=10**6, length_unit="chars")
    assume(code_spans(whole.text)[0] == [code])  # the parser read the span as written
    cut_inside = 0
    # From the smallest limit that holds the delimiters with a little code (below it, code is written
    # as escaped text without them) up to the whole message.
    for limit in range(max(MIN_LENGTH, 2 * longest_backtick_run(code) + 6), len(whole.text) + 1):
        chunks = render(source, Markup.DISCORD_MARKDOWN, max_length=limit, length_unit="chars")
        found: list[str] = []
        for chunk in chunks:
            assert measure(chunk.text, "chars") <= limit, (limit, chunk.text)
            spans, outside = code_spans(chunk.text)
            assert "`" not in _ESCAPED.sub("", outside), f"limit {limit}: a backtick run outside code in {chunk.text!r}"
            assert len(spans) <= 1, (limit, chunk.text)
            found += spans
        assert all(_squeezed(part) in _squeezed(code) for part in found), (limit, found)
        assert _squeezed("".join(found)) == _squeezed(code), (limit, [c.text for c in chunks])
        cut_inside += len(found) > 1
    assume(cut_inside)  # the limits did move a cut through the code


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(code=codes, before=lead)
def test_telegram_and_slack_are_not_affected(code: str, before: str) -> None:
    """Telegram's code is a tag, and Slack, which cannot hold a backtick in inline code, writes such
    code as text with every backtick kept from pairing: no cut can merge delimiters there."""
    source = f"{before} {markdown_for(code)}".strip()
    for limit in range(MIN_LENGTH, len(source) + 12):
        html = render(source, Markup.TELEGRAM_HTML, max_length=limit, length_unit="utf16")
        assert all(telegram_errors(chunk.text) == [] for chunk in html)
        assert _squeezed("".join(telegram_text(chunk.text) for chunk in html)).endswith(_squeezed(code))
        for chunk in render(source, Markup.SLACK_MRKDWN, max_length=limit, length_unit="chars"):
            assert all(chunk.text[at + 1 : at + 2] == "\u200b" for at, char in enumerate(chunk.text) if char == "`")

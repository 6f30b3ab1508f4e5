"""Properties of every render, over random Markdown-ish replies.

For any input, every dialect, any limit and either unit: each chunk (markup and
plain) fits; Telegram chunks are valid, balanced HTML using only its tags; fences
balance per chunk; and joining the chunks' plain text gives back the whole plain
text (ignoring fence lines reopened at cuts and whitespace at cuts).

The generated documents keep backticks to code spans and fences, so that a fence
line in the plain output is always a real fence (the comparison drops them).
"""

from __future__ import annotations

import re

from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from adapters.contract import Markup
from gateway.delivery.formatting import measure, render
from tests.gateway.test_formatting_checks import check_chunks, fences_balanced, telegram_errors, telegram_text

_LETTERS = "abcdefghijklmnopqrstuvwxyzABCXYZ0123456789"
_CJK = "中文日本語한국어的是了。，"
_ASTRAL = ["😀", "🚀", "👍🏽", "🇯🇵", "👩\u200d💻", "𝔘", "🀄"]
_SYMBOLS = "&<>\"'*_~|#-+=.:;!?()[]{}/\\"

atoms = st.one_of(
    st.text(alphabet=_LETTERS, min_size=1, max_size=10),
    st.text(alphabet=_CJK, min_size=1, max_size=12),
    st.sampled_from(_ASTRAL),
    st.text(alphabet=_LETTERS + _SYMBOLS + _CJK, min_size=1, max_size=6),
    st.sampled_from(["snake_case_name", "__init__", "2*3=6", "2*3*4", "x**2", "AT&T", "<script>", "&amp;", "e\u0301"]),
    st.sampled_from(["https://example.com/a_(b)", "<https://example.org/x>", "<@U123>", "<#C42|general>", "a || b"]),
    st.text(alphabet=_LETTERS, min_size=60, max_size=400),  # a word longer than small limits
)
words = st.lists(atoms, min_size=1, max_size=8).map(" ".join)


@st.composite
def inline(draw: st.DrawFn) -> str:
    text = draw(words)
    kind = draw(st.sampled_from(["plain", "plain", "bold", "italic", "strike", "spoiler", "code", "link", "mixed"]))
    if kind == "bold":
        return f"**{text}**"
    if kind == "italic":
        return f"*{text}*"
    if kind == "strike":
        return f"~~{text}~~"
    if kind == "spoiler":
        return f"||{text}||"
    if kind == "code":
        return f" `{text}` "
    if kind == "link":
        return f"[{text}](https://example.com/{draw(st.text(alphabet=_LETTERS + '_()-', max_size=40))})"
    if kind == "mixed":
        return f"**{text} *{draw(words)}* {draw(words)}**"
    return text


lines = st.lists(inline(), min_size=1, max_size=5).map(" ".join)
paragraphs = st.lists(lines, min_size=1, max_size=4).map("\n".join)
code_lines = st.text(alphabet=_LETTERS + _SYMBOLS + _CJK + " \t" + "".join(_ASTRAL), max_size=120)


@st.composite
def code_block(draw: st.DrawFn, *, closed: bool = True) -> str:
    lang = draw(st.sampled_from(["", "python", "js", "c++", "sh"]))
    body = draw(st.lists(code_lines, min_size=0, max_size=40))
    return f"```{lang}\n" + "\n".join(body) + ("\n```" if closed else "")


@st.composite
def table(draw: st.DrawFn) -> str:
    columns = draw(st.integers(1, 5))
    cell = st.text(alphabet=_LETTERS + _CJK + " *_&<", min_size=0, max_size=20).map(lambda text: text.strip())
    rows = draw(st.lists(st.lists(cell, min_size=columns, max_size=columns), min_size=2, max_size=8))
    out = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * columns]
    out += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(out)


@st.composite
def bullet_list(draw: st.DrawFn) -> str:
    items = []
    for _ in range(draw(st.integers(1, 8))):
        depth = draw(st.integers(0, 3))
        marker = draw(st.sampled_from(["-", "*", "1.", "2)"]))
        items.append("  " * depth + f"{marker} {draw(lines)}")
    return "\n".join(items)


blocks = st.one_of(
    paragraphs,
    paragraphs,
    lines.map(lambda text: "#" * 2 + " " + text),
    code_block(),
    table(),
    bullet_list(),
    paragraphs.map(lambda text: "\n".join("> " + line for line in text.split("\n"))),
    st.just("---"),
)
# An unclosed fence only ever comes last: it turns every later fence line into code.
endings = st.one_of(st.just([]), code_block(closed=False).map(lambda block: [block]))
documents = st.tuples(st.lists(blocks, min_size=1, max_size=8), endings, st.sampled_from(["\n\n", "\n"])).map(
    lambda parts: parts[2].join(parts[0] + parts[1])
)
limits = st.sampled_from([16, 23, 40, 80, 200, 700, 4096])
units = st.sampled_from(["chars", "utf16"])
markups = st.sampled_from(list(Markup))

SETTINGS = settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(source=documents, markup=markups, limit=limits, unit=units)
def test_every_chunk_fits_is_valid_and_nothing_is_lost(source: str, markup: Markup, limit: int, unit: str) -> None:
    check_chunks(source, markup, limit, unit)


# Letters survive every construct these alphabets can form (no links, tables or fences, whose
# addresses, header labels and info strings are moved or dropped on purpose), so the letters of
# the source and of the joined plain chunks must be the same sequence. No "x": "- [x]" is a box.
_KEPT = "abcdefghijklmnopqrstuvwyzABCDEFGHIJKLMNOPQRSTUVWYZ中文字🚀😀"
_FENCE = re.compile(r"^[ \t]*(?:`{3,}|~{3,})", re.MULTILINE)
prose_text = st.text(alphabet=_KEPT + " \n*_~[]#>-+\\!=&<", max_size=300)
code_text = st.text(alphabet=_KEPT + "\n*_~`[]#>-+\\!=&<", max_size=300)


@SETTINGS
@given(source=st.one_of(prose_text, code_text), markup=markups, limit=limits, unit=units)
def test_no_letter_of_the_source_is_lost_or_repeated(source: str, markup: Markup, limit: int, unit: str) -> None:
    assume(not _FENCE.search(source))
    chunks = render(source, markup, max_length=limit, length_unit=unit)
    letters = [char for char in "\n".join(chunk.plain for chunk in chunks) if char in _KEPT]
    assert letters == [char for char in source if char in _KEPT]


@SETTINGS
@given(source=st.text(max_size=400), markup=markups, limit=limits, unit=units)
def test_any_text_at_all_renders_safely(source: str, markup: Markup, limit: int, unit: str) -> None:
    for chunk in render(source, markup, max_length=limit, length_unit=unit):
        assert measure(chunk.text, unit) <= limit and measure(chunk.plain, unit) <= limit
        assert not re.search("[\ud800-\udfff]", chunk.text + chunk.plain)
        if markup == Markup.TELEGRAM_HTML:
            assert telegram_errors(chunk.text) == [], chunk.text
        elif markup != Markup.PLAIN:
            assert fences_balanced(chunk.text), chunk.text


markup_only = st.text(alphabet="`#>[]()*_~|-+!:.\\ \t\n", min_size=1, max_size=40)
"""Replies made of Markdown's own characters: many of them (an opening fence, a lone ``#``) show nothing."""


@SETTINGS
@given(source=st.one_of(markup_only, st.text(max_size=60)), markup=markups, limit=limits, unit=units)
def test_a_reply_that_is_not_blank_always_shows_something(source: str, markup: Markup, limit: int, unit: str) -> None:
    assume(source.strip())
    chunks = render(source, markup, max_length=limit, length_unit=unit)
    assert chunks, "nothing would be sent"
    for chunk in chunks:
        shown = telegram_text(chunk.text) if markup == Markup.TELEGRAM_HTML else chunk.text
        assert shown.strip() and chunk.plain.strip(), chunk
        assert measure(chunk.text, unit) <= limit and measure(chunk.plain, unit) <= limit

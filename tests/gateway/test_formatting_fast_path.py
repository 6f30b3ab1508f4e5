"""Short plain replies skip the Markdown pipeline; what they come out as must not change."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.contract import Markup
from gateway.delivery.formatting import Chunk, dialect_for, render
from gateway.delivery.formatting.chunking import split
from gateway.delivery.formatting.layout import lower, lower_literal
from gateway.delivery.formatting.markdown import parse

ASCII_PROSE = st.text(alphabet=st.sampled_from("abcXYZ019 .,:;'\"?!-+=/@$%^{}~*_`#>|()[]<&\n\t"), max_size=60)
WORDS = st.lists(st.sampled_from(["Done", "the", "deploy", "1.", "-", "+", "ok:", "msg0042", "x=y", "@bob", "1)",
                                  "e.g.", "100%", "5$", "a/b", "it's", '"q"', "{x}", "^", "==", "*bold*", "_it_",
                                  "**b**", "`code`", "~~gone~~", "<b>", "a&b", "[x](y)", "http://x.y", "www.x.y",
                                  "\\*", "|a|b|", "#tag", "!", "(p)", "\n", "\n\n", "  ", "\t"]), max_size=12)


def full_pipeline(text: str, markup: Markup, limit: int) -> list[Chunk]:
    dialect, plain = dialect_for(markup), dialect_for(Markup.PLAIN)
    chunks = split(lower(parse(text), bullets=dialect.bullets), dialect, plain, limit=limit, unit="utf16")
    if chunks or not text.strip():
        return chunks
    return split(lower_literal(text), dialect, plain, limit=limit, unit="utf16")  # shows nothing: as written


@settings(max_examples=400, deadline=None)
@given(text=st.one_of(ASCII_PROSE, WORDS.map(lambda words: " ".join(["Word", *words]))), markup=st.sampled_from(list(Markup)),
       limit=st.sampled_from([64, 4096]))  # fmt: skip
def test_the_shortcut_gives_what_the_full_pipeline_gives(text: str, markup: Markup, limit: int) -> None:
    assert render(text, markup, max_length=limit, length_unit="utf16") == full_pipeline(text, markup, limit)


def test_the_shortcut_is_taken_for_a_plain_sentence() -> None:
    text = "Done: the deploy waits for review, see ticket 42."
    for markup in Markup:
        assert full_pipeline(text, markup, 4096) == [Chunk(text, text)]
        assert render(text, markup, max_length=4096, length_unit="utf16") == [Chunk(text, text)]

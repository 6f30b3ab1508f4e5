"""Where replies are cut: limits in the platform's unit, cut preference, and what is reopened."""

from __future__ import annotations

import re

import pytest

from adapters.contract import Markup
from gateway.delivery.formatting import render
from gateway.delivery.formatting.lengths import is_boundary, measure, utf16_len
from tests.gateway.test_formatting_checks import check_chunks


def texts(source: str, markup: Markup, limit: int, unit: str = "chars") -> list[str]:
    return [chunk.text for chunk in check_chunks(source, markup, limit, unit)]


# --- measuring ---------------------------------------------------------------------------------


def test_utf16_counts_astral_characters_twice() -> None:
    assert utf16_len("abc") == 3
    assert utf16_len("é中") == 2
    assert utf16_len("😀") == 2
    assert measure("a😀", "utf16") == 3
    assert measure("a😀", "chars") == 2


def test_boundaries_keep_visible_characters_whole() -> None:
    assert not is_boundary("e\u0301", 1)  # combining accent
    assert not is_boundary("👍🏽", 1)  # skin-tone modifier
    assert not is_boundary("👩\u200d💻", 1) and not is_boundary("👩\u200d💻", 2)  # joiner sequence
    assert not is_boundary("🇯🇵", 1) and is_boundary("🇯🇵🇫🇷", 2)  # flags are pairs
    assert is_boundary("ab", 1)


# --- what fits is not cut ----------------------------------------------------------------------


@pytest.mark.parametrize("markup", list(Markup))
def test_a_reply_that_fits_is_one_chunk(markup: Markup) -> None:
    assert len(texts("Short **reply** with `code`.\n\n- a\n- b", markup, 2000)) == 1


def test_the_limit_counts_markup_not_just_text() -> None:
    source = "**" + ("bold " * 30).strip() + "**"
    for chunk in texts(source, Markup.TELEGRAM_HTML, 60):
        assert chunk.startswith("<b>") and chunk.endswith("</b>") and len(chunk) <= 60


# --- cut preference: paragraph, line, word, hard -----------------------------------------------


def test_cuts_between_paragraphs_first() -> None:
    first, second = "A" * 30 + " " + "a" * 30, "B" * 30 + "\nb" * 10
    assert texts(f"{first}\n\n{second}", Markup.PLAIN, 100) == [first, second]


def test_then_between_lines() -> None:
    lines = [f"line {n:02d} " + "x" * 20 for n in range(12)]
    chunks = texts("\n".join(lines), Markup.PLAIN, 100)
    assert "\n".join(chunks) == "\n".join(lines)
    assert all(chunk.split("\n")[0] in lines for chunk in chunks)


def test_then_between_words() -> None:
    words = [f"word{n}" for n in range(400)]
    chunks = texts(" ".join(words), Markup.PLAIN, 100)
    assert len(chunks) > 20
    assert [word for chunk in chunks for word in chunk.split(" ")] == words


def test_a_word_longer_than_the_limit_is_cut_hard() -> None:
    assert texts("x" * 250, Markup.PLAIN, 100) == ["x" * 100, "x" * 100, "x" * 50]


def test_cjk_without_spaces_prefers_cutting_after_punctuation() -> None:
    sentence = "这是一个没有空格的中文句子，用来测试切分。"
    chunks = texts(sentence * 30, Markup.PLAIN, 100)
    assert all(chunk[-1] in "，。" for chunk in chunks)


def test_a_heading_stays_with_its_section() -> None:
    source = "A" * 70 + "\n\n# Head\n\n" + "B" * 50
    assert texts(source, Markup.PLAIN, 100) == ["A" * 70, "Head\n\n" + "B" * 50]


def test_a_list_marker_stays_with_its_item() -> None:
    items = "\n".join(f"- item number {n} " + "z" * 30 for n in range(10))
    for chunk in texts(items, Markup.TELEGRAM_HTML, 120):
        assert chunk.startswith("• ") and not chunk.endswith("•")


# --- units: UTF-16 for Telegram, code points never split ---------------------------------------


def test_telegram_limit_is_in_utf16_units() -> None:
    emoji = "😀" * 3000
    chunks = texts(emoji, Markup.TELEGRAM_HTML, 4096, "utf16")
    assert [len(chunk) for chunk in chunks] == [2048, 952]
    assert [len(chunk) for chunk in texts(emoji, Markup.DISCORD_MARKDOWN, 2000)] == [2000, 1000]


@pytest.mark.parametrize("cluster", ["👍🏽", "🇯🇵", "e\u0301", "👩\u200d💻"])
def test_a_hard_cut_never_splits_a_visible_character(cluster: str) -> None:
    for chunk in texts(cluster * 200, Markup.TELEGRAM_HTML, 101, "utf16"):
        assert chunk.startswith(cluster[0]) and chunk.endswith(cluster[-1])
        assert len(chunk) % len(cluster) == 0


def test_an_escape_is_never_cut() -> None:
    for chunk in texts("&<>" * 500, Markup.TELEGRAM_HTML, 100, "utf16"):
        assert re.fullmatch(r"(?:&amp;|&lt;|&gt;)+", chunk)
        assert len(chunk) <= 100


# --- what is closed and reopened ---------------------------------------------------------------


def test_a_code_block_is_closed_and_reopened_with_its_language() -> None:
    code = "\n".join(f"    value_{n} = compute({n})  # step {n}" for n in range(120))
    source = f"Intro.\n\n```python\n{code}\n```\n\nOutro."
    chunks = texts(source, Markup.DISCORD_MARKDOWN, 2000)
    assert len(chunks) >= 3
    bodies = []
    for chunk in chunks:
        if "```" in chunk:
            body = chunk[chunk.index("```python\n") + 10 : chunk.rindex("\n```")]
            bodies.extend(body.split("\n"))
    assert bodies == code.split("\n")  # indentation kept, nothing lost or repeated


@pytest.mark.parametrize(
    ("markup", "opening", "closing"),
    [
        (Markup.TELEGRAM_HTML, '<pre><code class="language-js">', "</code></pre>"),
        (Markup.DISCORD_MARKDOWN, "```js\n", "\n```"),
        (Markup.SLACK_MRKDWN, "```\n", "\n```"),
        (Markup.PLAIN, "```js\n", "\n```"),
    ],
)
def test_every_chunk_of_a_long_code_block_is_a_code_block(markup: Markup, opening: str, closing: str) -> None:
    code = "\n".join(f"console.log({n});" for n in range(300))
    for chunk in texts(f"```js\n{code}\n```", markup, 500):
        assert chunk.startswith(opening) and chunk.endswith(closing)


def test_a_long_code_line_is_cut_inside_the_block() -> None:
    line = "x = [" + ", ".join(str(n) for n in range(400)) + "]"
    chunks = texts(f"```py\n{line}\n```", Markup.DISCORD_MARKDOWN, 300)
    assert "".join(chunk[len("```py\n") : -len("\n```")] for chunk in chunks) == line


@pytest.mark.parametrize(
    ("markup", "opening", "closing"),
    [
        (Markup.TELEGRAM_HTML, "<b>", "</b>"),
        (Markup.DISCORD_MARKDOWN, "**", "**"),
        (Markup.SLACK_MRKDWN, "*", "*"),
    ],
)
def test_a_style_across_a_cut_is_closed_and_reopened(markup: Markup, opening: str, closing: str) -> None:
    chunks = texts("**" + " ".join(f"bold{n}" for n in range(200)) + "**", markup, 150)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.startswith(opening + "bold") and chunk.endswith(closing)
        assert chunk[len(opening) : -len(closing)].strip() == chunk[len(opening) : -len(closing)]


def test_a_quote_across_a_cut_is_reopened() -> None:
    source = "\n".join("> " + "quoted words " * 5 for _ in range(20))
    for chunk in texts(source, Markup.TELEGRAM_HTML, 300):
        assert chunk.startswith("<blockquote>") and chunk.endswith("</blockquote>")
    for chunk in texts(source, Markup.DISCORD_MARKDOWN, 300):
        assert all(line.startswith("> ") for line in chunk.split("\n"))


def test_a_link_across_a_cut_links_both_halves() -> None:
    source = "[" + " ".join(f"w{n}" for n in range(100)) + "](https://example.com/x)"
    chunks = texts(source, Markup.TELEGRAM_HTML, 120)
    assert len(chunks) > 2
    assert all(chunk.startswith('<a href="https://example.com/x">') and chunk.endswith("</a>") for chunk in chunks)


def test_a_link_whose_address_alone_is_too_long_still_delivers_its_text() -> None:
    source = "see [the docs](https://example.com/" + "p" * 300 + ") now"
    chunks = texts(source, Markup.TELEGRAM_HTML, 200)
    assert "the docs" in "".join(chunks)


@pytest.mark.parametrize("markup", [Markup.TELEGRAM_HTML, Markup.DISCORD_MARKDOWN, Markup.SLACK_MRKDWN])
def test_plain_fallback_fits_even_where_it_is_longer_than_the_markup(markup: Markup) -> None:
    code = "\n".join("y" * 40 for _ in range(100))
    source = f"```averyveryverylonglanguagename\n{code}\n```\n\n" + "[x](https://e.com/" + "q" * 50 + ") " * 30
    for chunk in check_chunks(source, markup, 200, "chars"):
        assert len(chunk.plain) <= 200


def test_long_reply_is_never_truncated() -> None:
    source = "\n\n".join(f"Paragraph {n}: " + "lorem ipsum dolor sit amet " * 12 for n in range(60))
    for markup in Markup:
        joined = " ".join(chunk.plain for chunk in render(source, markup, max_length=2000, length_unit="chars"))
        assert all(f"Paragraph {n}:" in joined for n in range(60))
        assert joined.count("lorem") == 60 * 12

"""Model Markdown rendered into each platform's dialect (one chunk: no limit pressure here)."""

from __future__ import annotations

import subprocess
import sys

import pytest

import gateway.delivery.formatting
from adapters.contract import Markup
from gateway.delivery.formatting import render
from tests.gateway.test_formatting_checks import telegram_errors

ALL = list(Markup)


def one(source: str, markup: Markup) -> str:
    chunks = render(source, markup, max_length=100_000, length_unit="utf16")
    assert len(chunks) == 1, chunks
    return chunks[0].text


def plain(source: str, markup: Markup = Markup.TELEGRAM_HTML) -> str:
    chunks = render(source, markup, max_length=100_000, length_unit="utf16")
    return chunks[0].plain


def tg(source: str) -> str:
    html = one(source, Markup.TELEGRAM_HTML)
    assert telegram_errors(html) == [], html
    return html


def discord(source: str) -> str:
    return one(source, Markup.DISCORD_MARKDOWN)


def slack(source: str) -> str:
    return one(source, Markup.SLACK_MRKDWN)


# --- Telegram HTML -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "html"),
    [
        (
            "**bold** *it* _it_ ~~gone~~ ||secret||",
            "<b>bold</b> <i>it</i> <i>it</i> <s>gone</s> <tg-spoiler>secret</tg-spoiler>",
        ),
        ("a `x < y && z` b", "a <code>x &lt; y &amp;&amp; z</code> b"),
        (
            "```python\nif a < b:\n    pass\n```",
            '<pre><code class="language-python">if a &lt; b:\n    pass</code></pre>',
        ),
        ("```\nplain\n```", "<pre>plain</pre>"),
        ("# Title\n## Sub **bold**", "<b>Title</b>\n\n<b>Sub bold</b>"),
        ("> quoted\n> lines", "<blockquote>quoted\nlines</blockquote>"),
        ("- one\n- two\n  - nested", "• one\n• two\n  ◦ nested"),
        ("3. three\n4. four", "3. three\n4. four"),
        ("above\n\n---\n\nbelow", "above\n\n──────────\n\nbelow"),
        ("***both***", "<b><i>both</i></b>"),
        ("~~a **b**~~", "<s>a <b>b</b></s>"),
    ],
)
def test_telegram_markup(source: str, html: str) -> None:
    assert tg(source) == html


def test_telegram_escapes_everything_the_model_wrote() -> None:
    assert tg("<script>alert('x')</script> & AT&T > 3") == (
        "&lt;script&gt;alert('x')&lt;/script&gt; &amp; AT&amp;T &gt; 3"
    )
    assert tg("already &amp; escaped") == "already &amp;amp; escaped"


def test_telegram_links_allow_only_safe_schemes_and_escape_the_address() -> None:
    assert tg('[x](https://a.b/?q="1"&r=<2>)') == '<a href="https://a.b/?q=&quot;1&quot;&amp;r=&lt;2&gt;">x</a>'
    assert tg("[me](tg://user?id=1) [mail](mailto:a@b.c)") == (
        '<a href="tg://user?id=1">me</a> <a href="mailto:a@b.c">mail</a>'
    )
    assert tg("[run](javascript:alert(1)) [file](file:///etc/passwd) [rel](/docs)") == "run file rel"


def test_telegram_link_with_parentheses_in_the_address() -> None:
    source = "[Python](https://en.wikipedia.org/wiki/Python_(programming_language))"
    assert tg(source) == '<a href="https://en.wikipedia.org/wiki/Python_(programming_language)">Python</a>'


def test_telegram_never_nests_what_telegram_forbids() -> None:
    assert tg("**bold `code` bold**") == "<b>bold</b> <code>code</code> <b>bold</b>"
    assert tg("[`code` link](https://a.b)") == '<a href="https://a.b">code link</a>'
    assert "<blockquote><blockquote>" not in tg("> a\n>> b\n>>> c")


@pytest.mark.parametrize(
    "source",
    [
        "snake_case_name and __init__ and a_b_c",
        "2*3*4 = 24 and 2**10 and a*b",
        "**unclosed bold",
        "_unclosed italic and * stray star",
        "``nested ` backticks``",
        "`unclosed code",
        "~~~\nnot really ~~ closed",
        "||half spoiler",
        "[unclosed link(https://a.b",
        "<b>html</b> <tg-spoiler>x</tg-spoiler> &lt;",
    ],
)
def test_telegram_stray_markers_are_safe(source: str) -> None:
    html = tg(source)
    assert "<" not in html.replace("<code>", "").replace("</code>", "").replace("<pre>", "").replace("</pre>", "")


@pytest.mark.parametrize(
    "source",
    ["`unclosed code", "``x` y", "**unclosed bold", "_half italic", "||half spoiler", "[text](no-close", "a ~ b ~~ c"],
)
def test_unmatched_markers_stay_as_written(source: str) -> None:
    assert plain(source) == source


def test_identifiers_and_arithmetic_keep_their_markers() -> None:
    assert tg("snake_case_name, __init__, 2*3*4, 2**10") == "snake_case_name, __init__, 2*3*4, 2**10"


def test_cjk_emphasis_without_spaces() -> None:
    assert tg("这是**重要**的，**“引号”**也行") == "这是<b>重要</b>的，<b>“引号”</b>也行"


# --- Discord Markdown --------------------------------------------------------------------------


def test_discord_passes_formatting_through() -> None:
    source = "**b** *i* ~~s~~ ||sp|| `c` [l](https://a.b) > no\n\n> quote\n\n- item\n  - sub\n1. one"
    assert discord(source) == (
        "**b** *i* ~~s~~ ||sp|| `c` [l](https://a.b) \\> no\n\n> quote\n\n- item\n  - sub\n\n1. one"
    )


def test_discord_headings_and_code() -> None:
    assert discord("# One\n### Three\n#### Four") == "# One\n\n### Three\n\n**Four**"
    assert discord("```rust\nfn main() {}\n```") == "```rust\nfn main() {}\n```"


def test_discord_escapes_only_what_was_not_formatting() -> None:
    assert discord("snake_case_name 2*3*4 a|b") == "snake\\_case\\_name 2\\*3\\*4 a\\|b"
    assert discord("see https://x.y/a_b_c*d") == "see https://x.y/a_b_c*d"


def test_discord_text_that_would_start_a_heading_or_quote_is_escaped() -> None:
    source = "\\# not a heading\n\\> not a quote\n-# not small"
    assert discord(source) == "\\# not a heading\n\\> not a quote\n-\\# not small"
    assert discord("# Heading\n\n> quote\n\n- item\n\n1. one") == "# Heading\n\n> quote\n\n- item\n\n1. one"


def test_adjacent_markers_of_the_same_character_are_kept_apart() -> None:
    assert discord("**a**_b_") == "**a**\u200b*b*"  # not "**a***b*", which Discord reads as bold "a*"
    assert discord("*a***b**") == "*a*\u200b**b**"
    assert discord("**a** *b*") == "**a** *b*"  # a space already separates them
    assert discord("***a***") == "***a***"


def test_discord_code_that_contains_a_fence_cannot_end_the_block() -> None:
    text = discord('```python\nprint("```")\n```')
    assert text.startswith("```python\n") and text.endswith("\n```")
    assert text.count("```") == 2
    assert discord("``a ` b``") == "``a ` b``"


def test_discord_link_address_with_parentheses() -> None:
    assert discord("[w](https://e.org/P_(x))") == "[w](https://e.org/P_%28x%29)"


def test_discord_mentions_pass_through() -> None:
    assert discord("hi <@123> <#456> <:wave:789>") == "hi <@123> <#456> <:wave:789>"


# --- Slack mrkdwn ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("source", "mrkdwn"),
    [
        ("**b** *i* _i_ ~~s~~", "*b* _i_ _i_ ~s~"),
        ("[text](https://a.b/?x=1&y=2)", "<https://a.b/?x=1&amp;y=2|text>"),
        ("# Title", "*Title*"),
        ("```js\nif (a < b) {}\n```", "```\nif (a &lt; b) {}\n```"),
        ("a < b && c > d", "a &lt; b &amp;&amp; c &gt; d"),
        ("<@U123> <#C123|general> <!here> <!subteam^S1>", "<@U123> <#C123|general> <!here> <!subteam^S1>"),
        ("- a\n- b", "• a\n• b"),
        ("> q", "> q"),
        ("**[a](https://u.co) b**", "<https://u.co|a> *b*"),
    ],
)
def test_slack_markup(source: str, mrkdwn: str) -> None:
    assert slack(source) == mrkdwn


def test_slack_never_leaves_a_fence_inside_code_or_text() -> None:
    assert slack("```\nx = '```'\n```").count("```") == 2
    assert "```" not in slack("a literal ``` in text")


# --- tables, plain text, every dialect ---------------------------------------------------------

TABLE = "| Name | Qty |\n|:-----|----:|\n| apple | 3 |\n| 梨 | 12 |"


@pytest.mark.parametrize("markup", [Markup.DISCORD_MARKDOWN, Markup.SLACK_MRKDWN, Markup.PLAIN])
def test_narrow_table_becomes_an_aligned_code_block(markup: Markup) -> None:
    assert one(TABLE, markup) == "```\nName  | Qty\n------+----\napple |   3\n梨    |  12\n```"


def test_narrow_table_in_telegram_is_preformatted() -> None:
    assert tg(TABLE) == "<pre>Name  | Qty\n------+----\napple |   3\n梨    |  12</pre>"


def test_wide_table_becomes_one_record_per_row() -> None:
    wide = "| Service | Description | Owner |\n|---|---|---|\n| api | " + "handles requests " * 4 + "| **ops** |"
    assert tg(wide) == ("<b>api</b>\n• Description: " + ("handles requests " * 4).strip() + "\n• Owner: <b>ops</b>")


def test_plain_drops_markers_keeps_code_and_link_addresses() -> None:
    source = "## Head\n**b** [site](https://a.b) <https://c.d> `x`\n\n```sh\nls -la\n```"
    assert plain(source) == "Head\n\nb site (https://a.b) https://c.d x\n\n```sh\nls -la\n```"
    assert one(source, Markup.PLAIN) == plain(source)


@pytest.mark.parametrize("markup", ALL)
def test_unclosed_fence_runs_to_the_end_and_is_closed(markup: Markup) -> None:
    chunks = render("Here:\n```py\nx = 1\n\nmore", markup, max_length=4096, length_unit="utf16")
    assert chunks[-1].plain.endswith("```py\nx = 1\n\nmore\n```")


@pytest.mark.parametrize("markup", ALL)
def test_blank_input_gives_no_chunks(markup: Markup) -> None:
    assert render("", markup, max_length=100, length_unit="chars") == []
    assert render(" \n\n \t", markup, max_length=100, length_unit="chars") == []


def test_task_list_boxes() -> None:
    assert tg("- [x] done\n- [ ] todo") == "• ☑ done\n• ☐ todo"


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="at least"):
        render("x", Markup.PLAIN, max_length=3, length_unit="chars")
    with pytest.raises(ValueError, match="unit"):
        render("x", Markup.PLAIN, max_length=100, length_unit="bytes")


# --- the package itself ------------------------------------------------------------------------


def test_public_api() -> None:
    assert gateway.delivery.formatting.__all__ == [
        "MIN_LENGTH",
        "Chunk",
        "LengthUnit",
        "dialect_for",
        "measure",
        "render",
    ]


def test_imports_no_platform_library() -> None:
    probe = (
        "import sys, gateway.delivery.formatting\n"
        "platforms = {'aiogram', 'discord', 'slack_bolt', 'slack_sdk', 'aiohttp'}\n"
        "print(sorted(name for name in sys.modules if name.split('.')[0] in platforms))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"

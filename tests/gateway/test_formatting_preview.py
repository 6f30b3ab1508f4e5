"""The preview of a reply still being written (``gateway/delivery/formatting/preview.py``).

A streamed reply is shown at whatever point the model has reached, so every prefix of every reply must
give one message the platform accepts: Telegram HTML that the emulator's parser (as strict as the Bot
API) and the strict checker take, and for Discord and Slack balanced fences and no half-written link.
Every prefix of the formatting corpus is checked, and hypothesis cuts the long samples and generated
documents anywhere, at real and small limits.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from adapters.contract import Markup
from gateway.delivery.formatting import measure, render
from gateway.delivery.formatting.preview import EMPTY, preview
from tests.fakes.telegram_api.html_check import ParseError, parse_html
from tests.gateway.test_chunking_properties import documents
from tests.gateway.test_formatting_checks import LIMITS, fences_balanced, telegram_errors
from tests.gateway.test_formatting_corpus import CORPUS

MARKUPS = [Markup.TELEGRAM_HTML, Markup.DISCORD_MARKDOWN, Markup.SLACK_MRKDWN]
SHORT = {name: text for name, text in CORPUS.items() if len(text) < 3000}
_DISCORD_LINK_OPEN = re.compile(r"(?<!\\)\[[^\]\n]*\]\((?![^)\n]*\))")
"""A Discord link whose address is not closed: ``[text](http``."""


def check_preview(text: str, markup: Markup, limit: int, unit: str) -> None:
    shown = preview(text, markup, max_length=limit, length_unit=unit)
    assert measure(shown.text, unit) <= limit and measure(shown.plain, unit) <= limit, shown
    if markup == Markup.TELEGRAM_HTML:
        try:
            parse_html(shown.text)
        except ParseError as error:
            raise AssertionError(f"the emulator refuses {shown.text!r}: {error}") from None
        assert telegram_errors(shown.text) == [], (text, shown.text)
    else:
        assert fences_balanced(shown.text), (text, shown.text)
        if markup == Markup.DISCORD_MARKDOWN:
            assert not _DISCORD_LINK_OPEN.search(shown.text), (text, shown.text)
        else:  # Slack: every <...> entity closed
            assert not re.search(r"<[^>]*\Z", shown.text), (text, shown.text)


@pytest.mark.parametrize("markup", MARKUPS)
@pytest.mark.parametrize("name", SHORT)
def test_every_prefix_of_the_corpus_previews_to_accepted_markup(name: str, markup: Markup) -> None:
    text = SHORT[name]
    limit, unit = LIMITS[markup]
    for end in range(len(text) + 1):
        check_preview(text[:end], markup, limit, unit)


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(data=st.data(), markup=st.sampled_from(MARKUPS), limit=st.sampled_from([120, 333, None]))
def test_any_cut_of_any_corpus_text_previews_to_accepted_markup(data: st.DataObject, markup: Markup,
                                                                 limit: int | None) -> None:  # fmt: skip
    text = CORPUS[data.draw(st.sampled_from(sorted(CORPUS)))]
    end = data.draw(st.integers(0, len(text)))
    check_preview(text[:end], markup, limit or LIMITS[markup][0], LIMITS[markup][1])


@SETTINGS
@given(source=documents, data=st.data(), markup=st.sampled_from(MARKUPS))
def test_any_cut_of_a_generated_document_previews_to_accepted_markup(source: str, data: st.DataObject,
                                                                     markup: Markup) -> None:  # fmt: skip
    end = data.draw(st.integers(0, len(source)))
    check_preview(source[:end], markup, *LIMITS[markup])


def html(text: str) -> str:
    return preview(text, Markup.TELEGRAM_HTML, max_length=4096, length_unit="utf16").text


def test_the_unfinished_end_reads_as_the_finished_text_will() -> None:
    assert html("This is **bold text") == "This is <b>bold</b>"
    assert html("Use `list.sort` or `sorted it") == "Use <code>list.sort</code> or <code>sorted</code>"
    assert html("Old ~~value and") == "Old <s>value</s>"
    assert html("See [the docs](https://docs.exa") == "See the"
    assert html("See [文档](https://docs.exa") == "See 文档"
    assert html("这是**重要") == "这是<b>重要</b>"  # no spaces in CJK: shown as it comes
    assert html("2*3 = 6 and 2*3 is") == "2*3 = 6 and 2*3"  # arithmetic is not italics


def test_half_words_empty_code_blocks_and_lone_table_headers_wait() -> None:
    assert html("Call retry_with_back") == "Call"
    assert html("Here:\n\n```pyth") == html("Here:\n\n```python\n") == "Here:"
    assert html("Here:\n\n```python\nprint(1)\n") == 'Here:\n\n<pre><code class="language-python">print(1)</code></pre>'
    assert html("Compare:\n\n| a | b |") == "Compare:"
    assert preview("", Markup.TELEGRAM_HTML, max_length=4096, length_unit="utf16") == EMPTY
    assert preview("Hello", Markup.TELEGRAM_HTML, max_length=4096, length_unit="utf16") == EMPTY


def test_a_credential_being_written_never_shows_in_part() -> None:
    # The masking knows a bot token only once it is whole; each prefix holds its unfinished end back.
    token = "123456789:AAHk3vQx9_fake-token-for-tests-0123"
    text = f"The token is {token} and more"
    for end in range(len(text) + 1):
        shown = html(text[:end])
        assert "123456789" not in shown or token in text[:end].rsplit(" ", 1)[0], shown


def test_the_preview_is_one_message_the_rest_waits() -> None:
    text = CORPUS["long_answer"]
    for markup in MARKUPS:
        limit, unit = LIMITS[markup]
        shown = preview(text, markup, max_length=limit, length_unit=unit)
        first = render(text, markup, max_length=limit, length_unit=unit)[0]
        assert measure(shown.text, unit) <= limit
        assert shown.text == first.text  # the text ends with a full stop: nothing held back

"""Checks shared by the formatting tests (Telegram HTML validity, fence balance, lost text), and their own tests.

The checks are deliberately independent of ``gateway.delivery.formatting``: Telegram HTML
is read with the standard library's ``html.parser``, the way a strict receiver would.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

from adapters.contract import Markup
from gateway.delivery.formatting import Chunk, dialect_for, measure, render
from gateway.delivery.formatting.chunking import split
from gateway.delivery.formatting.layout import lower
from gateway.delivery.formatting.markdown import parse

TELEGRAM_TAGS = frozenset({"b", "i", "s", "code", "pre", "a", "blockquote", "tg-spoiler"})
TELEGRAM_ENTITIES = frozenset({"amp", "lt", "gt", "quot"})
LIMITS = {
    Markup.TELEGRAM_HTML: (4096, "utf16"),
    Markup.DISCORD_MARKDOWN: (2000, "chars"),
    Markup.SLACK_MRKDWN: (3900, "chars"),
    Markup.PLAIN: (4096, "chars"),
}
_FENCE_LINE = re.compile(r"^`{3,}[\w+#.-]*$", re.MULTILINE)


class _TelegramReader(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=False)
        self.open: list[str] = []
        self.errors: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in TELEGRAM_TAGS:
            self.errors.append(f"tag <{tag}> is not allowed")
        allowed = {"a": {"href"}, "code": {"class"}}.get(tag, set())
        for name, value in attrs:
            if name not in allowed or value is None:
                self.errors.append(f"attribute {name!r} on <{tag}>")
        if tag == "code" and attrs and not (attrs[0][1] or "").startswith("language-"):
            self.errors.append(f"code class {attrs[0][1]!r}")
        if tag == "blockquote" and "blockquote" in self.open:
            self.errors.append("nested blockquote")
        if tag == "pre" and self.open:
            self.errors.append(f"<pre> inside {self.open}")
        self.open.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if not self.open or self.open[-1] != tag:
            self.errors.append(f"</{tag}> closes {self.open[-1:] or 'nothing'}")
        else:
            self.open.pop()

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.errors.append(f"self-closing <{tag}/>")

    def handle_data(self, data: str) -> None:
        if "<" in data or ">" in data:
            self.errors.append(f"unescaped bracket in {data!r}")
        self.text.append(data)

    def handle_entityref(self, name: str) -> None:
        if name not in TELEGRAM_ENTITIES:
            self.errors.append(f"entity &{name};")
        self.text.append({"amp": "&", "lt": "<", "gt": ">", "quot": '"'}.get(name, ""))

    def handle_charref(self, name: str) -> None:
        self.errors.append(f"character reference &#{name};")

    def unknown_decl(self, data: str) -> None:
        self.errors.append(f"declaration {data!r}")

    def handle_comment(self, data: str) -> None:
        self.errors.append(f"comment {data!r}")


def telegram_errors(html: str) -> list[str]:
    """Everything Telegram's HTML parse mode would reject (or we never mean to send) in ``html``."""
    if re.search(r"&(?!(?:amp|lt|gt|quot);)", html):
        return [f"bare ampersand in {html!r}"]
    reader = _TelegramReader()
    reader.feed(html)
    reader.close()
    if reader.open:
        reader.errors.append(f"unclosed {reader.open}")
    return reader.errors


def telegram_text(html: str) -> str:
    """What a Telegram user sees of ``html``: tags dropped, entities decoded."""
    reader = _TelegramReader()
    reader.feed(html)
    reader.close()
    return "".join(reader.text)


def fences_balanced(text: str) -> bool:
    """Every fence opened in ``text`` is closed in it (a fence closes only with at least as many backticks)."""
    open_fence = 0
    for line in text.split("\n"):
        fence = re.match(r"^(`{3,})([\w+#.-]*)$", line)
        if fence is None:
            continue
        if not open_fence:
            open_fence = len(fence.group(1))
        elif not fence.group(2) and len(fence.group(1)) >= open_fence:
            open_fence = 0
    return not open_fence


def content(text: str) -> str:
    """``text`` without fence lines, quote markers and whitespace: what must survive chunking."""
    return re.sub(r"[\s>]", "", _FENCE_LINE.sub("", text))


def as_written(source: str, markup: Markup) -> bool:
    """Whether ``source`` shows nothing as Markdown, so it is sent as written (where a fence is just text)."""
    dialect, plain = dialect_for(markup), dialect_for(Markup.PLAIN)
    return not split(lower(parse(source), bullets=dialect.bullets), dialect, plain, limit=10**9, unit="chars")


def check_chunks(source: str, markup: Markup, max_length: int, unit: str) -> list[Chunk]:
    """Render ``source`` and assert every delivery guarantee; return the chunks."""
    chunks = render(source, markup, max_length=max_length, length_unit=unit)
    whole = render(source, markup, max_length=10**9, length_unit=unit)
    assert len(whole) <= 1
    for chunk in chunks:
        assert chunk.text.strip(), chunk
        assert measure(chunk.text, unit) <= max_length, (max_length, chunk.text)
        assert measure(chunk.plain, unit) <= max_length, (max_length, chunk.plain)
        assert not re.search("[\ud800-\udfff]", chunk.text + chunk.plain)
        assert fences_balanced(chunk.plain) or as_written(source, markup), chunk.plain
        if markup == Markup.TELEGRAM_HTML:
            assert telegram_errors(chunk.text) == [], (telegram_errors(chunk.text), chunk.text)
        elif markup != Markup.PLAIN:
            assert fences_balanced(chunk.text), chunk.text
    joined = "\n".join(chunk.plain for chunk in chunks)
    assert content(joined) == content(whole[0].plain if whole else ""), "text was lost or repeated"
    if markup == Markup.TELEGRAM_HTML:
        # A link whose tag alone exceeds the limit is written as "text (url)", so the chunks may
        # show more than the whole message did, never less.
        seen = iter(re.sub(r"\s", "", "".join(telegram_text(chunk.text) for chunk in chunks)))
        shown = re.sub(r"\s", "", telegram_text(whole[0].text) if whole else "")
        assert all(char in seen for char in shown), "visible text was lost"
    return chunks


# --- the checks catch what they should ------------------------------------------------------


def test_telegram_errors_accepts_what_telegram_accepts() -> None:
    html = (
        '<b>a &amp; b</b> <a href="https://x.y/?a=1&amp;b=&quot;2&quot;">l</a>'
        ' <pre><code class="language-py">x</code></pre>'
    )
    assert telegram_errors(html) == []


def test_telegram_errors_catches_unbalanced_unknown_and_unescaped() -> None:
    assert telegram_errors("<b>open")
    assert telegram_errors("<b><i>x</b></i>")
    assert telegram_errors("<script>x</script>")
    assert telegram_errors("a < b")
    assert telegram_errors("AT&T")
    assert telegram_errors("&nbsp;")
    assert telegram_errors("<blockquote><blockquote>x</blockquote></blockquote>")


def test_fences_balanced_counts_fence_lines() -> None:
    assert fences_balanced("```py\nx\n```")
    assert not fences_balanced("```py\nx")
    assert fences_balanced("inline ```not a fence``` here")
    assert fences_balanced("````md\n```js\nx\n```\n````")
    assert not fences_balanced("````md\n```js\nx\n```")


def test_content_ignores_fences_quotes_and_whitespace() -> None:
    assert content("```py\na b\n```\n> c") == content("ab\nc")

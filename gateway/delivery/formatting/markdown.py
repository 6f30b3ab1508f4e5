"""Block-level Markdown: the parse step, run once per reply, that every dialect shares.

The grammar is the part of CommonMark and GitHub Markdown that language models
use: fenced code (an unclosed fence runs to the end), ATX headings and ``===``
underlines, ``>`` quotes, bullet and numbered lists nested by indentation, pipe
tables, thematic breaks and paragraphs. Deliberate differences, chosen for model
output rather than documents: ``---`` under text is a rule, not a heading;
indented code blocks do not exist (indentation only nests lists); raw HTML is
text; any list marker may interrupt a paragraph; a list item takes every
following line indented further than its marker; task boxes (``- [x]``) become
``☑``/``☐``.
"""

from __future__ import annotations

import re
from typing import Final

from gateway.delivery.formatting.inline import parse_inline
from gateway.delivery.formatting.ir import (
    Block,
    CodeBlock,
    Heading,
    Line,
    ListBlock,
    Paragraph,
    Quote,
    Rule,
    Table,
)

_FENCE = re.compile(r"^([ \t]*)(`{3,}|~{3,})(.*)$")
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT_H1 = re.compile(r"^ {0,3}=+[ \t]*$")
_RULE = re.compile(r"^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$")
_QUOTE = re.compile(r"^ {0,3}> ?")
_ITEM = re.compile(r"^([ \t]*)([-*+]|\d{1,9}[.)])(?:([ \t]+)(.*))?$")
_DELIMITER_ROW = re.compile(r"^[ \t]*\|?[ \t]*:?-+:?[ \t]*(?:\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$")
_LANG = re.compile(r"[^A-Za-z0-9_+#.-]")
_TASK = re.compile(r"^\[([ xX])\][ \t]+")
_MAX_DEPTH: Final = 16


def parse(text: str) -> tuple[Block, ...]:
    """Parse model Markdown into blocks. Never raises; unrecognised syntax stays text."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\x00", "\ufffd")
    return tuple(_parse_blocks(text.split("\n"), 0))


def open_fence(text: str) -> int | None:
    """The line (0-based) of the code fence still open at the end of ``text``, or None: for a reply still
    being written, whose end may be inside a code block (fences inside quotes are not looked at)."""
    opened: tuple[int, re.Pattern[str]] | None = None
    for number, line in enumerate(text.replace("\r\n", "\n").split("\n")):
        if opened is not None:
            if opened[1].match(line):
                opened = None
        elif (fence := _opens_fence(line)) is not None:
            marker = fence.group(2)
            opened = number, re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
    return opened[0] if opened else None


def _width(indent: str) -> int:
    return sum(4 if char == "\t" else 1 for char in indent)


def _indent_of(line: str) -> int:
    return _width(line[: len(line) - len(line.lstrip(" \t"))])


def _dedent(line: str, columns: int) -> str:
    index = width = 0
    while index < len(line) and line[index] in " \t" and width < columns:
        width += 4 if line[index] == "\t" else 1
        index += 1
    return line[index:]


def _is_blank(line: str) -> bool:
    return not line.strip()


def _is_table_start(lines: list[str], index: int) -> bool:
    return (
        "|" in lines[index]
        and index + 1 < len(lines)
        and "-" in lines[index + 1]
        and _DELIMITER_ROW.match(lines[index + 1]) is not None
        and ("|" in lines[index + 1] or lines[index].strip().startswith("|"))
    )


def _opens_fence(line: str) -> re.Match[str] | None:
    found = _FENCE.match(line)
    if found and found.group(2)[0] == "`" and "`" in found.group(3):
        return None
    return found


def _starts_block(lines: list[str], index: int) -> bool:
    line = lines[index]
    return bool(
        _opens_fence(line)
        or _HEADING.match(line)
        or _RULE.match(line)
        or _QUOTE.match(line)
        or _ITEM.match(line)
        or _is_table_start(lines, index)
    )


def _parse_blocks(lines: list[str], depth: int) -> list[Block]:
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        if _is_blank(line):
            index += 1
            continue
        if depth >= _MAX_DEPTH:
            block, index = _paragraph(lines, index, stop_at_blocks=False)
        elif (fence := _opens_fence(line)) is not None:
            block, index = _code(lines, index, fence)
        elif (heading := _HEADING.match(line)) is not None:
            block, index = Heading(len(heading.group(1)), parse_inline(heading.group(2) or "")), index + 1
        elif _RULE.match(line):
            block, index = Rule(), index + 1
        elif _QUOTE.match(line):
            block, index = _quote(lines, index, depth)
        elif _ITEM.match(line):
            block, index = _list(lines, index, depth)
        elif _is_table_start(lines, index):
            block, index = _table(lines, index)
        else:
            block, index = _paragraph(lines, index, stop_at_blocks=True)
        if not isinstance(block, Paragraph | Heading) or any(block.lines):
            blocks.append(block)
    return blocks


def _paragraph(lines: list[str], index: int, *, stop_at_blocks: bool) -> tuple[Block, int]:
    collected = [lines[index].strip()]
    index += 1
    while index < len(lines) and not _is_blank(lines[index]):
        if _SETEXT_H1.match(lines[index]):
            return Heading(1, parse_inline("\n".join(collected))), index + 1
        if stop_at_blocks and _starts_block(lines, index):
            break
        collected.append(lines[index].strip())
        index += 1
    return Paragraph(parse_inline("\n".join(collected))), index


def _code(lines: list[str], index: int, fence: re.Match[str]) -> tuple[Block, int]:
    indent, marker, info = _width(fence.group(1)), fence.group(2), fence.group(3).strip()
    lang = _LANG.sub("", info.split()[0])[:32] if info else ""
    closer = re.compile(rf"^[ \t]*{re.escape(marker[0])}{{{len(marker)},}}[ \t]*$")
    body: list[str] = []
    index += 1
    while index < len(lines) and not closer.match(lines[index]):
        body.append(_dedent(lines[index], indent))
        index += 1
    while body and _is_blank(body[-1]):
        body.pop()
    while body and _is_blank(body[0]):
        body.pop(0)
    return CodeBlock(lang, "\n".join(body)), index + 1


def _quote(lines: list[str], index: int, depth: int) -> tuple[Block, int]:
    inner: list[str] = []
    while index < len(lines):
        line = lines[index]
        marker = _QUOTE.match(line)
        if marker:
            inner.append(line[marker.end() :])
        elif inner and not _is_blank(inner[-1]) and not _is_blank(line) and not _starts_block(lines, index):
            inner.append(line)  # a lazy continuation of the quoted paragraph
        else:
            break
        index += 1
    return Quote(tuple(_parse_blocks(inner, depth + 1))), index


def _list(lines: list[str], index: int, depth: int) -> tuple[Block, int]:
    first = _ITEM.match(lines[index])
    assert first is not None
    base = _width(first.group(1))
    ordered = first.group(2)[0].isdigit()
    start = int(first.group(2)[:-1]) if ordered else 1
    items: list[tuple[Block, ...]] = []
    while index < len(lines):
        item = _ITEM.match(lines[index])
        if item is None or _RULE.match(lines[index]) or item.group(2)[0].isdigit() != ordered:
            break
        marker_indent = _width(item.group(1))
        if not base - 1 <= marker_indent <= base + 1:
            break
        body, index = _item_body(lines, index, item)
        items.append(tuple(_parse_blocks(body, depth + 1)))
        while index < len(lines) and _is_blank(lines[index]):
            nxt = index
            while nxt < len(lines) and _is_blank(lines[nxt]):
                nxt += 1
            sibling = nxt < len(lines) and _ITEM.match(lines[nxt])
            if not sibling or not base - 1 <= _indent_of(lines[nxt]) <= base + 1:
                return ListBlock(ordered, start, tuple(items)), index
            index = nxt
    return ListBlock(ordered, start, tuple(items)), index


def _item_body(lines: list[str], index: int, item: re.Match[str]) -> tuple[list[str], int]:
    marker_indent = _width(item.group(1))
    spacing = _width(item.group(3) or " ")
    content = _TASK.sub(lambda box: "☐ " if box.group(1) == " " else "☑ ", item.group(4) or "", count=1)
    column = marker_indent + len(item.group(2)) + (spacing if 1 <= spacing <= 4 and content else 1)
    body = [content]
    fence = _fence_state(None, content)
    index += 1
    while index < len(lines):
        line = lines[index]
        if _is_blank(line) and fence is None:
            nxt = index
            while nxt < len(lines) and _is_blank(lines[nxt]):
                nxt += 1
            if nxt < len(lines) and _indent_of(lines[nxt]) > marker_indent + 1:
                body.extend([""] * (nxt - index))
                index = nxt
                continue
            break
        indent = _indent_of(line)
        if indent > marker_indent + 1 or (indent > marker_indent and not _ITEM.match(line)):
            body.append(_dedent(line, min(indent, column)))
        elif fence is not None:
            body.append(line)  # code inside the item's fence, written less indented than the item
        elif not _is_blank(body[-1]) and not _starts_block(lines, index):
            body.append(line.strip())  # a lazy continuation line
        else:
            break
        fence = _fence_state(fence, body[-1])
        index += 1
    return body, index


def _fence_state(fence: str | None, line: str) -> str | None:
    """The open fence marker after ``line``, given the one open before it (None: outside code)."""
    if fence is None:
        found = _opens_fence(line)
        return found.group(2) if found else None
    stripped = line.strip()
    closes = stripped.startswith(fence) and not stripped.strip(fence[0])
    return None if closes else fence


def _table(lines: list[str], index: int) -> tuple[Block, int]:
    header = _cells(lines[index])
    aligns = tuple(_align(cell) for cell in _cells(lines[index + 1]))
    rows: list[tuple[Line, ...]] = []
    index += 2
    while index < len(lines) and "|" in lines[index] and not _is_blank(lines[index]):
        if _opens_fence(lines[index]) or _QUOTE.match(lines[index]):
            break
        rows.append(tuple(_cell_line(cell) for cell in _cells(lines[index])))
        index += 1
    return Table(tuple(_cell_line(cell) for cell in header), tuple(rows), aligns), index


def _cells(row: str) -> list[str]:
    row = row.strip()
    if row.startswith("|"):
        row = row[1:]
    if row.endswith("|") and not row.endswith("\\|"):
        row = row[:-1]
    cells, current, ticks, pos = [], [], 0, 0
    while pos < len(row):
        char = row[pos]
        if char == "\\" and pos + 1 < len(row):
            current.append(row[pos : pos + 2])
            pos += 2
            continue
        if char == "`":
            ticks ^= 1
        if char == "|" and not ticks:
            cells.append("".join(current).strip())
            current = []
        else:
            current.append(char)
        pos += 1
    cells.append("".join(current).strip())
    return cells


def _cell_line(cell: str) -> Line:
    lines = parse_inline(cell)
    return tuple(span for line in lines for span in line)


def _align(cell: str) -> str:
    cell = cell.strip()
    if cell.startswith(":") and cell.endswith(":"):
        return "center"
    if cell.endswith(":"):
        return "right"
    return "left" if cell.startswith(":") else ""

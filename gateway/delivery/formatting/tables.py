"""Pipe tables, rewritten into blocks every chat dialect can show.

None of the three chat platforms renders Markdown tables. A narrow table becomes a
code block with aligned columns; a wide one (which would wrap on a phone) becomes
one short record per row: the first cell in bold, then ``• header: value`` lines.
"""

from __future__ import annotations

from typing import Final

from gateway.delivery.formatting.ir import Block, CodeBlock, Line, Paragraph, Span, Style, Table, line_text
from gateway.delivery.formatting.lengths import display_width

MAX_ALIGNED_WIDTH: Final = 56
"""Widest table, in monospace columns, still shown as an aligned code block."""


def table_blocks(table: Table, *, max_width: int = MAX_ALIGNED_WIDTH) -> list[Block]:
    """The blocks that show ``table``: one aligned code block, or one paragraph per row."""
    columns = max([len(table.header), *(len(row) for row in table.rows)])
    header = _pad(table.header, columns)
    rows = [_pad(row, columns) for row in table.rows]
    texts = [[line_text(cell, with_urls=True) for cell in row] for row in [header, *rows]]
    widths = [max(display_width(row[col]) for row in texts) for col in range(columns)]
    if sum(widths) + 3 * (columns - 1) <= max_width:
        return [CodeBlock("", _aligned(texts, widths, table.aligns))]
    if not rows:
        joined: list[Span] = []
        for col, cell in enumerate(header):
            joined.extend([Span(" | ")] if col else [])
            joined.extend(cell)
        return [Paragraph((tuple(joined),))]
    return [_record(header, row) for row in rows]


def _pad(row: tuple[Line, ...], columns: int) -> tuple[Line, ...]:
    return row + ((),) * (columns - len(row))


def _aligned(texts: list[list[str]], widths: list[int], aligns: tuple[str, ...]) -> str:
    def cell(text: str, col: int) -> str:
        gap = widths[col] - display_width(text)
        align = aligns[col] if col < len(aligns) else ""
        if align == "right":
            return " " * gap + text
        if align == "center":
            return " " * (gap // 2) + text + " " * (gap - gap // 2)
        return text + " " * gap

    lines = [" | ".join(cell(text, col) for col, text in enumerate(row)).rstrip() for row in texts]
    rule = "-+-".join("-" * width for width in widths)
    return "\n".join([lines[0], rule, *lines[1:]])


def _record(header: tuple[Line, ...], row: tuple[Line, ...]) -> Paragraph:
    title = tuple(Span(span.text, span.styles | {Style.BOLD}, span.href, span.kind) for span in row[0])
    lines: list[Line] = [title] if title else []
    for label, cell in zip(header[1:], row[1:], strict=True):
        if not cell:
            continue
        name = line_text(label).strip()
        lines.append((Span(f"• {name}: " if name else "• "), *cell))
    return Paragraph(tuple(lines))

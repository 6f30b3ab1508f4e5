"""STAND-IN for i27-budget's safe preview of partial Markdown (branch i27-budget owns this file: take theirs).

The renderer already closes what the partial text leaves open (a fence without its end is a code
block to the end, an unmatched ``**`` is literal), so the stand-in renders the text and keeps the
first chunk; what does not fit waits for the final chunks.
"""

from __future__ import annotations

from adapters.contract import Markup
from gateway.delivery.formatting import Chunk, render


def preview(text: str, markup: Markup, *, max_length: int, length_unit: str) -> Chunk:
    """``text`` (model Markdown, possibly cut mid-way) as one message of ``markup``."""
    chunks = render(text, markup, max_length=max_length, length_unit=length_unit)
    return chunks[0] if chunks else Chunk(text="", plain="")

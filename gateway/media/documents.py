"""Documents users send, read: a PDF's pages and text (pypdf), a text file's text.

Both are synchronous and CPU-bound (the pipeline runs them in a thread), and both are bounded:
a PDF is refused for its page count before any page is read, and the text taken from either
stops at ``max_chars`` (``cut`` then says more was there).
"""

from __future__ import annotations

import codecs
import io
from dataclasses import dataclass

from pypdf import PdfReader

from gateway.media.errors import MediaRejected


@dataclass(frozen=True, slots=True)
class PdfText:
    pages: int
    text: str
    """The text of the pages in order, each after a ``--- page N ---`` line; empty for a scanned PDF."""
    cut: bool
    """The text stops at the character limit; the document holds more."""


def read_pdf(data: bytes, *, max_pages: int, max_chars: int) -> PdfText:
    """The page count and text of the PDF ``data``.

    Raises :class:`MediaRejected`: ``corrupt`` (not readable as a PDF, or no pages), ``encrypted``
    (password or copy protection: providers refuse such files, and their text cannot be read),
    ``too_many_pages`` (over ``max_pages``, checked before any text is extracted).
    """
    try:
        reader = PdfReader(io.BytesIO(data))
        encrypted = reader.is_encrypted
        pages = 0 if encrypted else len(reader.pages)
    except Exception as error:  # noqa: BLE001 - any failure to parse untrusted bytes means the same to the user
        raise MediaRejected("corrupt", "the PDF is damaged and could not be read") from error
    if encrypted:
        raise MediaRejected("encrypted", "the PDF is encrypted (password or copy protection); "
                                         "a copy saved without the protection can be read")  # fmt: skip
    if pages == 0:
        raise MediaRejected("corrupt", "the PDF has no pages")
    if pages > max_pages:
        raise MediaRejected("too_many_pages", f"it has {pages:,} pages and the limit is {max_pages:,}")
    chunks: list[str] = []
    length = 0
    for number, page in enumerate(reader.pages, start=1):
        try:
            text = page.extract_text().strip()
        except Exception:  # noqa: BLE001 - a page whose content cannot be read has no text to give; the rest may
            text = ""
        if not text:
            continue
        chunk = f"--- page {number} ---\n{text}\n"
        chunks.append(chunk)
        length += len(chunk)
        if length > max_chars:
            break
    text, cut = _cut("\n".join(chunks).rstrip(), max_chars)
    return PdfText(pages, text, cut)


def read_text(data: bytes, *, max_chars: int) -> tuple[str, bool]:
    """The text of a text file (UTF-8, or UTF-16 with its byte order mark), newlines as ``\\n``, cut at
    ``max_chars``; and whether it was cut."""
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        text = data.decode("utf-16", errors="replace")
    else:
        text = data.decode("utf-8-sig", errors="replace")
    return _cut(text.replace("\r\n", "\n").replace("\r", "\n"), max_chars)


def _cut(text: str, max_chars: int) -> tuple[str, bool]:
    if len(text) <= max_chars:
        return text, False
    return text[:max_chars], True

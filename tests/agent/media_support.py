"""Pictures and documents for the agent's media tests: tiny real files, their parts, a media source."""

from __future__ import annotations

import hashlib
import struct
import zlib
from dataclasses import replace

from agent.media import MediaPart

SENT_AT = 1_795_788_120.0
"""2026-11-27 14:02 UTC."""
SENT_TEXT = "sent 2026-11-27 14:02 UTC"


def png(width: int, height: int) -> bytes:
    """A valid grey PNG of ``width`` x ``height`` pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    rows = b"".join(b"\x00" + b"\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


PDF = b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\ntrailer << /Root 1 0 R >>\n%%EOF\n"
PDF_TEXT = "Quarterly report. Revenue rose 12 percent."
NOTES = "line one of the notes\nline two of the notes\n"


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class MemorySource:
    """A :class:`agent.media.MediaSource` over a dict (the gateway's is the home's media folder)."""

    def __init__(self, *blobs: bytes) -> None:
        self.files = {sha(blob): blob for blob in blobs}
        self.reads: list[str] = []

    def add(self, data: bytes) -> str:
        self.files[sha(data)] = data
        return sha(data)

    async def read(self, sha256: str) -> bytes | None:
        self.reads.append(sha256)
        return self.files.get(sha256)


def image_part(data: bytes, width: int, height: int, **fields: object) -> MediaPart:
    part = MediaPart(kind="image", mime="image/png", sha256=sha(data), size=len(data), origin="photo",
                     name="screen.png", width=width, height=height, sent_at=SENT_AT)  # fmt: skip
    return replace(part, **fields)  # type: ignore[arg-type]


def pdf_part(**fields: object) -> MediaPart:
    text = PDF_TEXT.encode()
    part = MediaPart(kind="pdf", mime="application/pdf", sha256=sha(PDF), size=len(PDF), origin="document",
                     name="report.pdf", pages=2, text_sha256=sha(text), text_tokens=12, sent_at=SENT_AT)  # fmt: skip
    return replace(part, **fields)  # type: ignore[arg-type]


def text_part() -> MediaPart:
    data = NOTES.encode()
    return MediaPart(kind="text", mime="text/plain", sha256=sha(data), size=len(data), origin="document",
                     name="notes.txt", text_sha256=sha(data), text_tokens=14, sent_at=SENT_AT)  # fmt: skip


def every_file() -> MemorySource:
    """A source holding the PDF, its text and the notes (add pictures with ``add``)."""
    return MemorySource(PDF, PDF_TEXT.encode(), NOTES.encode())

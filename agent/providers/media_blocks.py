"""A message's pictures and documents as content blocks of each wire format.

A user message carries what the user sent; a tool message the pictures the tool returned
(:func:`tool_content`: its text first, then the pictures, as a tool's output reads).

Pure and synchronous: the bytes come with the request (``ModelRequest.media``, read by the loop
before the call), keyed by the part's ``sha256`` (and ``text_sha256`` for extracted text).
The parts go before the message's text, in the order the user sent them:

=============  ====================================  ======================================
part           Anthropic (``style="anthropic"``)     OpenAI-compatible (``style="openai"``)
=============  ====================================  ======================================
image          ``image`` block, base64               ``image_url`` part, a ``data:`` URL
pdf            ``document`` block, base64            its extracted text
text file      its text                              its text
=============  ====================================  ======================================

A model without vision gets a one-line stand-in for each picture, and a PDF's extracted text
instead of the document (it needs no vision to read text). A part whose bytes are no longer
kept gets a stand-in saying so. One request carries at most :data:`MAX_PICTURES` pictures and
:data:`MAX_FILE_BYTES` of pictures and PDFs: in a long conversation the oldest beyond that are
stand-ins (:func:`left_out`), so the request stays within what the APIs take.

Nothing here varies between two calls with the same bytes, so the blocks are as stable as the
text around them (a cache breakpoint may sit on them).
"""

from __future__ import annotations

import base64
from collections.abc import Container, Mapping, Sequence
from typing import Any, Final

from agent.media import MediaPart, ProviderStyle, standin
from agent.messages import ChatMessage

__all__ = [
    "ANTHROPIC_IMAGE_TYPES",
    "MAX_FILE_BYTES",
    "MAX_PICTURES",
    "LEFT_OUT",
    "MISSING",
    "NO_VISION",
    "document_text",
    "left_out",
    "media_content",
    "needed",
    "tool_content",
]

ANTHROPIC_IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The picture types both APIs read (OpenAI reads the same four)."""
MISSING: Final = "no longer kept"
NO_VISION: Final = "not shown: this model cannot see images"
UNREADABLE: Final = "not shown: a picture type the model does not read"
LEFT_OUT: Final = "left out of this request to keep it within the API's limits"
MAX_PICTURES: Final = 100
"""The most pictures one request carries (Anthropic refuses more)."""
MAX_FILE_BYTES: Final = 20_000_000
"""The most bytes of pictures and PDFs one request carries: as base64 they are a third larger, and
Anthropic takes 32 MB a request (OpenAI 50 MB of pictures)."""
NO_TEXT: Final = "not shown: no text could be read from it, and this model takes no PDF documents"


def media_content(
    parts: tuple[MediaPart, ...],
    text: str,
    *,
    media: Mapping[str, bytes],
    style: ProviderStyle,
    vision: bool,
    omitted: Container[int] = (),
) -> list[dict[str, Any]] | str:
    """The content of a user message with ``parts``: their blocks, then ``text`` (when not blank).

    ``omitted``: the indexes of parts left out of this request (:func:`left_out`). On the OpenAI
    layout a message that comes out as text only is one string, which every compatible server
    reads (a local text-only model included).
    """
    blocks = [
        _text(standin(part, LEFT_OUT)) if index in omitted else _block(part, media, style, vision)
        for index, part in enumerate(parts)
    ]
    if text.strip():
        blocks.append({"type": "text", "text": text})
    if style == "openai" and all(block["type"] == "text" for block in blocks):
        return "\n\n".join(block["text"] for block in blocks)
    return blocks


def tool_content(
    message: ChatMessage,
    *,
    media: Mapping[str, bytes],
    style: ProviderStyle,
    vision: bool,
    omitted: Container[int] = (),
) -> list[dict[str, Any]]:
    """The blocks of a tool message with pictures: its text (when not blank), then each picture or the
    line standing for it (no vision, no longer kept, left out of this request)."""
    blocks = [_text(message.content)] if message.content.strip() else []
    blocks.extend(
        _text(standin(part, LEFT_OUT)) if index in omitted else _block(part, media, style, vision)
        for index, part in enumerate(message.media)
    )
    return blocks


def needed(part: MediaPart, *, style: ProviderStyle, vision: bool) -> str | None:
    """The name of the bytes :func:`media_content` reads for ``part`` (what the loop fetches); None: none."""
    if part.kind == "image":
        return part.sha256 if vision and part.mime in ANTHROPIC_IMAGE_TYPES else None
    if _as_document(part, style, vision):
        return part.sha256
    return part.text_sha256 or (part.sha256 if part.kind == "text" else None)


def left_out(messages: Sequence[ChatMessage], *, style: ProviderStyle, vision: bool) -> set[tuple[int, int]]:
    """The (message, part) indexes of the files a request leaves out: the oldest pictures and PDFs
    beyond :data:`MAX_PICTURES` pictures or :data:`MAX_FILE_BYTES` bytes (by the parts' sizes, so
    the loop need not read them), counted from the newest."""
    pictures = size = 0
    omitted: set[tuple[int, int]] = set()
    for at in range(len(messages) - 1, -1, -1):
        parts = messages[at].media if messages[at].role in ("user", "tool") else ()
        for index in range(len(parts) - 1, -1, -1):
            part = parts[index]
            if needed(part, style=style, vision=vision) != part.sha256 or part.kind == "text":
                continue  # sent as text, or a stand-in anyway
            pictures += part.kind == "image"
            size += part.size
            if pictures > MAX_PICTURES or size > MAX_FILE_BYTES:
                omitted.add((at, index))
    return omitted


def _as_document(part: MediaPart, style: ProviderStyle, vision: bool) -> bool:
    """A PDF goes as a document to Claude with vision; elsewhere as its extracted text."""
    return part.kind == "pdf" and style == "anthropic" and vision


def _block(part: MediaPart, media: Mapping[str, bytes], style: ProviderStyle, vision: bool) -> dict[str, Any]:
    if part.kind == "image" and not vision:
        return _text(standin(part, NO_VISION))
    if part.kind == "image" and part.mime not in ANTHROPIC_IMAGE_TYPES:
        return _text(standin(part, UNREADABLE))
    name = needed(part, style=style, vision=vision)
    if name is None:
        return _text(standin(part, NO_TEXT))
    data = media.get(name)
    if data is None:
        return _text(standin(part, MISSING))
    if part.kind == "image":
        encoded = base64.b64encode(data).decode("ascii")
        if style == "anthropic":
            return {"type": "image", "source": {"type": "base64", "media_type": part.mime, "data": encoded}}
        return {"type": "image_url", "image_url": {"url": f"data:{part.mime};base64,{encoded}"}}
    if _as_document(part, style, vision):
        source = {"type": "base64", "media_type": "application/pdf", "data": base64.b64encode(data).decode("ascii")}
        return {"type": "document", "source": source, **({"title": part.name} if part.name else {})}
    return _text(document_text(part, data.decode("utf-8", "replace")))


def document_text(part: MediaPart, text: str) -> str:
    """A document's text as the model reads it: a line naming it, the text, a line closing it."""
    name = part.name or part.origin
    return f"{standin(part, f'its text follows, up to [end of {name}]')}\n{text}\n[end of {name}]"


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}

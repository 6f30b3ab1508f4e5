"""Pictures and documents in a request: what the fake model server reads off them.

A request may carry media three ways: Anthropic ``image`` and ``document`` content blocks with a
base64 ``source`` (also inside a ``tool_result`` block's content: a tool's pictures), and OpenAI
``image_url`` content parts holding a ``data:`` URL. Tests read
them from :attr:`RequestRecord.media <tests.fakes.model_server.records.RequestRecord.media>` as
:class:`MediaSeen` values (the bytes decoded), in the order they appear in the request.

Counting: a real API counts a picture by its pixels (Anthropic about width x height / 750) and a
PDF by its pages, never by the length of its base64, so the fake does not either. Every media
item's payload (the base64 data, the data URL) counts :data:`MEDIA_TOKENS` tokens in place of
its text; the rest of the block counts as any other block (see ``prompt.py``). The payload still
belongs to the block's identity, so another picture is another cache prefix.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, Literal

MEDIA_TOKENS: Final = 1_600
"""What one picture or document counts, whatever its size (Anthropic's cost of a full-size image)."""

MediaWire = Literal["image", "document", "image_url"]


@dataclass(frozen=True)
class MediaSeen:
    """One picture or document as the request carried it."""

    wire: MediaWire
    """``image`` / ``document`` (Anthropic blocks) or ``image_url`` (an OpenAI part)."""
    media_type: str
    """The declared type: the source's ``media_type``, or the data URL's."""
    data: bytes
    """The decoded bytes (empty when the base64 would not decode)."""
    message: int
    """The index of the message in the request's ``messages``."""
    position: int
    """The index of the block within that message's content."""
    block: Mapping[str, Any]
    """The block or part exactly as sent (its base64 included), with any ``cache_control``."""
    tool_use_id: str | None = None
    """Set for a picture inside an Anthropic ``tool_result`` block (``position`` is that block's then)."""

    @property
    def cache_control(self) -> Mapping[str, Any] | None:
        marker = self.block.get("cache_control")
        return marker if isinstance(marker, Mapping) else None


def media_in(messages: list[Mapping[str, Any]]) -> list[MediaSeen]:
    """Every picture and document the ``messages`` carry, in order."""
    seen: list[MediaSeen] = []
    for index, message in enumerate(messages):
        content = message.get("content")
        for position, block in enumerate(content if isinstance(content, list) else ()):
            item = _read(block, index, position) if isinstance(block, Mapping) else None
            if item is not None:
                seen.append(item)
            inner = block.get("content") if isinstance(block, Mapping) and block.get("type") == "tool_result" else None
            for part in inner if isinstance(inner, list) else ():
                item = _read(part, index, position) if isinstance(part, Mapping) else None
                if item is not None:
                    seen.append(replace(item, tool_use_id=str(block.get("tool_use_id"))))
    return seen


def _read(block: Mapping[str, Any], message: int, position: int) -> MediaSeen | None:
    kind = block.get("type")
    if kind in ("image", "document"):
        source = block.get("source")
        if isinstance(source, Mapping) and source.get("type") == "base64":
            data = _decode(str(source.get("data") or ""))
            return MediaSeen(kind, str(source.get("media_type") or ""), data, message, position, block)
    if kind == "image_url":
        url = str((block.get("image_url") or {}).get("url") or "")
        header, _, payload = url.partition(",")
        if url.startswith("data:") and header.endswith(";base64"):
            media_type = header[len("data:") : -len(";base64")]
            return MediaSeen("image_url", media_type, _decode(payload), message, position, block)
    return None


def _decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return b""


def without_payloads(value: Any) -> tuple[Any, int]:
    """``value`` (a block, or a whole OpenAI message) with every media payload emptied, and how
    many there were: what the fake counts in place of the payloads' length."""
    found = 0

    def strip(item: Any) -> Any:
        nonlocal found
        if isinstance(item, list):
            return [strip(element) for element in item]
        if not isinstance(item, Mapping):
            return item
        source, image_url = item.get("source"), item.get("image_url")
        if item.get("type") in ("image", "document") and isinstance(source, Mapping) and source.get("type") == "base64":
            found += 1
            return {**item, "source": {**source, "data": ""}}
        if item.get("type") == "image_url" and isinstance(image_url, Mapping):
            url = str(image_url.get("url") or "")
            if url.startswith("data:"):
                found += 1
                return {**item, "image_url": {**image_url, "url": url.partition(",")[0] + ","}}
        return {key: strip(element) for key, element in item.items()}

    return strip(value), found

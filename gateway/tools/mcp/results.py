"""What an MCP server's tool returned, made into what the model reads: text, pictures, resources, a budget.

* text blocks are kept as they are, one after the other;
* pictures (png, jpeg, gif, webp) become :class:`ToolImage` values; other picture types, audio and
  binary resources are named in the text instead (the model cannot read them);
* an embedded text resource is inlined under its URI; a resource link is named with its URI;
* structured content is used only when the server sent no text (it normally repeats it as text).

The text is cut to ``budget`` characters with a note saying how much was left out, so one chatty
tool cannot fill the model's context.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Final

import mcp.types as types

from agent import ToolImage, ToolResult

PICTURE_TYPES: Final = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})


def convert(result: types.CallToolResult, budget: int) -> ToolResult:
    """The model's view of ``result``; ``is_error`` when the server said the call failed."""
    parts: list[str] = []
    images: list[ToolImage] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent):
            picture = _picture(block)
            if picture is not None:
                images.append(picture)
            else:
                parts.append(f"[a picture of type {block.mime_type} that cannot be shown here]")
        elif isinstance(block, types.AudioContent):
            parts.append(f"[an audio clip of type {block.mime_type} that cannot be played here]")
        elif isinstance(block, types.EmbeddedResource):
            parts.append(_resource(block.resource))
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource {block.uri}" + (f": {block.description}]" if block.description else "]"))
        else:
            parts.append(f"[content of type {getattr(block, 'type', '?')} that cannot be shown here]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, indent=1))
    text = "\n".join(parts)
    if not text and not images:
        text = "(the tool returned nothing)" if not result.is_error else "(the tool failed without saying why)"
    return ToolResult(cut(text, budget), tuple(images), is_error=result.is_error)


def cut(text: str, budget: int) -> str:
    """``text``, or its first ``budget`` characters and a note saying how much was left out."""
    if len(text) <= budget:
        return text
    return text[:budget] + f"\n[cut: the tool returned {len(text):,} characters; only the first {budget:,} are shown]"


def _picture(block: types.ImageContent) -> ToolImage | None:
    if block.mime_type not in PICTURE_TYPES:
        return None
    try:
        return ToolImage(base64.b64decode(block.data, validate=True), block.mime_type)
    except (binascii.Error, ValueError):
        return None


def _resource(resource: types.TextResourceContents | types.BlobResourceContents) -> str:
    if isinstance(resource, types.TextResourceContents):
        return f"[resource {resource.uri}]\n{resource.text}"
    kind = resource.mime_type or "binary data"
    return f"[resource {resource.uri}: {kind} that cannot be shown here]"

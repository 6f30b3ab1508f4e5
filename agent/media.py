"""Pictures and documents in a conversation: what the agent knows of them, and what they cost.

A user message may carry :class:`MediaPart` values beside its text: a photo, a PDF, a text
file. A part holds a reference, never the bytes: ``sha256`` names the bytes in a store the
agent does not know (the gateway keeps them in the home's media folder and hands the agent a
:class:`MediaSource` to read them by that name). Before each model call the loop reads the
bytes of every part in the request; a part whose bytes are gone (pruned after the retention
period) is sent as a short text stand-in instead (:func:`standin`).

A tool may return pictures too (``agent.tools.ToolResult``): the loop hands their bytes to an
injected :class:`MediaSink` (the gateway's media folder, after the same downscaling users'
photos get), which keeps them and says what it kept (:class:`KeptImage`); they then ride on the
tool's message as parts of origin ``"tool"`` (:data:`TOOL_ORIGIN`).

What a part costs is counted the way the provider counts it (:func:`image_tokens`,
:func:`document_tokens`), from the picture's size in pixels and the document's pages, never
from the length of its base64.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, fields
from typing import Any, Final, Literal, Protocol

MediaKind = Literal["image", "pdf", "text"]
ProviderStyle = Literal["anthropic", "openai"]

ANTHROPIC_MAX_EDGE: Final = 1568
"""Anthropic scales any image whose long edge is longer than this down first (its docs' figure)."""
ANTHROPIC_MAX_PIXELS: Final = 1_150_000
"""... or which has more pixels than this (about 1,600 tokens); we downscale to fit both before sending."""
ANTHROPIC_PIXELS_PER_TOKEN: Final = 750
"""Anthropic: an image costs about width x height / 750 tokens."""
OPENAI_TILE: Final = 512
OPENAI_BASE_TOKENS: Final = 85
OPENAI_TILE_TOKENS: Final = 170
"""OpenAI (GPT-4o family, high detail): fit in 2048 x 2048, shortest side to 768, then 85 + 170 per 512 px tile."""
PDF_PAGE_IMAGE_TOKENS: Final = 1_600
"""Anthropic reads each PDF page as text and as a picture of the page; the picture part of a
page at its usual size is about this many tokens (its docs give 1,500 to 3,000 per page in all)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MediaPart:
    """One picture or document a user sent, by reference."""

    kind: MediaKind
    """image: sent as an image block; pdf: a document block (Anthropic) or its text (elsewhere); text: its text."""
    mime: str
    """The type sniffed from the bytes (image/jpeg, image/png, image/gif, image/webp, application/pdf, text/plain)."""
    sha256: str
    """The name of the bytes sent to the model (for an image: the downscaled picture)."""
    size: int
    """Bytes of what ``sha256`` names."""
    origin: str = "photo"
    """What the user sent, in their words: photo, image, document, pdf, file; ``"tool"`` for a picture a
    tool returned."""
    name: str | None = None
    """The file name the platform gave, if any."""
    width: int | None = None
    height: int | None = None
    pages: int | None = None
    text_sha256: str | None = None
    """The extracted text (PDF) or the decoded text (text file), UTF-8, by the same kind of name."""
    text_tokens: int | None = None
    """The estimated tokens of that text."""
    sent_at: float | None = None
    """When the user sent it (epoch seconds), for stand-ins and compaction summaries."""
    file_id: str | None = None
    """The platform's own id of the file."""

    def to_dict(self) -> dict[str, Any]:
        return {key: value for key, value in asdict(self).items() if value is not None}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> MediaPart:
        known = {f.name for f in fields(cls)}
        return cls(**{key: value for key, value in data.items() if key in known})


class MediaSource(Protocol):
    """Where the agent reads a part's bytes (injected; the gateway's media folder)."""

    async def read(self, sha256: str) -> bytes | None:
        """The bytes named ``sha256``, or None when they are no longer kept."""
        ...


TOOL_ORIGIN: Final = "tool"
"""The ``origin`` of a picture a tool returned (it rides on the tool's message)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class KeptImage:
    """A picture a :class:`MediaSink` kept: the name of the bytes it keeps, and what they are."""

    sha256: str
    mime: str
    size: int
    width: int | None = None
    height: int | None = None


class MediaSink(Protocol):
    """Where the agent keeps the pictures tools return (injected; the gateway's media folder)."""

    async def keep_image(self, data: bytes, mime: str) -> KeptImage:
        """Keep the picture ``data`` (made ready for the model as the keeper sees fit: checked,
        downscaled, re-encoded) and say what was kept. Raises when it cannot be kept (not a picture,
        damaged, too large); the message says why."""
        ...


def image_tokens(width: int, height: int, style: ProviderStyle = "anthropic") -> int:
    """The tokens an image of ``width`` x ``height`` pixels costs, as the provider counts it."""
    if width <= 0 or height <= 0:
        return 0
    if style == "openai":
        # Whole pixels after each step, as the API resizes: a 1238 x 928 picture becomes 1024 x 768
        # (4 tiles), not 1024.6 x 768 (6).
        scale = min(1.0, 2048 / max(width, height))
        w, h = int(width * scale), int(height * scale)
        scale = min(1.0, 768 / min(w, h))
        w, h = int(w * scale), int(h * scale)
        return OPENAI_BASE_TOKENS + OPENAI_TILE_TOKENS * math.ceil(w / OPENAI_TILE) * math.ceil(h / OPENAI_TILE)
    scale = min(1.0, ANTHROPIC_MAX_EDGE / max(width, height), math.sqrt(ANTHROPIC_MAX_PIXELS / (width * height)))
    return max(1, math.ceil(width * scale * (height * scale) / ANTHROPIC_PIXELS_PER_TOKEN))


def document_tokens(part: MediaPart, style: ProviderStyle = "anthropic") -> int:
    """The tokens a PDF or text part costs: its text, and for a PDF read by Anthropic a picture per page."""
    text = part.text_tokens or 0
    if part.kind == "pdf" and style == "anthropic":
        return text + PDF_PAGE_IMAGE_TOKENS * (part.pages or 1)
    return text


def part_tokens(part: MediaPart, style: ProviderStyle = "anthropic") -> int:
    """What one part costs in a request."""
    if part.kind == "image":
        return image_tokens(part.width or 0, part.height or 0, style)
    return document_tokens(part, style)


def standin(part: MediaPart, why: str = "") -> str:
    """One line standing for a part the model does not get: what it was, when it was sent, and why not."""
    details = facts(part)
    what = "picture from a tool" if part.origin == TOOL_ORIGIN else part.origin
    line = what + (f" '{part.name}'" if part.name else "") + (f" ({', '.join(details)})" if details else "")
    return f"[{line}{': ' + why if why else ''}]"


def facts(part: MediaPart, *, size: bool = False) -> list[str]:
    """What a line about ``part`` says of it: a picture's dimensions, a document's pages, its size in
    bytes when ``size``, and when it was sent (UTC: the agent does not know the user's zone)."""
    found = []
    if part.kind == "image" and part.width and part.height:
        found.append(f"{part.width}x{part.height}")
    if part.pages:
        found.append(f"{part.pages} page{'s' if part.pages != 1 else ''}")
    if size:
        found.append(_bytes(part.size))
    if part.sent_at:
        found.append("sent " + time.strftime("%Y-%m-%d %H:%M", time.gmtime(part.sent_at)) + " UTC")
    return found


def _bytes(size: int) -> str:
    if size < 1000:
        return f"{size} B"
    if size < 1_000_000:
        return f"{round(size / 1000)} KB"
    return f"{size / 1_000_000:.1f} MB"


# Models by name that read images, per provider; any other name counts as one that does not
# (the operator says otherwise with ``vision: true`` in its config). Lowercase prefixes of the
# bare model name (after any ``vendor/`` of a router such as OpenRouter).
_VISION: Final = {
    "anthropic": ("claude-3", "claude-sonnet-4", "claude-opus-4", "claude-haiku-4", "claude-4"),
    "openai": (
        "gpt-4o", "chatgpt-4o", "gpt-4.1", "gpt-4.5", "gpt-5", "gpt-4-turbo", "gpt-4-vision", "o1", "o3", "o4",
        "claude-3", "claude-sonnet-4", "claude-opus-4", "claude-haiku-4", "gemini", "llava", "bakllava",
        "qwen-vl", "qwen2-vl", "qwen2.5-vl", "qwen3-vl", "pixtral", "llama3.2-vision", "llama-3.2-11b-vision",
        "llama-3.2-90b-vision", "llama-4", "gemma3", "gemma-3", "minicpm-v", "moondream", "internvl", "mistral-small-3",
    ),
}  # fmt: skip
_NO_VISION: Final = ("o1-mini", "o3-mini", "gpt-4o-audio", "gpt-4o-mini-audio", "gpt-4o-realtime", "gpt-4o-search")


def vision_default(provider: str, model: str) -> bool:
    """Whether ``model`` reads images, by the built-in table (unknown names: False)."""
    bare = model.lower().rsplit("/", 1)[-1]
    if bare.startswith(_NO_VISION):
        return False
    return bare.startswith(_VISION.get(provider, ()))

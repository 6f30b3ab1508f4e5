"""Flattening requests into prompt blocks, and the fake's token counting.

Token counting (deterministic, documented so tests can predict figures):

* The canonical JSON of a value is ``json.dumps(value, sort_keys=True,
  separators=(",", ":"), ensure_ascii=False)``.
* A prompt block costs ``ceil(len(canonical JSON of the block) / 4)`` tokens,
  with any top-level ``cache_control`` key removed first, so adding or moving
  a cache marker never changes counts or cache identity.
* A bare string (``system="..."`` or ``content="..."``) counts as the block
  ``{"type": "text", "text": ...}``.
* A picture or document's payload (base64 data, a data URL) counts a fixed
  ``MEDIA_TOKENS`` instead of its length (see ``media.py``).
* Output costs ``ceil(len(text) / 4)`` per text and
  ``ceil(len(name + arguments JSON) / 4)`` per tool call, at least 1 in total
  (see ``turn.py``).

Blocks, in order:

* Anthropic: each tool, then each system block, then each content block of
  each message.
* OpenAI: each tool, then each whole message (OpenAI caches at message
  granularity here).

A block's *identity* (what the prompt cache hashes) is its canonical JSON
plus where it sits (tool / system / message index and role), so identical
text in a different place is a different prefix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .media import MEDIA_TOKENS, without_payloads


def canonical_json(value: Any) -> str:
    """Stable JSON text for hashing and counting."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def count_text_tokens(text: str) -> int:
    """Tokens for a piece of text: ``ceil(len(text) / 4)``."""
    return math.ceil(len(text) / 4)


@dataclass(frozen=True)
class PromptBlock:
    """One block of a flattened prompt."""

    identity: str
    tokens: int
    cache_control: Mapping[str, Any] | None = None

    @property
    def is_breakpoint(self) -> bool:
        """True when the block carries a ``cache_control`` marker."""
        return self.cache_control is not None


def make_block(place: Mapping[str, Any], block: Mapping[str, Any]) -> PromptBlock:
    """Build a :class:`PromptBlock` from a raw JSON block at ``place``."""
    marker = block.get("cache_control")
    bare = {key: value for key, value in block.items() if key != "cache_control"}
    counted, media = without_payloads(bare)
    tokens = count_text_tokens(canonical_json(counted)) + media * MEDIA_TOKENS
    identity = canonical_json({"at": dict(place), "block": bare})
    return PromptBlock(identity, max(1, tokens), marker if isinstance(marker, Mapping) else None)


def _as_blocks(content: Any) -> list[Mapping[str, Any]]:
    if content is None:
        return []
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return [block for block in content if isinstance(block, Mapping)]


def anthropic_blocks(body: Mapping[str, Any]) -> list[PromptBlock]:
    """Flatten an Anthropic Messages request: tools, system, then messages."""
    blocks = [make_block({"tool": index}, tool) for index, tool in enumerate(body.get("tools") or [])]
    blocks += [make_block({"system": True}, block) for block in _as_blocks(body.get("system"))]
    for index, message in enumerate(body.get("messages") or []):
        place = {"message": index, "role": message.get("role")}
        blocks += [make_block(place, block) for block in _as_blocks(message.get("content"))]
    return blocks


def openai_blocks(body: Mapping[str, Any]) -> list[PromptBlock]:
    """Flatten an OpenAI Chat Completions request: tools, then messages."""
    blocks = [make_block({"tool": index}, tool) for index, tool in enumerate(body.get("tools") or [])]
    blocks += [make_block({"message": index}, message) for index, message in enumerate(body.get("messages") or [])]
    return blocks


def total_tokens(blocks: Iterable[PromptBlock]) -> int:
    """Sum of the blocks' token counts."""
    return sum(block.tokens for block in blocks)


def _texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    parts = content if isinstance(content, list) else []
    return [str(part.get("text", "")) for part in parts if isinstance(part, Mapping) and part.get("type") == "text"]


def last_user_text(messages: Iterable[Mapping[str, Any]]) -> str:
    """Text of the most recent user message that has any text (tool results skipped)."""
    for message in reversed(list(messages)):
        if message.get("role") != "user":
            continue
        text = "".join(_texts(message.get("content")))
        if text:
            return text
    return ""

"""Anthropic Messages API wire format: bodies, usage, SSE events and errors."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from .cache import MAX_BREAKPOINTS, CacheFigures
from .media import media_in
from .prompt import PromptBlock, anthropic_blocks
from .replies import ContextTooLong, ErrorReply, InvalidRequest
from .pacing import chunk_text, paced_pieces
from .turn import Turn
from .wire import SseEvent, dumps

STOP_REASONS = {"end": "end_turn", "tool": "tool_use", "truncated": "max_tokens"}
IMAGE_TYPES: Final = frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"})
"""The picture types the Messages API reads; any other is refused with a 400."""
MAX_IMAGES: Final = 100
"""The most pictures one request may carry."""


class AnthropicDialect:
    """Renders the fake model's turns and errors as the Anthropic API does."""

    api: Final = "anthropic"
    call_id_prefix = "toolu_fake_"
    message_id_prefix = "msg_fake_"
    request_id_header = "request-id"

    def blocks(self, body: Mapping[str, Any]) -> list[PromptBlock]:
        """Flattened prompt blocks (tools, system, messages)."""
        return anthropic_blocks(body)

    def validate(self, body: Mapping[str, Any], blocks: Sequence[PromptBlock]) -> ErrorReply | None:
        """Reject what the real service rejects with a 400: more cache breakpoints than it allows, a text
        block of nothing but whitespace, a picture of a type it does not read or a document that is not a PDF,
        more than 100 pictures, and tool_use / tool_result blocks in a request without tools."""
        found = sum(1 for block in blocks if block.is_breakpoint)
        if found > MAX_BREAKPOINTS:
            return InvalidRequest(
                message=f"A maximum of {MAX_BREAKPOINTS} blocks with cache_control may be provided. Found {found}."
            )
        tool_blocks = False
        for index, message in enumerate(body.get("messages") or ()):
            content = message.get("content")
            for block in content if isinstance(content, list) else [{"type": "text", "text": content}]:
                if block.get("type") == "text" and not str(block.get("text") or "").strip():
                    return InvalidRequest(message=f"messages.{index}: text content blocks must contain non-whitespace text")
                tool_blocks = tool_blocks or block.get("type") in ("tool_use", "tool_result")
        media = media_in(list(body.get("messages") or ()))
        for item in media:
            allowed = IMAGE_TYPES if item.wire == "image" else {"application/pdf"}
            if item.media_type not in allowed or not item.data:
                return InvalidRequest(message=f"messages.{item.message}.content.{item.position}: invalid {item.wire} source")
        if sum(item.wire == "image" for item in media) > MAX_IMAGES:
            return InvalidRequest(message=f"Too many images: at most {MAX_IMAGES} images may be provided in one request.")
        if tool_blocks and not body.get("tools"):
            return InvalidRequest(message="Requests which include `tool_use` or `tool_result` blocks must define tools.")
        return None

    def usage(self, figures: CacheFigures, turn: Turn) -> dict[str, Any]:
        """The ``usage`` object for a finished turn."""
        return {
            "input_tokens": figures.uncached,
            "output_tokens": turn.output_tokens,
            "cache_read_input_tokens": figures.cache_read,
            "cache_creation_input_tokens": figures.cache_creation,
        }

    def error_body(self, error: ErrorReply, prompt_tokens: int, request_id: str) -> dict[str, Any]:
        """The JSON error envelope for ``error``."""
        return {
            "type": "error",
            "error": {"type": error.anthropic_type, "message": self._error_message(error, prompt_tokens)},
            "request_id": request_id,
        }

    def _error_message(self, error: ErrorReply, prompt_tokens: int) -> str:
        if error.message is not None:
            return error.message
        if isinstance(error, ContextTooLong):
            limit = error.limit if error.limit is not None else max(prompt_tokens - 1, 0)
            return f"prompt is too long: {prompt_tokens} tokens > {limit} maximum"
        return error.anthropic_message

    def message(
        self, message_id: str, model: str, turn: Turn, usage: Mapping[str, Any], created: int
    ) -> dict[str, Any]:
        """The complete ``message`` object for a turn (``created`` is unused here)."""
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": content_blocks(turn),
            "stop_reason": STOP_REASONS[turn.finish],
            "stop_sequence": None,
            "usage": dict(usage),
        }

    def sse_events(self, message: Mapping[str, Any], body: Mapping[str, Any], pace: float | None) -> list[SseEvent]:
        """``message`` as the Messages SSE event sequence, its text written at ``pace``."""
        return [SseEvent(name, dumps(data), wait) for name, data, wait in stream_events(message, pace)]


def content_blocks(turn: Turn) -> list[dict[str, Any]]:
    """Anthropic content blocks for a turn: optional text, then tool_use blocks."""
    blocks: list[dict[str, Any]] = []
    if turn.text is not None:
        blocks.append({"type": "text", "text": turn.text})
    blocks += [{"type": "tool_use", "id": call.id, "name": call.name, "input": call.input} for call in turn.calls]
    return blocks


def stream_events(
    message: Mapping[str, Any], pace: float | None = None
) -> Iterator[tuple[str, dict[str, Any], float]]:
    """The SSE events that reassemble into ``message`` (name, data, seconds to wait before it)."""
    usage = dict(message["usage"])
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    yield "message_start", {"type": "message_start", "message": start}, 0.0
    yield "ping", {"type": "ping"}, 0.0
    for index, block in enumerate(message["content"]):
        yield from _block_events(index, block, pace)
    delta = {"stop_reason": message["stop_reason"], "stop_sequence": None}
    yield "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}, 0.0
    yield "message_stop", {"type": "message_stop"}, 0.0


def _block_events(index: int, block: Mapping[str, Any], pace: float | None) -> Iterator[tuple[str, dict[str, Any], float]]:
    if block["type"] == "text":
        opening: dict[str, Any] = {"type": "text", "text": ""}
        deltas = [({"type": "text_delta", "text": piece}, wait) for piece, wait in paced_pieces(block["text"], pace)]
    else:
        opening = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
        deltas = [({"type": "input_json_delta", "partial_json": piece}, 0.0) for piece in chunk_text(dumps(block["input"]))]
    yield "content_block_start", {"type": "content_block_start", "index": index, "content_block": opening}, 0.0
    for delta, wait in deltas:
        yield "content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}, wait
    yield "content_block_stop", {"type": "content_block_stop", "index": index}, 0.0

"""OpenAI Chat Completions wire format: bodies, usage, SSE chunks and errors."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Final

from .cache import CacheFigures
from .prompt import PromptBlock, openai_blocks
from .replies import ContextTooLong, ErrorReply, InvalidRequest
from .pacing import chunk_text, paced_pieces
from .turn import Turn
from .wire import SseEvent, dumps

FINISH_REASONS = {"end": "stop", "tool": "tool_calls", "truncated": "length"}


class OpenAIDialect:
    """Renders the fake model's turns and errors as OpenAI Chat Completions does."""

    api: Final = "openai"
    call_id_prefix = "call_fake_"
    message_id_prefix = "chatcmpl-fake-"
    request_id_header = "x-request-id"

    def blocks(self, body: Mapping[str, Any]) -> list[PromptBlock]:
        """Flattened prompt blocks (tools, then whole messages)."""
        return openai_blocks(body)

    def validate(self, body: Mapping[str, Any], blocks: Sequence[PromptBlock]) -> ErrorReply | None:
        """Reject what the real service rejects with a 400 about tool messages: a picture in one (only user
        messages take pictures), and an assistant message with tool calls not followed by a tool message
        answering each of them."""
        messages = list(body.get("messages") or ())
        for index, message in enumerate(messages):
            content = message.get("content")
            if message.get("role") == "tool" and isinstance(content, list):
                if any(isinstance(part, Mapping) and part.get("type") != "text" for part in content):
                    return InvalidRequest(message=f"messages[{index}]: Image URLs are only allowed for messages with "
                                                  "role 'user', but this message with role 'tool' contains an image URL.")
            if message.get("role") == "assistant" and message.get("tool_calls"):
                answered = set()
                for later in messages[index + 1 :]:
                    if later.get("role") != "tool":
                        break
                    answered.add(later.get("tool_call_id"))
                missing = [call.get("id") for call in message["tool_calls"] if call.get("id") not in answered]
                if missing:
                    return InvalidRequest(message="An assistant message with 'tool_calls' must be followed by tool "
                                                  "messages responding to each 'tool_call_id'. The following "
                                                  f"tool_call_ids did not have response messages: {', '.join(missing)}")
        return None

    def usage(self, figures: CacheFigures, turn: Turn) -> dict[str, Any]:
        """The ``usage`` object; ``prompt_tokens`` includes cached tokens."""
        return {
            "prompt_tokens": figures.prompt_tokens,
            "completion_tokens": turn.output_tokens,
            "total_tokens": figures.prompt_tokens + turn.output_tokens,
            "prompt_tokens_details": {"cached_tokens": figures.cache_read, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }

    def error_body(self, error: ErrorReply, prompt_tokens: int, request_id: str) -> dict[str, Any]:
        """The JSON error envelope for ``error``."""
        param = "messages" if isinstance(error, ContextTooLong) else None
        return {
            "error": {
                "message": self._error_message(error, prompt_tokens),
                "type": error.openai_type,
                "param": param,
                "code": error.openai_code,
            }
        }

    def _error_message(self, error: ErrorReply, prompt_tokens: int) -> str:
        if error.message is not None:
            return error.message
        if isinstance(error, ContextTooLong):
            limit = error.limit if error.limit is not None else max(prompt_tokens - 1, 0)
            return (
                f"This model's maximum context length is {limit} tokens. However, your messages resulted in "
                f"{prompt_tokens} tokens. Please reduce the length of the messages."
            )
        return error.openai_message

    def message(
        self, message_id: str, model: str, turn: Turn, usage: Mapping[str, Any], created: int
    ) -> dict[str, Any]:
        """The complete ``chat.completion`` object for a turn."""
        choice = {"index": 0, "message": assistant_message(turn), "finish_reason": FINISH_REASONS[turn.finish]}
        return {
            "id": message_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "choices": [{**choice, "logprobs": None}],
            "usage": dict(usage),
            "system_fingerprint": None,
        }

    def sse_events(self, message: Mapping[str, Any], body: Mapping[str, Any], pace: float | None) -> list[SseEvent]:
        """The completion as unnamed ``data:`` chunks ending in ``[DONE]``, its text written at ``pace``."""
        options = body.get("stream_options") or {}
        chunks = stream_chunks(message, bool(options.get("include_usage")), pace)
        return [*(SseEvent(None, dumps(chunk), wait) for chunk, wait in chunks), SseEvent(None, "[DONE]")]


def assistant_message(turn: Turn) -> dict[str, Any]:
    """The assistant ``message`` of a completion choice."""
    message: dict[str, Any] = {"role": "assistant", "content": turn.text, "refusal": None}
    if turn.calls:
        message["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in turn.calls
        ]
    return message


def stream_chunks(
    completion: Mapping[str, Any], include_usage: bool, pace: float | None = None
) -> Iterator[tuple[dict[str, Any], float]]:
    """``chat.completion.chunk`` objects that reassemble into ``completion``, each with the seconds
    to wait before it."""
    base = {key: completion[key] for key in ("id", "created", "model", "system_fingerprint")}
    base["object"] = "chat.completion.chunk"
    choice = completion["choices"][0]

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        body = {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}
        return {**body, "usage": None} if include_usage else body

    yield chunk({"role": "assistant", "content": ""}), 0.0
    for piece, wait in paced_pieces(choice["message"]["content"] or "", pace):
        yield chunk({"content": piece}), wait
    for index, call in enumerate(choice["message"].get("tool_calls", [])):
        yield from ((chunk({"tool_calls": [delta]}), 0.0) for delta in _call_deltas(index, call))
    yield chunk({}, choice["finish_reason"]), 0.0
    if include_usage:
        yield {**base, "choices": [], "usage": completion["usage"]}, 0.0


def _call_deltas(index: int, call: Mapping[str, Any]) -> Iterator[dict[str, Any]]:
    function = call["function"]
    opening = {"name": function["name"], "arguments": ""}
    yield {"index": index, "id": call["id"], "type": "function", "function": opening}
    for piece in chunk_text(function["arguments"]):
        yield {"index": index, "function": {"arguments": piece}}

"""What every model provider takes and gives back, independent of its wire format.

A :class:`ModelRequest` carries the frozen system prompt, the conversation,
the tools, the caching decision and the bytes of the pictures and documents the
conversation refers to (read by the loop before the call, so translating a request
stays pure); a :class:`ModelResponse` carries the
assistant message and normalised usage. While a streamed answer arrives, its
text so far goes to the caller's ``on_text`` listener. Providers translate both ways and map
their SDK's exceptions to :class:`agent.errors.ProviderError` at the boundary.
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.caching import Ttl, apply_cache_markers, visible_text
from agent.media import ProviderStyle
from agent.messages import ChatMessage, is_error
from agent.providers.media_blocks import left_out, media_content, tool_content

from agent.providers.text_feed import TextListener
from agent.usage import Usage


@dataclass(frozen=True, slots=True)
class ToolSpec:
    """A tool as the model sees it: a name, what it does, and its JSON Schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any] = field(default_factory=lambda: {"type": "object", "properties": {}})


@dataclass(frozen=True, slots=True)
class ModelRequest:
    model: str
    system: str
    """The session's frozen system prompt, byte for byte."""
    messages: Sequence[ChatMessage]
    """The conversation after the system prompt (no system messages)."""
    tools: Sequence[ToolSpec] = ()
    tools_off: bool = False
    """The tools are described but may not be called (``tool_choice: none``): the wrap-up call after the
    step budget. Sending them keeps the request valid (Anthropic refuses tool blocks in a request
    without tools) and the cached prefix, which starts with the tools, intact."""
    max_tokens: int = 4096
    cache_ttl: Ttl | None = None
    """None: no cache breakpoints. Otherwise the TTL of the breakpoints."""
    cache_native: bool = True
    """Breakpoint layout: Anthropic-native (True) or an OpenAI-style envelope (OpenRouter)."""
    ephemeral: str | None = None
    """Call-time text (gateway overlays, notices, the step-budget note). Sent after the last
    message, outside every cache breakpoint, and never stored."""
    media: Mapping[str, bytes] = field(default_factory=dict)
    """The bytes of the messages' media parts by name (``sha256``, ``text_sha256``); a part whose
    bytes are not here is sent as a stand-in saying they are no longer kept."""
    vision: bool = True
    """Whether the model reads images (set per model by the router); without, pictures are stand-ins."""


@dataclass(frozen=True, slots=True)
class ModelResponse:
    message: ChatMessage
    usage: Usage
    stop_reason: str
    model: str


class Provider(abc.ABC):
    """One model API endpoint."""

    name: str

    @abc.abstractmethod
    async def complete(self, request: ModelRequest, *, on_text: TextListener | None = None) -> ModelResponse:
        """One model call. Raises ProviderError (or ContextTooLongError) on failure.

        ``on_text`` hears the answer's visible text so far (the whole of it, each time it grows) while
        it is streamed; wrap it in :meth:`agent.providers.text_feed.TextFeed.of` so that a listener
        that fails never breaks the call. A provider that does not stream calls it not at all.
        """

    async def aclose(self) -> None:
        """Release the HTTP client."""


def chat_dicts(request: ModelRequest, *, style: ProviderStyle = "openai") -> list[dict[str, Any]]:
    """The request as chat-completions style dicts, with cache breakpoints when caching is on.

    A user message's media parts become content blocks of ``style``'s wire format before its
    text (:func:`agent.providers.media_blocks.media_content`); the oldest files past what one
    request may carry are stand-ins.

    A tool message's pictures (what the tool returned) follow its text. On the Anthropic layout
    they are blocks of the tool's result, and a failed call's result says ``is_error`` (a key the
    Anthropic translation reads; the text carries the failure on every layout). Chat Completions
    takes text only in a tool message: its pictures go in one user message after the run of tool
    messages (all results of a step must come first), a line naming the tool and call before each
    one's pictures, and the tool message says they follow.

    A blank assistant answer stored in the history (the model said nothing, or only whitespace)
    is left out, and blank text around tool calls is sent as none: Anthropic refuses a
    whitespace-only text block, and OpenRouter passes a Claude request on to Anthropic.
    Breakpoints are placed next; the ephemeral text is then appended at the very
    end (to the last user turn, or as a user turn after tool results), so it never
    sits inside a cached prefix and the stored conversation never sees it.
    """
    dicts: list[dict[str, Any]] = []
    omitted = left_out(request.messages, style=style, vision=request.vision)
    pictures: list[dict[str, Any]] = []  # Chat Completions: the current run of tool results' pictures
    if request.system:
        dicts.append({"role": "system", "content": request.system})
    for at, message in enumerate(request.messages):
        if message.role == "system":
            raise ValueError("the system prompt goes in ModelRequest.system, not among the messages")
        if message.role == "assistant" and not message.tool_calls and not visible_text(message.content):
            continue  # a blank answer kept in the history: nothing to send, on any layout
        if pictures and message.role != "tool":  # the run of tool results ended: their pictures come now
            dicts.append({"role": "user", "content": pictures})
            pictures = []
        dicts.append(_chat_dict(message, request, style, {index for where, index in omitted if where == at}))
        pictures.extend(_moved_pictures(dicts[-1]))
    if pictures:
        dicts.append({"role": "user", "content": pictures})
    if request.cache_ttl is not None:
        dicts = apply_cache_markers(dicts, ttl=request.cache_ttl, native=request.cache_native)
    if request.ephemeral:
        _append_ephemeral(dicts, request.ephemeral)
    return dicts


def _chat_dict(message: ChatMessage, request: ModelRequest, style: ProviderStyle, omitted: set[int]) -> dict[str, Any]:
    if message.role == "tool":
        data: dict[str, Any] = {"role": "tool", "tool_call_id": message.tool_call_id, "content": message.content}
        if message.media:
            blocks = tool_content(message, media=request.media, style=style, vision=request.vision, omitted=omitted)
            data["content"] = blocks if style == "anthropic" else _tool_text(message, blocks)
        if style == "anthropic" and is_error(message):
            data["is_error"] = True
        return data
    data: dict[str, Any] = {"role": message.role, "content": message.content}
    if message.media and message.role == "user":
        data["content"] = media_content(
            message.media, message.content, media=request.media, style=style, vision=request.vision, omitted=omitted
        )
    if message.role == "assistant" and not visible_text(message.content):
        data["content"] = ""  # blank text around tool calls: a whitespace-only text block is refused
    if message.tool_calls:
        data["tool_calls"] = [
            {"id": call.id, "type": "function", "function": {"name": call.name, "arguments": call.arguments}}
            for call in message.tool_calls
        ]
    return data


_PICTURES_KEY = "_pictures"
"""Where a Chat Completions tool dict holds its picture parts until they are moved to the user message after
the tool messages (never sent: :func:`_moved_pictures` takes them out)."""


def _tool_text(message: ChatMessage, blocks: list[dict[str, Any]]) -> dict[str, Any] | str:
    """The text of a Chat Completions tool message whose ``blocks`` hold pictures: its text and the lines standing
    for pictures not sent, plus a note that the sent ones follow; the pictures themselves ride along under
    :data:`_PICTURES_KEY` for :func:`_moved_pictures` (returned as a dict then)."""
    texts = [block["text"] for block in blocks if block["type"] == "text"]
    pictures = [block for block in blocks if block["type"] != "text"]
    if not pictures:
        return "\n\n".join(texts)
    count = f"{len(pictures)} picture{'s' if len(pictures) != 1 else ''}"
    texts.append(f"[{count} the tool returned: in the user message after the tool results]")
    header = {"type": "text", "text": f"The {count} the {message.tool_name or 'tool'} tool returned (call {message.tool_call_id}):"}
    return {"text": "\n\n".join(texts), _PICTURES_KEY: [header, *pictures]}


def _moved_pictures(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The picture blocks a Chat Completions tool dict holds, taken out of it (its content becomes text only)."""
    content = data.get("content")
    if data["role"] != "tool" or not isinstance(content, dict):
        return []
    data["content"] = content["text"]
    return list(content[_PICTURES_KEY])


def _append_ephemeral(dicts: list[dict[str, Any]], text: str) -> None:
    last = dicts[-1] if dicts else None
    if last is None or last["role"] != "user":
        dicts.append({"role": "user", "content": text})
    elif isinstance(last["content"], list):
        last["content"].append({"type": "text", "text": text})
    else:
        last["content"] = f"{last['content']}\n\n{text}" if last["content"] else text

"""The agent's message model: a conversation is a list of chat messages.

The shape follows the chat-completions convention every provider can be
translated from and to:

- ``system`` / ``user`` / ``assistant`` messages carry text ``content``;
- an ``assistant`` message may carry ``tool_calls`` (each with an id, a tool
  name and its JSON ``arguments`` string);
- a ``tool`` message answers one call through ``tool_call_id`` (and repeats the
  ``tool_name`` so a result can be read without its call);
- a ``user`` message may carry ``media``: pictures and documents by reference
  (:class:`agent.media.MediaPart`), sent to the model before its text; a ``tool``
  message the pictures the tool returned, sent after its text;
- a ``tool`` message whose text starts with :data:`ERROR_PREFIX` answers a call
  that failed (:func:`is_error`): the prefix is the one mark of it, so it is
  stored and restored with the text on every engine.

Storage keeps the same fields, one row per message; providers translate these
into their wire formats (``agent/providers``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from typing import Any, Final, Literal

from agent.media import MediaPart

Role = Literal["system", "user", "assistant", "tool"]
ROLES: frozenset[str] = frozenset({"system", "user", "assistant", "tool"})
ERROR_PREFIX: Final = "error: "
"""How the text of a failed tool call's result starts."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool invocation requested by the model."""

    id: str
    name: str
    arguments: str = "{}"
    """The arguments exactly as the model produced them: a JSON object as text."""

    def parsed_arguments(self) -> dict[str, Any]:
        """The arguments as a dict; malformed JSON gives ``{}``."""
        try:
            value = json.loads(self.arguments or "{}")
        except (TypeError, ValueError):
            return {}
        return value if isinstance(value, dict) else {}

    def to_dict(self) -> dict[str, Any]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ToolCall:
        arguments = data.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        return cls(id=str(data["id"]), name=str(data["name"]), arguments=arguments)


@dataclass(frozen=True, slots=True)
class ChatMessage:
    """One message of a conversation. Immutable: edits make a new message."""

    role: Role
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    reasoning: str | None = None
    media: tuple[MediaPart, ...] = ()
    """Pictures and documents sent with a user message (references; the bytes are read per call)."""
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)
    """Bookkeeping that never goes to a model (e.g. ``{"summary": True}``)."""
    token_estimate: int | None = field(default=None, init=False, repr=False, compare=False, hash=False)
    """The estimated size, remembered by :func:`agent.tokens.estimate_message` (never copied by
    ``dataclasses.replace``, so an edited message is estimated afresh)."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown message role {self.role!r}; expected one of {sorted(ROLES)}")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id of the call it answers")

    @classmethod
    def system(cls, content: str) -> ChatMessage:
        return cls(role="system", content=content)

    @classmethod
    def user(cls, content: str) -> ChatMessage:
        return cls(role="user", content=content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: tuple[ToolCall, ...] | list[ToolCall] = ()) -> ChatMessage:
        return cls(role="assistant", content=content, tool_calls=tuple(tool_calls))

    @classmethod
    def tool(cls, tool_call_id: str, content: str, tool_name: str | None = None) -> ChatMessage:
        return cls(role="tool", content=content, tool_call_id=tool_call_id, tool_name=tool_name)

    def with_content(self, content: str) -> ChatMessage:
        return replace(self, content=content)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; empty optional fields are left out."""
        data: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.tool_calls:
            data["tool_calls"] = [call.to_dict() for call in self.tool_calls]
        if self.tool_call_id is not None:
            data["tool_call_id"] = self.tool_call_id
        if self.tool_name is not None:
            data["tool_name"] = self.tool_name
        if self.reasoning is not None:
            data["reasoning"] = self.reasoning
        if self.media:
            data["media"] = [part.to_dict() for part in self.media]
        if self.meta:
            data["meta"] = dict(self.meta)
        return data

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ChatMessage:
        return cls(
            role=data["role"],
            content=data.get("content") or "",
            tool_calls=tuple(ToolCall.from_dict(c) for c in data.get("tool_calls") or ()),
            tool_call_id=data.get("tool_call_id"),
            tool_name=data.get("tool_name"),
            reasoning=data.get("reasoning"),
            media=tuple(MediaPart.from_dict(part) for part in data.get("media") or ()),
            meta=dict(data.get("meta") or {}),
        )


def is_error(message: ChatMessage) -> bool:
    """Whether ``message`` is the result of a failed tool call."""
    return message.role == "tool" and message.content.startswith(ERROR_PREFIX)


def error_text(text: str) -> str:
    """``text`` marked as a failed call's result (unchanged when it already is)."""
    return text if text.startswith(ERROR_PREFIX) else ERROR_PREFIX + text

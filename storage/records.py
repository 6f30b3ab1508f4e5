"""The values that go in and come out of the store: frozen dataclasses.

``NewMessage`` is what callers hand to ``Store.append_messages``; the store
answers with ``MessageRecord``s, which add the identity the database gave
them (``id``, ``session_id``, ``seq``, ``created_at``). The fields line up
with the agent's ``ChatMessage`` so converting is a field-by-field copy
(``MessageRecord.to_dict()`` has the same shape as ``ChatMessage.to_dict()``).

A message's ``media`` are references to pictures and documents (``agent.media.MediaPart.to_dict()``
shapes: kind, mime, size, the SHA-256 naming the bytes in the media folder, ...), stored as JSON
in ``messages.media``; the bytes themselves never go in the database (``storage/media.py``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from storage.media import is_media_name

__all__ = [
    "ROLES",
    "InboxRecord",
    "MessageRecord",
    "NewMessage",
    "OutboxChunk",
    "OutboxRecord",
    "PairingCode",
    "SearchHit",
    "SessionRecord",
    "ToolCallRecord",
    "UsageTotals",
    "media_from_json",
    "media_parts",
    "media_to_json",
    "message_record",
]

ROLES: Final = frozenset({"system", "user", "assistant", "tool"})


@dataclass(frozen=True, slots=True)
class ToolCallRecord:
    """One tool call an assistant message asked for."""

    id: str
    name: str
    arguments: str = "{}"
    """The arguments exactly as the model produced them (JSON text)."""

    @classmethod
    def coerce(cls, value: ToolCallRecord | Mapping[str, Any]) -> ToolCallRecord:
        """Accept a record or a ``{"id", "name", "arguments"}`` mapping."""
        if isinstance(value, ToolCallRecord):
            return value
        arguments = value.get("arguments", "{}")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments, ensure_ascii=False)
        return cls(id=str(value["id"]), name=str(value["name"]), arguments=arguments)

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "name": self.name, "arguments": self.arguments}


@dataclass(frozen=True, slots=True)
class NewMessage:
    """A message to append. ``tool_calls`` takes records or plain dicts."""

    role: str
    content: str = ""
    tool_calls: tuple[ToolCallRecord, ...] = ()
    tool_call_id: str | None = None
    tool_name: str | None = None
    reasoning: str | None = None
    token_estimate: int | None = None
    platform_message_id: str | None = None
    media: tuple[dict[str, Any], ...] = ()
    """References to the pictures and documents the message carries (see :func:`media_parts`)."""

    def __post_init__(self) -> None:
        if self.role not in ROLES:
            raise ValueError(f"unknown message role {self.role!r}; expected one of {sorted(ROLES)}")
        if not isinstance(self.content, str):
            raise TypeError(f"message content must be text, not {type(self.content).__name__}")
        calls = self.tool_calls
        if calls and not (isinstance(calls, tuple) and all(isinstance(c, ToolCallRecord) for c in calls)):
            object.__setattr__(self, "tool_calls", tuple(ToolCallRecord.coerce(c) for c in calls))
        if self.media:
            object.__setattr__(self, "media", media_parts(self.media))


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """A stored message; ``seq`` orders it within its session (1, 2, 3, ...)."""

    id: int
    session_id: str
    seq: int
    role: str
    content: str
    tool_calls: tuple[ToolCallRecord, ...]
    tool_call_id: str | None
    tool_name: str | None
    reasoning: str | None
    token_estimate: int | None
    created_at: float
    platform_message_id: str | None
    media: tuple[dict[str, Any], ...] = field(default=(), hash=False)
    """References to pictures and documents (dicts, so left out of the hash); ``to_dict`` hands out copies."""

    def to_dict(self) -> dict[str, Any]:
        """The chat-message shape: role, content and the optional fields that are set."""
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
            data["media"] = [dict(part) for part in self.media]
        return data

    def to_json_dict(self) -> dict[str, Any]:
        """Every field, for exports and ``--json`` output."""
        return {
            "id": self.id,
            "session_id": self.session_id,
            "seq": self.seq,
            "role": self.role,
            "content": self.content,
            "tool_calls": [call.to_dict() for call in self.tool_calls],
            "tool_call_id": self.tool_call_id,
            "tool_name": self.tool_name,
            "reasoning": self.reasoning,
            "token_estimate": self.token_estimate,
            "created_at": self.created_at,
            "platform_message_id": self.platform_message_id,
            "media": [dict(part) for part in self.media],
        }


# Building records fast. A frozen dataclass's ``__init__`` sets each field through
# the generic ``object.__setattr__``, and the store builds one record per appended
# or loaded message, on the writer's thread and in the event loop. Setting the
# slots through their descriptors gives the same object (same class, equality,
# hash) with less work per field.
_new_object = object.__new__
_MESSAGE_FIELDS: Final = (
    "id", "session_id", "seq", "role", "content", "tool_calls", "tool_call_id", "tool_name", "reasoning",
    "token_estimate", "created_at", "platform_message_id", "media",
)  # fmt: skip
(
    _set_id, _set_session_id, _set_seq, _set_role, _set_content, _set_tool_calls, _set_tool_call_id, _set_tool_name,
    _set_reasoning, _set_token_estimate, _set_created_at, _set_platform_message_id, _set_media,
) = (getattr(MessageRecord, name).__set__ for name in _MESSAGE_FIELDS)  # fmt: skip


def message_record(
    id: int, session_id: str, seq: int, role: str, content: str, tool_calls: tuple[ToolCallRecord, ...],
    tool_call_id: str | None, tool_name: str | None, reasoning: str | None, token_estimate: int | None,
    created_at: float, platform_message_id: str | None, media: tuple[dict[str, Any], ...] = (),
) -> MessageRecord:  # fmt: skip
    """``MessageRecord(...)`` with the same arguments, without the frozen ``__init__``'s cost."""
    record = _new_object(MessageRecord)
    _set_id(record, id)
    _set_session_id(record, session_id)
    _set_seq(record, seq)
    _set_role(record, role)
    _set_content(record, content)
    _set_tool_calls(record, tool_calls)
    _set_tool_call_id(record, tool_call_id)
    _set_tool_name(record, tool_name)
    _set_reasoning(record, reasoning)
    _set_token_estimate(record, token_estimate)
    _set_created_at(record, created_at)
    _set_platform_message_id(record, platform_message_id)
    _set_media(record, media)
    return record


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One conversation. A session is open until ``ended_at`` is set."""

    id: str
    session_key: str
    platform: str
    chat_id: str
    chat_type: str | None
    thread_id: str | None
    user_id: str | None
    title: str | None
    model: str | None
    system_prompt: str | None
    parent_session_id: str | None
    started_at: float
    ended_at: float | None
    end_reason: str | None
    message_count: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    last_prompt_tokens: int
    cost_usd: float
    tool_specs: str | None = None
    """The tools the session was offered when it started, as the agent wrote them (JSON text, kept as given
    for the session's whole life); None for a session stored before tool lists were kept."""

    @property
    def is_open(self) -> bool:
        return self.ended_at is None

    def to_json_dict(self, *, include_prompt: bool = True) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in self.__slots__}
        if not include_prompt:
            data.pop("system_prompt")
            data.pop("tool_specs")
        return data


@dataclass(frozen=True, slots=True)
class SearchHit:
    """One message matching a search, with a highlighted excerpt."""

    session_id: str
    message_id: int
    seq: int
    role: str
    snippet: str
    platform: str
    created_at: float
    session_title: str | None

    def to_json_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class InboxRecord:
    """An inbound platform event the gateway accepted but may not have finished.

    ``payload`` is a fresh dict decoded for each read; changing it changes nothing stored.
    """

    id: int
    platform: str
    event_id: str
    session_key: str
    payload: dict[str, Any]
    status: str
    received_at: float
    done_at: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class OutboxChunk:
    """One chunk of a reply to queue: the text as rendered, and how to send it."""

    text: str
    plain: str | None = None
    """The same chunk without markup, for when the platform rejects the rendered one."""
    markup: str | None = None
    """The markup ``text`` is written in (the gateway's name for it); None for plain text."""
    reply_to: str | None = None
    """The platform message id this chunk answers, if any."""


@dataclass(frozen=True, slots=True)
class OutboxRecord:
    """One chunk of a reply waiting to be (or already) delivered."""

    id: int
    turn_id: str
    platform: str
    chat_id: str
    thread_id: str | None
    chunk_index: int
    text: str
    plain: str | None
    markup: str | None
    reply_to: str | None
    status: str
    platform_message_id: str | None
    attempts: int
    created_at: float
    updated_at: float
    last_error: str | None
    stream: str | None = None
    """How the message was shown while it was written (``'edit'``, ``'native'``), for a streamed reply."""

    @property
    def live(self) -> bool:
        """A message shown while it is written: only its stream writes to it, delivery leaves it alone."""
        return self.status == LIVE


LIVE = "live"
"""The outbox status of a reply's message while it is streamed (see ``storage/outbox.py``)."""


@dataclass(frozen=True, slots=True)
class UsageTotals:
    """Model usage summed over a period, across sessions."""

    calls: int
    input_tokens: int
    output_tokens: int
    cache_read_tokens: int
    cache_write_tokens: int
    cost_usd: float


@dataclass(frozen=True, slots=True, kw_only=True)
class PairingCode:
    """A one-time code offered to an unknown user; the operator approves it to let them in."""

    code: str
    platform: str
    user_id: str
    user_name: str | None
    chat_id: str | None
    created_at: float
    expires_at: float
    used_at: float | None = None


def tool_calls_to_json(calls: Sequence[ToolCallRecord]) -> str | None:
    """The stored form of ``tool_calls``: compact JSON, or NULL when there are none."""
    if not calls:
        return None
    return json.dumps([call.to_dict() for call in calls], ensure_ascii=False, separators=(",", ":"))


def tool_calls_from_json(text: str | None) -> tuple[ToolCallRecord, ...]:
    if not text:
        return ()
    return tuple(ToolCallRecord.coerce(item) for item in json.loads(text))


MAX_MEDIA_PART_CHARS: Final = 4096
"""The most text one media part may hold in all: a reference (kind, type, size, names) is far smaller, so more
means something put the content itself (base64 bytes, extracted text) where only its name belongs."""
_MEDIA_NAMES: Final = ("sha256", "text_sha256")


def media_parts(parts: Sequence[Mapping[str, Any]]) -> tuple[dict[str, Any], ...]:
    """Copies of ``parts`` once each is a reference: a mapping naming its bytes by SHA-256, holding no content.

    ``TypeError`` or ``ValueError`` saying what is wrong otherwise (raised where the message is made,
    in the caller, rather than in the writer's transaction).
    """
    checked = []
    for part in parts:
        if not isinstance(part, Mapping):
            raise TypeError(f"a media part must be a dict like MediaPart.to_dict(), not {type(part).__name__}")
        for key in _MEDIA_NAMES:
            name = part.get(key)
            if (key == "sha256" or name is not None) and not (isinstance(name, str) and is_media_name(name)):
                raise ValueError(f"a media part names its bytes by {key}, 64 lowercase hex digits; got {name!r}")
        chars = sum(len(value) for value in part.values() if isinstance(value, str))
        if chars > MAX_MEDIA_PART_CHARS:
            raise ValueError(f"a media part holds references, never the content: {chars:,} characters of text in "
                             f"one part (at most {MAX_MEDIA_PART_CHARS:,}); keep the bytes in the media folder")  # fmt: skip
        checked.append(dict(part))
    return tuple(checked)


def media_to_json(parts: Sequence[Mapping[str, Any]]) -> str | None:
    """The stored form of ``media``: compact JSON, or NULL when there are none."""
    if not parts:
        return None
    return json.dumps(list(parts), ensure_ascii=False, separators=(",", ":"))


def media_from_json(text: str | None) -> tuple[dict[str, Any], ...]:
    if not text:
        return ()
    return tuple(json.loads(text))

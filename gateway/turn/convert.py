"""Converting between the agent's messages and the store's records (a field-by-field copy).

Media parts travel as their dicts (``MediaPart.to_dict()``/``from_dict``): the store keeps the
references, the bytes stay in the media folder.
"""

from __future__ import annotations

from agent import ChatMessage, MediaPart, ToolCall, estimate_message
from storage import MessageRecord, NewMessage, ToolCallRecord


def to_chat(record: MessageRecord) -> ChatMessage:
    message = ChatMessage(
        role=record.role,  # type: ignore[arg-type]
        content=record.content,
        tool_calls=tuple(ToolCall(c.id, c.name, c.arguments) for c in record.tool_calls) if record.tool_calls else (),
        tool_call_id=record.tool_call_id,
        tool_name=record.tool_name,
        reasoning=record.reasoning,
        media=tuple(MediaPart.from_dict(part) for part in record.media) if record.media else (),
    )
    if record.token_estimate is not None:
        # Stored when the message was written (by to_new, with the same estimator): reuse it
        # rather than estimating the whole history again on every turn.
        object.__setattr__(message, "token_estimate", record.token_estimate)
    return message


def to_new(message: ChatMessage, *, platform_message_id: str | None = None) -> NewMessage:
    return NewMessage(
        role=message.role,
        content=message.content,
        tool_calls=tuple(ToolCallRecord(c.id, c.name, c.arguments) for c in message.tool_calls),
        tool_call_id=message.tool_call_id,
        tool_name=message.tool_name,
        reasoning=message.reasoning,
        token_estimate=estimate_message(message),
        platform_message_id=platform_message_id,
        media=tuple(part.to_dict() for part in message.media),
    )

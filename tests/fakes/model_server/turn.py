"""An API-neutral assistant turn, built once from a reply and rendered per API."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

from .prompt import count_text_tokens
from .replies import SuccessReply, Text, as_calls

Finish = Literal["end", "tool", "truncated"]


@dataclass(frozen=True)
class Call:
    """A tool call with its id fixed."""

    id: str
    name: str
    input: dict[str, Any]

    @property
    def arguments(self) -> str:
        """The input as compact JSON text."""
        return json.dumps(self.input, separators=(",", ":"), ensure_ascii=False)


@dataclass(frozen=True)
class Turn:
    """What the fake model says: optional text, tool calls, and why it stopped."""

    text: str | None
    calls: tuple[Call, ...]
    finish: Finish
    output_tokens: int
    pace: float | None = None
    """Tokens (words) per second the text is written at; None: all at once."""


def _output_tokens(text: str | None, calls: tuple[Call, ...]) -> int:
    spent = count_text_tokens(text or "")
    spent += sum(count_text_tokens(call.name + call.arguments) for call in calls)
    return max(1, spent)


def build_turn(reply: SuccessReply, new_call_id: Callable[[], str]) -> Turn:
    """Turn a scripted reply into a :class:`Turn`, assigning missing call ids."""
    if isinstance(reply, Text):
        finish: Finish = "truncated" if reply.truncated else "end"
        return Turn(reply.text, (), finish, _output_tokens(reply.text, ()), reply.pace)
    scripted = as_calls(reply)
    calls = tuple(Call(call.id or new_call_id(), call.name, dict(call.input)) for call in scripted.calls)
    return Turn(scripted.text, calls, "tool", _output_tokens(scripted.text, calls), scripted.pace)

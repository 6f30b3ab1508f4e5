"""Keeping a compacted conversation well-formed for every provider.

Two rules providers enforce, and compaction must not break:

- every tool result answers a call made just before it, and every call has
  exactly one result (:func:`repair_tool_pairs`);
- user and assistant turns alternate, so the summary takes the role that
  differs from both of its neighbours (:func:`place_summary`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from agent.compression.boundaries import Boundaries, is_cut_point, last_user_index
from agent.messages import ChatMessage, Role, ToolCall

__all__ = ["STUB_RESULT", "Placement", "Repair", "place_summary", "repair_tool_pairs", "summary_role"]

SummaryRole = Literal["user", "assistant"]

STUB_RESULT: Final = "[Switchboard: the result of this tool call was lost when the conversation was compacted.]"


@dataclass(frozen=True, slots=True)
class Placement:
    """Where the summary goes and which role it takes."""

    bounds: Boundaries
    role: SummaryRole


def summary_role(before: Role | None, after: Role | None) -> SummaryRole | None:
    """A role that differs from both neighbours among user/assistant, or None.

    After anything but a user message (system, assistant, tool) ``user`` is
    preferred: a summary reads naturally as context handed to the assistant.
    """
    preferred: tuple[SummaryRole, SummaryRole] = ("assistant", "user") if before == "user" else ("user", "assistant")
    for role in preferred:
        if role != before and role != after:
            return role
    return None


def _role_at(messages: Sequence[ChatMessage], index: int) -> Role | None:
    return messages[index].role if 0 <= index < len(messages) else None


def _fit(messages: Sequence[ChatMessage], bounds: Boundaries) -> SummaryRole | None:
    return summary_role(_role_at(messages, bounds.head_end - 1), _role_at(messages, bounds.tail_start))


def _alternatives(messages: Sequence[ChatMessage], bounds: Boundaries) -> Iterator[Boundaries]:
    """Other cuts, least disruptive first: a longer tail, a shorter tail, a longer head."""
    head, tail = bounds.head_end, bounds.tail_start
    for start in range(tail - 1, head, -1):
        if is_cut_point(messages, start):
            yield Boundaries(head, start)
    last_user = last_user_index(messages)
    limit = last_user if last_user is not None and last_user >= tail else len(messages) - 1
    for start in range(tail + 1, limit + 1):
        if is_cut_point(messages, start):
            yield Boundaries(head, start)
    for end in range(head + 1, tail):
        if is_cut_point(messages, end):
            yield Boundaries(end, tail)


def place_summary(
    messages: Sequence[ChatMessage], bounds: Boundaries, *, cover: tuple[int, int] | None = None
) -> Placement | None:
    """Choose the summary's role, moving a cut if no role fits between head and tail.

    When the head ends with an assistant message and the tail starts with a
    user message (the usual case), neither role fits; the tail then grows
    back to the nearest assistant message so that a ``user`` summary sits
    between two assistant turns. None when no cut can avoid putting two
    user or two assistant messages side by side (only tiny middles, such as a
    single tool group between a user message and an assistant reply).

    ``cover`` (first, last index): messages the middle must hold, i.e. the
    summaries of earlier compactions, which the new summary replaces; a cut
    that left one in the head or tail would leave two summaries.
    """
    for candidate in (bounds, *_alternatives(messages, bounds)):
        if cover is not None and not candidate.head_end <= cover[0] <= cover[1] < candidate.tail_start:
            continue
        role = _fit(messages, candidate)
        if role is not None:
            return Placement(candidate, role)
    return None


@dataclass(frozen=True, slots=True)
class Repair:
    """A conversation after tool-pair repair, and what the repair changed."""

    messages: list[ChatMessage]
    dropped_results: int = 0
    stubbed_calls: int = 0


def _stubs(pending: dict[str, ToolCall]) -> list[ChatMessage]:
    return [ChatMessage.tool(call.id, STUB_RESULT, tool_name=call.name) for call in pending.values()]


def repair_tool_pairs(messages: Sequence[ChatMessage]) -> Repair:
    """Drop tool results without a call, give calls without a result a stub.

    A result counts only if it directly follows its call (after the other
    results of the same message), which is what providers require. A final
    assistant message whose calls have no results yet is left alone: its tools
    may still be running.
    """
    out: list[ChatMessage] = []
    pending: dict[str, ToolCall] = {}
    dropped = stubbed = 0
    for message in messages:
        if message.role == "tool":
            if message.tool_call_id in pending:
                del pending[message.tool_call_id]
                out.append(message)
            else:
                dropped += 1
            continue
        stubbed += len(pending)
        out.extend(_stubs(pending))
        pending = {call.id: call for call in message.tool_calls} if message.role == "assistant" else {}
        out.append(message)
    if pending and out and out[-1].role == "tool":
        stubbed += len(pending)
        out.extend(_stubs(pending))
    return Repair(out, dropped_results=dropped, stubbed_calls=stubbed)

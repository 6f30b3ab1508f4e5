"""Where a conversation is cut: a protected head, a middle to condense, a protected tail.

::

    [0 .. head_end)          system prompt + first exchange, kept verbatim
    [head_end .. tail_start) the middle, condensed into one summary message
    [tail_start .. n)        recent messages, kept verbatim

The tail is sized by a token budget, walking back from the newest message, but
never holds fewer than ``protect_last_n`` messages. Both cuts respect tool
groups (an assistant message with tool calls and the results that follow it)
and the tail always holds the last user message.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.compression.framing import is_summary
from agent.messages import ChatMessage

__all__ = [
    "Boundaries",
    "find_boundaries",
    "head_end",
    "is_cut_point",
    "last_user_index",
    "tail_start",
]

Estimate = Callable[[ChatMessage], int]


@dataclass(frozen=True, slots=True)
class Boundaries:
    """Cut points into a message list; the middle is never empty."""

    head_end: int
    tail_start: int

    def __post_init__(self) -> None:
        if not 0 <= self.head_end < self.tail_start:
            raise ValueError(f"empty middle: head_end={self.head_end} tail_start={self.tail_start}")


def is_cut_point(messages: Sequence[ChatMessage], index: int) -> bool:
    """Whether a cut before ``messages[index]`` keeps every tool group whole.

    Tool results always follow their call, so a cut is safe anywhere except
    right before a tool message.
    """
    return 0 <= index < len(messages) and messages[index].role != "tool"


def head_end(messages: Sequence[ChatMessage], protect_first_n: int) -> int:
    """End of the protected head: the first ``protect_first_n`` messages plus the
    results of a tool call that ends it."""
    end = min(max(protect_first_n, 0), len(messages))
    while end < len(messages) and messages[end].role == "tool":
        end += 1
    return end


def last_user_index(messages: Sequence[ChatMessage]) -> int | None:
    """Index of the newest user message that is not a compaction summary."""
    for index in range(len(messages) - 1, -1, -1):
        message = messages[index]
        if message.role == "user" and not is_summary(message):
            return index
    return None


def _walk_tail(
    messages: Sequence[ChatMessage], floor: int, protect_last_n: int, budget: int, estimate: Estimate
) -> int:
    """Walk back from the end while the budget lasts, keeping at least ``protect_last_n``."""
    start, used = len(messages), 0
    while start > floor:
        cost = estimate(messages[start - 1])
        if len(messages) - start >= protect_last_n and used + cost > budget:
            break
        used += cost
        start -= 1
    return start


def _align_to_group(messages: Sequence[ChatMessage], index: int) -> int:
    """Move a cut that lands inside a tool group to the group's start.

    The whole group then stays in the tail. Tool results with no calling
    assistant before them (malformed input) are left to the middle instead.
    """
    if index >= len(messages) or messages[index].role != "tool":
        return index
    start = index
    while start > 0 and messages[start - 1].role == "tool":
        start -= 1
    parent = start - 1
    if parent >= 0 and messages[parent].role == "assistant" and messages[parent].tool_calls:
        return parent
    while index < len(messages) and messages[index].role == "tool":
        index += 1
    return index


def tail_start(
    messages: Sequence[ChatMessage],
    head: int,
    *,
    protect_last_n: int,
    budget: int,
    estimate: Estimate,
) -> int:
    """Start of the protected tail (``len(messages)`` would mean an empty tail)."""
    start = _walk_tail(messages, head, protect_last_n, budget, estimate)
    start = _align_to_group(messages, start)
    last_user = last_user_index(messages)
    if last_user is not None and head <= last_user < start:
        start = last_user
    return start


def find_boundaries(
    messages: Sequence[ChatMessage],
    *,
    protect_first_n: int,
    protect_last_n: int,
    tail_budget: int,
    estimate: Estimate,
) -> Boundaries | None:
    """The head, middle and tail of ``messages``; None when there is no middle."""
    head = head_end(messages, protect_first_n)
    tail = tail_start(messages, head, protect_last_n=protect_last_n, budget=tail_budget, estimate=estimate)
    if tail <= head or tail >= len(messages):
        return None
    return Boundaries(head_end=head, tail_start=tail)

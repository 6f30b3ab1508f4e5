"""Builders and fakes shared by the compressor tests (this module holds no tests)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from agent.compressor import ContextCompressor, SummaryRequest
from agent.messages import ChatMessage, ToolCall

SYSTEM = "You are Switchboard, a helpful assistant."


def estimate(message: ChatMessage) -> int:
    """A predictable estimate for tests: about four characters per token plus framing."""
    calls = sum(4 + (len(call.name) + len(call.arguments)) // 4 for call in message.tool_calls)
    return 4 + len(message.content) // 4 + calls


def call(call_id: str, name: str = "read_file", **arguments: object) -> ToolCall:
    return ToolCall(id=call_id, name=name, arguments=json.dumps(arguments))


def exchange(index: int, *, output_chars: int = 600) -> list[ChatMessage]:
    """One user request answered with a tool call, its result and a closing reply."""
    tool_call = call(f"call-{index}", "read_file", path=f"src/module_{index}.py")
    output = (f"def function_{index}():\n    return {index}\n" * 200)[:output_chars]
    return [
        ChatMessage.user(f"Request {index}: please review src/module_{index}.py"),
        ChatMessage.assistant("", [tool_call]),
        ChatMessage.tool(tool_call.id, output, tool_name="read_file"),
        ChatMessage.assistant(f"Reviewed module {index}; it looks fine."),
    ]


def conversation(exchanges: int, *, output_chars: int = 600, system: str = SYSTEM) -> list[ChatMessage]:
    """A system prompt followed by ``exchanges`` request/tool/reply rounds."""
    messages = [ChatMessage.system(system)]
    for index in range(exchanges):
        messages += exchange(index, output_chars=output_chars)
    return messages


def chat(*pairs: tuple[str, str], system: str = SYSTEM) -> list[ChatMessage]:
    """A plain conversation of (user, assistant) text pairs."""
    messages = [ChatMessage.system(system)]
    for asked, answered in pairs:
        messages += [ChatMessage.user(asked), ChatMessage.assistant(answered)]
    return messages


class FakeSummarizer:
    """The injected summary model: records every request, replies from a script."""

    def __init__(self, replies: Iterable[str | BaseException] = ()) -> None:
        self.replies = list(replies)
        self.requests: list[SummaryRequest] = []

    async def __call__(self, request: SummaryRequest) -> str:
        self.requests.append(request)
        reply = self.replies.pop(0) if self.replies else f"## Goal\nSummary number {len(self.requests)}."
        if isinstance(reply, BaseException):
            raise reply
        return reply

    @property
    def calls(self) -> int:
        return len(self.requests)

    @property
    def last_prompt(self) -> str:
        return self.requests[-1].prompt


class FakeClock:
    """A monotonic clock the test moves by hand."""

    def __init__(self, now: float = 1_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def make(
    summarizer: FakeSummarizer | None = None,
    *,
    context_length: int = 20_000,
    protect_last_n: int = 4,
    clock: FakeClock | None = None,
    **options: object,
) -> ContextCompressor:
    """A compressor over a 20,000-token window with the test estimate and a hand-moved clock."""
    return ContextCompressor(
        context_length,
        protect_last_n=protect_last_n,
        summarizer=summarizer or FakeSummarizer(),
        clock=clock or FakeClock(),
        estimate=estimate,
        **options,  # type: ignore[arg-type]
    )


def events(logs: Sequence[Mapping[str, Any]], name: str) -> list[Mapping[str, Any]]:
    """The captured log entries of one event."""
    return [entry for entry in logs if entry["event"] == name]

"""The context-engine boundary: what the agent loop asks of whatever manages its window.

The agent loop only ever talks to a :class:`ContextEngine`. It reports the prompt
size the provider measured (``update_from_usage``), asks whether the window is
getting full (``should_compress``) and, if so, hands the conversation over
(``compress``). The engine answers with a :class:`CompressionResult` that says
whether the conversation changed, so the gateway knows when to start a lineage
child session and persist the new message list.

The default engine is :class:`agent.compression.compressor.ContextCompressor`,
which condenses the middle of the conversation with a summary model. The model
is reached through an injected :data:`Summarizer`, so this package never imports
a provider.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from agent.messages import ChatMessage

__all__ = ["CompressionResult", "ContextEngine", "Summarizer", "SummaryRequest"]


@dataclass(frozen=True, slots=True)
class SummaryRequest:
    """One call to the summary model: a single user prompt and its output ceiling."""

    prompt: str
    """The whole instruction, including the serialised turns to condense."""
    max_tokens: int
    """The summary budget in tokens; the prompt asks the model to stay within it."""
    previous_summary: str | None = None
    """The summary being updated, when this is not the first compaction."""
    focus: str | None = None
    """The topic a manual ``/compress <topic>`` asked to emphasise."""


Summarizer = Callable[[SummaryRequest], Awaitable[str]]
"""Produces the summary text. Wired to the auxiliary model (``auxiliary.compression.*``)."""


@dataclass(frozen=True, slots=True)
class CompressionResult:
    """What a compaction attempt did. ``messages`` is always safe to send as is."""

    messages: list[ChatMessage]
    """The conversation to use from now on (the input, unchanged, unless ``compacted``)."""
    compacted: bool
    """True when the conversation changed and must be persisted as a lineage child."""
    summary_failed: bool = False
    """The summary model was called and failed (or returned nothing)."""
    used_local_summary: bool = False
    """The summary is the deterministic local one, built without a model."""
    tokens_before: int = 0
    """Estimated tokens of the input messages."""
    tokens_after: int = 0
    """Estimated tokens of ``messages``."""
    dropped: int = 0
    """Input messages not carried into ``messages`` (condensed into the summary)."""
    summary: str | None = None
    """The summary text inserted into the conversation, without its framing."""
    pruned: int = 0
    """Old tool results shortened to one line before summarising."""
    reason: str = "compacted"
    """Why the result is what it is. ``compacted``: the model summarised. ``summary_failed``
    or ``cooldown``: the model failed or is backing off, so either nothing changed or, with
    ``must_fit``, the local summary was used. ``nothing_to_compress``: no middle between the
    protected head and tail. ``busy``: another compaction of this engine is running."""
    error: str | None = None
    """The summary model's error, when it failed."""


class ContextEngine(abc.ABC):
    """Decides when a conversation is too large and makes it smaller.

    Typical use inside the agent loop::

        engine.update_from_usage(response.usage.prompt_tokens)
        if engine.should_compress():
            result = await engine.compress(messages)
            if result.compacted:
                messages = result.messages  # and persist them as a lineage child
    """

    name: ClassVar[str] = "context-engine"

    @abc.abstractmethod
    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """Whether the prompt is large enough to compact now.

        ``prompt_tokens`` defaults to the last size reported through
        :meth:`update_from_usage`.
        """

    @abc.abstractmethod
    async def compress(
        self,
        messages: Sequence[ChatMessage],
        *,
        current_tokens: int | None = None,
        focus: str | None = None,
        force: bool = False,
        must_fit: bool = False,
    ) -> CompressionResult:
        """Compact ``messages`` and report what happened.

        ``focus`` is the topic of a manual ``/compress``; ``force`` is a manual
        request that ignores back-off; ``must_fit`` means the next request
        cannot be sent otherwise, so the engine must shrink the conversation
        even without its usual tools.
        """

    @abc.abstractmethod
    def update_from_usage(self, prompt_tokens: int) -> None:
        """Record the prompt size the provider reported for the last request."""

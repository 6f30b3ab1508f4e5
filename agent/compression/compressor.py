"""The default context engine: condense the middle of a conversation into a summary.

A compaction runs in four phases:

1. Old tool results in the middle (over 200 characters) become one line each,
   so the summary model reads less (:mod:`agent.compression.pruning`).
2. The conversation is cut into head, middle and tail without splitting a tool
   group, with the last user message in the tail (:mod:`~.boundaries`).
3. The summary model condenses the middle into structured notes, or updates
   the notes of the previous compaction (:mod:`~.summary`).
4. Head + summary + tail are joined, the summary taking a role that keeps
   turns alternating, and tool pairs are repaired (:mod:`~.repair`).

Nothing is dropped without a summary: when the model fails, the messages come
back unchanged and a back-off starts. Only when the caller says the next
request cannot fit otherwise (``must_fit``) does a deterministic local summary
stand in (:mod:`~.fallback`); the log says so.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from agent.compression.boundaries import Boundaries, find_boundaries
from agent.compression.budget import CompressionBudget
from agent.compression.cooldown import Cooldown
from agent.compression.engine import CompressionResult, ContextEngine, Summarizer, SummaryRequest
from agent.compression.fallback import local_summary
from agent.compression.framing import is_summary, summary_body, summary_message, with_compaction_note
from agent.compression.pruning import calls_by_id, prune_tool_results
from agent.compression.repair import Placement, place_summary, repair_tool_pairs
from agent.compression.summary import build_request, clean_summary
from agent.messages import ChatMessage
from agent.tokens import estimate_message, estimate_text

__all__ = ["ContextCompressor", "EmptySummaryError"]

log = structlog.get_logger("agent.compressor")

MAX_INEFFECTIVE: Final = 2
"""Compactions in a row that left the prompt over the threshold before automatic ones stop."""
MAX_ERROR_CHARS: Final = 300


class EmptySummaryError(RuntimeError):
    """The summary model answered with nothing usable."""


@dataclass(frozen=True, slots=True)
class _Plan:
    """One compaction's cut, and the condensed turns split into old notes and new turns."""

    placement: Placement
    middle: list[ChatMessage]
    turns: list[ChatMessage]
    previous: str | None


def _widen(messages: Sequence[ChatMessage], bounds: Boundaries, cover: tuple[int, int]) -> Boundaries | None:
    """``bounds`` grown so the middle holds ``messages[cover[0]]`` to ``messages[cover[1]]``.

    None when that leaves no tail (the last message is itself a summary).
    """
    head = min(bounds.head_end, cover[0])
    tail = max(bounds.tail_start, cover[1] + 1)
    while tail < len(messages) and messages[tail].role == "tool":
        tail += 1  # results without their call: they go to the middle, where repair drops them
    return Boundaries(head, tail) if tail < len(messages) else None


def _describe(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip().rstrip(":")
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."


class ContextCompressor(ContextEngine):
    """Compacts a conversation once its prompt reaches ``threshold`` of the window.

    ::

        compressor = ContextCompressor(200_000, summarizer=summarize)
        compressor.update_from_usage(response.usage.prompt_tokens)
        if compressor.should_compress():
            result = await compressor.compress(messages)

    The head (``protect_first_n`` messages: the system prompt and the first
    exchange) and the tail (at least ``protect_last_n`` messages, more while
    ``tail_budget`` tokens last) are kept verbatim; everything between becomes
    one summary message. The system message changes once, on a conversation's
    first compaction, when a short note about the summary is appended: that is
    the only change the frozen system prompt ever gets.
    """

    name = "compressor"

    def __init__(
        self,
        context_length: int,
        *,
        threshold: float = 0.5,
        target_ratio: float = 0.2,
        protect_first_n: int = 3,
        protect_last_n: int = 20,
        summarizer: Summarizer,
        clock: Callable[[], float] = time.monotonic,
        estimate: Callable[[ChatMessage], int] | None = None,
        failure_cooldown_s: float = 60.0,
        summary_timeout_s: float | None = 120.0,
    ) -> None:
        if protect_first_n < 0:
            raise ValueError(f"protect_first_n must be >= 0, got {protect_first_n}")
        if protect_last_n < 1:
            raise ValueError(f"protect_last_n must be >= 1, got {protect_last_n}")
        self._budget = CompressionBudget(context_length, threshold, target_ratio)
        self._protect_first_n = protect_first_n
        self._protect_last_n = protect_last_n
        self._summarizer = summarizer
        self._estimate = estimate or estimate_message
        self._cooldown = Cooldown(clock, base_s=failure_cooldown_s)
        self._summary_timeout_s = summary_timeout_s
        self._last_prompt_tokens: int | None = None
        self._compactions = 0
        self._previous_summary: str | None = None
        self._pressure_reported = False
        self._awaiting_usage = False
        self._ineffective = 0
        self._running = False

    # -- budgets and state ---------------------------------------------------------------

    @property
    def context_length(self) -> int:
        """The model's context window in tokens."""
        return self._budget.context_length

    @property
    def threshold_tokens(self) -> int:
        """Prompt size at which compaction fires."""
        return self._budget.threshold_tokens

    @property
    def tail_budget(self) -> int:
        """Tokens of recent messages kept verbatim beyond ``protect_last_n``."""
        return self._budget.tail_budget

    @property
    def max_summary_tokens(self) -> int:
        """The largest summary budget: min(5% of the window, 12,000)."""
        return self._budget.max_summary_tokens

    @property
    def compaction_count(self) -> int:
        """Compactions this compressor has completed."""
        return self._compactions

    @property
    def last_prompt_tokens(self) -> int | None:
        """The last reported prompt size; None until reported, and again after a compaction."""
        return self._last_prompt_tokens

    @property
    def previous_summary(self) -> str | None:
        """The notes of the last compaction."""
        return self._previous_summary

    @property
    def cooling_down(self) -> bool:
        """Whether the summary model is in back-off after a failure."""
        return self._cooldown.active()

    def summary_budget(self, content_tokens: int) -> int:
        """The summary budget for condensing ``content_tokens`` tokens."""
        return self._budget.summary_tokens(content_tokens)

    # -- the decision ------------------------------------------------------------------

    def update_from_usage(self, prompt_tokens: int) -> None:
        """Record the prompt size the provider reported for the last request."""
        tokens = max(int(prompt_tokens), 0)
        self._last_prompt_tokens = tokens
        over = tokens >= self.threshold_tokens
        if self._awaiting_usage:
            self._awaiting_usage = False
            self._ineffective = self._ineffective + 1 if over else 0
            if self._ineffective >= MAX_INEFFECTIVE:
                log.warning(
                    "compaction.ineffective", streak=self._ineffective, tokens=tokens, threshold=self.threshold_tokens
                )
        elif not over:
            self._ineffective = 0
        self._report_pressure(tokens)

    def should_compress(self, prompt_tokens: int | None = None) -> bool:
        """Whether to compact now: the prompt reached the threshold and no back-off applies.

        Back-off applies after a summary failure (until the cooldown ends) and
        after compactions that repeatedly failed to bring the prompt under the
        threshold (until a reported prompt fits again).
        """
        if prompt_tokens is not None:
            self._report_pressure(prompt_tokens)
        tokens = self._last_prompt_tokens if prompt_tokens is None else prompt_tokens
        if tokens is None or tokens < self.threshold_tokens:
            return False
        return not self._cooldown.active() and self._ineffective < MAX_INEFFECTIVE

    def _report_pressure(self, tokens: int) -> None:
        pressure = tokens >= self._budget.pressure_tokens
        if pressure and not self._pressure_reported:
            log.warning(
                "context.pressure",
                tokens=tokens,
                threshold=self.threshold_tokens,
                percent=round(100 * tokens / max(self.threshold_tokens, 1)),
            )
        self._pressure_reported = pressure

    # -- the compaction ----------------------------------------------------------------

    async def compress(
        self,
        messages: Sequence[ChatMessage],
        *,
        current_tokens: int | None = None,
        focus: str | None = None,
        force: bool = False,
        must_fit: bool = False,
    ) -> CompressionResult:
        """Compact ``messages``; see :class:`ContextEngine`.

        Returns the messages unchanged (``compacted=False``) when there is no
        middle to condense, while the summary model is cooling down, when it
        fails, or when another compaction is running. With ``must_fit`` the
        cooldown and failure cases use the local summary instead. ``force``
        (a manual ``/compress``) calls the model even during a cooldown.
        """
        original = list(messages)
        if self._running:
            log.info("compaction.skipped", reason="busy")
            return self._unchanged(original, reason="busy")
        self._running = True
        try:
            return await self._compress(original, current_tokens, focus, force, must_fit)
        finally:
            self._running = False

    async def _compress(
        self, original: list[ChatMessage], current_tokens: int | None, focus: str | None, force: bool, must_fit: bool
    ) -> CompressionResult:
        plan = self._plan(original)
        if plan is None:
            log.warning(
                "compaction.nothing_to_compress", messages=len(original), must_fit=must_fit, reported=current_tokens
            )
            return self._unchanged(original, reason="nothing_to_compress")
        if self._cooldown.active() and not force:
            if must_fit:
                return self._finish(original, plan, local_summary(plan.turns, plan.previous), reason="cooldown")
            log.info("compaction.skipped", reason="cooldown", remaining_s=round(self._cooldown.remaining(), 1))
            return self._unchanged(original, reason="cooldown")
        turns, pruned = prune_tool_results(plan.turns, calls_by_id(original))
        budget = self._request_budget(turns, plan.previous)
        request = build_request(turns, budget=budget, previous=plan.previous, focus=focus)
        try:
            body = await self._summarize(request)
        except Exception as error:  # any failure of the injected model call; cancellation still propagates
            return self._summary_failed(original, plan, _describe(error), must_fit)
        self._cooldown.clear()
        return self._finish(original, plan, body, pruned=pruned, reported=current_tokens)

    def _plan(self, messages: list[ChatMessage]) -> _Plan | None:
        bounds = find_boundaries(
            messages,
            protect_first_n=self._protect_first_n,
            protect_last_n=self._protect_last_n,
            tail_budget=self.tail_budget,
            estimate=self._estimate,
        )
        if bounds is None:
            return None
        # Earlier summaries go into the middle wherever the budgets put the cuts: the new summary
        # updates their notes and replaces them, so a conversation never carries two.
        earlier = [index for index, message in enumerate(messages) if is_summary(message)]
        cover = (earlier[0], earlier[-1]) if earlier else None
        if cover is not None:
            bounds = _widen(messages, bounds, cover)
            if bounds is None:
                return None
        placement = place_summary(messages, bounds, cover=cover)
        if placement is None:
            return None
        middle = messages[placement.bounds.head_end : placement.bounds.tail_start]
        turns = [message for message in middle if not is_summary(message)]
        if not turns:
            return None
        bodies = [summary_body(message) for message in middle if is_summary(message)]
        previous = "\n\n".join(bodies) if bodies else None
        return _Plan(placement=placement, middle=middle, turns=turns, previous=previous)

    def _request_budget(self, turns: Sequence[ChatMessage], previous: str | None) -> int:
        content = sum(self._estimate(message) for message in turns)
        return self.summary_budget(content + (estimate_text(previous) if previous else 0))

    async def _summarize(self, request: SummaryRequest) -> str:
        if self._summary_timeout_s is None:
            text = await self._summarizer(request)
        else:
            async with asyncio.timeout(self._summary_timeout_s):
                text = await self._summarizer(request)
        body = clean_summary(text)
        if not body:
            raise EmptySummaryError("the summary model returned no text")
        return body

    def _summary_failed(
        self, original: list[ChatMessage], plan: _Plan, error: str, must_fit: bool
    ) -> CompressionResult:
        cooldown_s = self._cooldown.start()
        log.warning("compaction.summary_failed", error=error, cooldown_s=cooldown_s, must_fit=must_fit)
        if must_fit:
            body = local_summary(plan.turns, plan.previous)
            return self._finish(original, plan, body, reason="summary_failed", error=error)
        return self._unchanged(original, reason="summary_failed", summary_failed=True, error=error)

    def _finish(
        self,
        original: list[ChatMessage],
        plan: _Plan,
        body: str,
        *,
        reason: str | None = None,
        error: str | None = None,
        pruned: int = 0,
        reported: int | None = None,
    ) -> CompressionResult:
        """Phase 4: head + summary + tail, tool pairs repaired, state and log updated.

        ``reason`` is set only for a local summary (why the model was not used).
        """
        local = reason is not None
        bounds = plan.placement.bounds
        head = original[: bounds.head_end]
        if head and head[0].role == "system" and not any(is_summary(message) for message in original):
            head[0] = with_compaction_note(head[0])
        summary = summary_message(body, plan.placement.role, local=local)
        repair = repair_tool_pairs([*head, summary, *original[bounds.tail_start :]])
        self._compactions += 1
        self._previous_summary = body
        self._last_prompt_tokens = None
        self._awaiting_usage = True
        before, after = self._count(original), self._count(repair.messages)
        dropped = len(plan.middle) + repair.dropped_results
        if local:
            log.warning("compaction.local_summary", reason=reason, dropped=dropped, error=error)
        log.info(
            "compaction.done",
            before=before,
            after=after,
            summarized=len(plan.middle),
            kept=len(repair.messages),
            pruned=pruned,
            count=self._compactions,
            local=local,
            reported=reported,
        )
        return CompressionResult(
            messages=repair.messages,
            compacted=True,
            summary_failed=reason == "summary_failed",
            used_local_summary=local,
            tokens_before=before,
            tokens_after=after,
            dropped=dropped,
            summary=body,
            pruned=pruned,
            reason=reason or "compacted",
            error=error,
        )

    def _unchanged(
        self, original: list[ChatMessage], *, reason: str, summary_failed: bool = False, error: str | None = None
    ) -> CompressionResult:
        tokens = self._count(original)
        return CompressionResult(
            messages=original,
            compacted=False,
            summary_failed=summary_failed,
            tokens_before=tokens,
            tokens_after=tokens,
            reason=reason,
            error=error,
        )

    def _count(self, messages: Sequence[ChatMessage]) -> int:
        return sum(self._estimate(message) for message in messages)

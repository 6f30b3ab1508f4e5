"""Session hygiene: compact a stored session that grew too large between turns (seed 002).

The agent compacts inside its turns at ``compression.threshold`` (50%) using
the API's token counts. A session can still outgrow that between turns (a
burst of messages overnight, a big paste, a model switch to a smaller window),
so before each turn the gateway checks the stored history against
``compression.hygiene_threshold`` (85%) of the context window:

* tokens = the last API-reported prompt size when known, else the rough
  estimate of the stored history;
* only with compression enabled and at least 4 stored messages.

When it fires, the agent session compacts the history (``AgentSession.compact``:
the same entry and lock as ``/compress``, and as the compactions inside a turn,
so it waits for any other compaction of the session) and the caller splits the
session into a lineage child. Success is quiet for the user; a failure drops
nothing and the turn still runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import structlog

from agent import AgentSession, ChatMessage, CompressionResult

log = structlog.get_logger("gateway.hygiene")

MIN_MESSAGES = 4


@dataclass(frozen=True, slots=True)
class HygieneCheck:
    fire: bool
    tokens: int
    source: Literal["reported", "estimated"]
    threshold: int


def check(
    history: Sequence[ChatMessage],
    *,
    enabled: bool,
    context_length: int,
    hygiene_threshold: float,
    last_prompt_tokens: int | None,
    estimate: Callable[[Sequence[ChatMessage]], int],
) -> HygieneCheck:
    """Whether the stored session must be compacted before the next turn."""
    threshold = int(context_length * hygiene_threshold)
    if last_prompt_tokens:
        tokens, source = last_prompt_tokens, "reported"
    else:
        tokens, source = estimate(history), "estimated"
    fire = enabled and len(history) >= MIN_MESSAGES and tokens >= threshold
    return HygieneCheck(fire=fire, tokens=tokens, source=source, threshold=threshold)  # type: ignore[arg-type]


async def compact(history: Sequence[ChatMessage], session: AgentSession, verdict: HygieneCheck) -> CompressionResult:
    """Compact ``history`` through the agent session; the caller persists ``result.messages`` as a lineage child."""
    log.info(
        "hygiene.compacting",
        messages=len(history),
        tokens=verdict.tokens,
        source=verdict.source,
        threshold=verdict.threshold,
    )
    result = await session.compact(history, current_tokens=verdict.tokens)
    if result.compacted:
        log.info(
            "hygiene.compacted",
            before=len(history),
            after=len(result.messages),
            tokens_before=result.tokens_before,
            tokens_after=result.tokens_after,
        )
    else:
        log.warning("hygiene.not_compacted", reason=result.reason, error=result.error)
    return result

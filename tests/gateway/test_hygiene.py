"""The hygiene decision on its own (seed 002): the boundaries the end-to-end tests do not pin."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agent.messages import ChatMessage
from gateway.turn import hygiene

WINDOW = 10_000  # 85% of it: 8,500 tokens


def history(count: int) -> list[ChatMessage]:
    return [ChatMessage.user(f"message {n}") if n % 2 == 0 else ChatMessage.assistant(f"answer {n}") for n in range(count)]


def estimate_as(tokens: int):  # type: ignore[no-untyped-def]
    def estimate(messages: Sequence[ChatMessage]) -> int:
        return tokens

    return estimate


def verdict(*, messages: int = 10, reported: int | None = None, estimated: int = 0, enabled: bool = True) -> hygiene.HygieneCheck:
    return hygiene.check(history(messages), enabled=enabled, context_length=WINDOW, hygiene_threshold=0.85,
                         last_prompt_tokens=reported, estimate=estimate_as(estimated))  # fmt: skip


@pytest.mark.parametrize(("tokens", "fires"), [(8_499, False), (8_500, True), (9_999, True)])
def test_it_fires_at_85_percent_of_the_window_and_not_below(tokens: int, fires: bool) -> None:
    assert verdict(estimated=tokens).fire is fires
    assert verdict(reported=tokens).fire is fires
    assert verdict(estimated=tokens).threshold == 8_500


def test_the_api_reported_size_wins_over_the_estimate() -> None:
    check = verdict(reported=9_000, estimated=100)
    assert (check.fire, check.tokens, check.source) == (True, 9_000, "reported")
    check = verdict(reported=100, estimated=9_000)  # the estimate is rough: a known size is trusted
    assert (check.fire, check.tokens, check.source) == (False, 100, "reported")
    check = verdict(reported=None, estimated=9_000)
    assert (check.fire, check.source) == (True, "estimated")


def test_it_needs_four_stored_messages_and_compression_on() -> None:
    assert not verdict(messages=3, estimated=9_500).fire
    assert verdict(messages=4, estimated=9_500).fire
    assert not verdict(estimated=9_500, enabled=False).fire

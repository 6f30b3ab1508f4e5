"""The numbers a compaction works with, derived from the model's context window.

For a 200,000-token window at the defaults::

    threshold_tokens   = 200,000 x 0.50           = 100,000
    tail_budget        = 100,000 x 0.20           =  20,000
    max_summary_tokens = min(200,000 x 0.05, 12,000) = 10,000
    pressure_tokens    = 100,000 x 0.85           =  85,000
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["CompressionBudget"]

SUMMARY_RATIO: Final = 0.20
"""The summary may take this share of the tokens it replaces..."""
SUMMARY_FLOOR: Final = 2_000
"""...but never fewer than this many tokens..."""
SUMMARY_CEILING: Final = 12_000
"""...and never more than this, nor more than ``SUMMARY_WINDOW_SHARE`` of the window."""
SUMMARY_WINDOW_SHARE: Final = 0.05
PRESSURE_SHARE: Final = 0.85
"""Share of the threshold at which the log starts warning about context pressure."""
TARGET_RATIO_RANGE: Final = (0.10, 0.80)


@dataclass(frozen=True, slots=True)
class CompressionBudget:
    """Token budgets of one compressor. ``target_ratio`` is clamped to 0.10-0.80."""

    context_length: int
    threshold: float = 0.50
    target_ratio: float = 0.20

    def __post_init__(self) -> None:
        if self.context_length <= 0:
            raise ValueError(f"context_length must be positive, got {self.context_length}")
        if not 0.0 < self.threshold <= 1.0:
            raise ValueError(f"compression threshold must be in (0, 1], got {self.threshold}")
        low, high = TARGET_RATIO_RANGE
        object.__setattr__(self, "target_ratio", min(max(self.target_ratio, low), high))

    @property
    def threshold_tokens(self) -> int:
        """Prompt size at which compaction fires."""
        return int(self.context_length * self.threshold)

    @property
    def tail_budget(self) -> int:
        """Tokens of recent messages kept verbatim (beyond the minimum message count)."""
        return int(self.threshold_tokens * self.target_ratio)

    @property
    def max_summary_tokens(self) -> int:
        """The largest summary any compaction may ask for."""
        return min(int(self.context_length * SUMMARY_WINDOW_SHARE), SUMMARY_CEILING)

    @property
    def pressure_tokens(self) -> int:
        """Prompt size at which the log reports context pressure."""
        return int(self.threshold_tokens * PRESSURE_SHARE)

    def summary_tokens(self, content_tokens: int) -> int:
        """The summary budget for condensing ``content_tokens`` tokens.

        20% of the content, at least 2,000, at most :attr:`max_summary_tokens`.
        On windows under 40,000 tokens the ceiling is below the floor; the
        ceiling wins there, so a summary never crowds out the window it serves.
        """
        wanted = max(SUMMARY_FLOOR, int(content_tokens * SUMMARY_RATIO))
        return min(wanted, self.max_summary_tokens)

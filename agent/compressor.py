"""Public entry point of context compaction; the implementation lives in :mod:`agent.compression`."""

from __future__ import annotations

from agent.compression import (
    CompressionBudget,
    CompressionResult,
    ContextCompressor,
    ContextEngine,
    EmptySummaryError,
    Summarizer,
    SummaryRequest,
)

__all__ = [
    "CompressionBudget",
    "CompressionResult",
    "ContextCompressor",
    "ContextEngine",
    "EmptySummaryError",
    "Summarizer",
    "SummaryRequest",
]

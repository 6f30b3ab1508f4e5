"""Context compaction: keep a long conversation inside the model's window.

Public API (also importable from :mod:`agent.compressor`)::

    ContextEngine      the interface the agent loop talks to
    ContextCompressor  the default engine: summarise the middle of the conversation
    CompressionResult  what a compaction did
    SummaryRequest     one call to the summary model
    Summarizer         the injected async callable that makes that call
    CompressionBudget  the token budgets derived from the context window
"""

from __future__ import annotations

from agent.compression.budget import CompressionBudget
from agent.compression.compressor import ContextCompressor, EmptySummaryError
from agent.compression.engine import CompressionResult, ContextEngine, Summarizer, SummaryRequest

__all__ = [
    "CompressionBudget",
    "CompressionResult",
    "ContextCompressor",
    "ContextEngine",
    "EmptySummaryError",
    "Summarizer",
    "SummaryRequest",
]

"""Token usage of model calls, normalised across providers, and what it cost."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens of one or more calls. ``input_tokens`` counts only the uncached part of the prompt."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0

    @property
    def prompt_tokens(self) -> int:
        """The whole prompt as the API counted it: uncached + read from cache + written to cache."""
        return self.input_tokens + self.cache_read_tokens + self.cache_write_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.cache_read_tokens + other.cache_read_tokens,
            self.cache_write_tokens + other.cache_write_tokens,
        )


@dataclass(frozen=True, slots=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_read: float | None = None
    """Default: 10% of input."""
    cache_write: float | None = None
    """Default: 1.25x input for 5-minute entries, 2x for 1-hour entries."""


# Published list prices, USD per million tokens (longest matching name wins).
DEFAULT_PRICES: dict[str, Price] = {
    "claude-opus-4-5": Price(5.0, 25.0),
    "claude-opus-4-7": Price(5.0, 25.0),
    "claude-opus-4-8": Price(5.0, 25.0),
    "claude-opus-4-6": Price(5.0, 25.0),
    "claude-opus-4": Price(15.0, 75.0),
    "claude-sonnet-4": Price(3.0, 15.0),
    "claude-3-7-sonnet": Price(3.0, 15.0),
    "claude-3-5-sonnet": Price(3.0, 15.0),
    "claude-haiku-4": Price(1.0, 5.0),
    "claude-3-5-haiku": Price(0.8, 4.0),
    "gpt-5-nano": Price(0.05, 0.40, cache_read=0.005),
    "gpt-5-mini": Price(0.25, 2.0, cache_read=0.025),
    "gpt-5": Price(1.25, 10.0, cache_read=0.125),
    "gpt-4.1-nano": Price(0.10, 0.40, cache_read=0.025),
    "gpt-4.1-mini": Price(0.40, 1.60, cache_read=0.10),
    "gpt-4.1": Price(2.0, 8.0, cache_read=0.50),
    "gpt-4o-mini": Price(0.15, 0.60, cache_read=0.075),
    "gpt-4o": Price(2.5, 10.0, cache_read=1.25),
}


class PriceTable:
    """Looks up a model's price; configured prices override the defaults."""

    def __init__(self, overrides: Mapping[str, Price] | None = None) -> None:
        self._prices = {**DEFAULT_PRICES, **{k.lower(): v for k, v in (overrides or {}).items()}}

    def lookup(self, model: str) -> Price | None:
        name = model.lower().rsplit("/", 1)[-1]
        matches = [key for key in self._prices if key in name]
        return self._prices[max(matches, key=len)] if matches else None

    def cost(self, model: str, usage: Usage, *, cache_ttl: str = "5m") -> float | None:
        """The cost in USD, or None when the model has no known price."""
        price = self.lookup(model)
        if price is None:
            return None
        read = price.cache_read if price.cache_read is not None else price.input * 0.1
        write = price.cache_write if price.cache_write is not None else price.input * (2.0 if cache_ttl == "1h" else 1.25)
        total = (
            usage.input_tokens * price.input
            + usage.output_tokens * price.output
            + usage.cache_read_tokens * read
            + usage.cache_write_tokens * write
        )
        return total / 1_000_000

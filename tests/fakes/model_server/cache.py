"""Prompt-cache accounting modelled on the real services, driven by a fake clock.

Anthropic (explicit caching):

* A block carrying ``cache_control`` is a *breakpoint*; a request without
  breakpoints neither reads nor writes the cache.
* A prefix is identified by a cumulative hash over the model name and every
  block up to and including its last block (markers excluded).
* READ: the longest prefix of this request, ending at any block boundary at
  or before the request's last breakpoint, that an earlier request wrote and
  that has not expired. ``cache_read_input_tokens`` is its length.
* WRITE: ``cache_creation_input_tokens`` is the tokens from the end of the
  read prefix up to the last breakpoint; an entry is stored for every
  breakpoint's prefix, so later requests can read up to any of them.
* ``input_tokens = total - read - creation``.
* Entries expire TTL after last use (a read or a write refreshes them). TTL is
  5 minutes, or 1 hour for ``{"type": "ephemeral", "ttl": "1h"}``.
* Prefixes shorter than ``min_cacheable_tokens`` (default 0) are not written.

OpenAI (automatic caching): ``cached_tokens`` is the longest prefix (at block
boundaries) any earlier request had, still within ``ttl`` of its last use;
every request registers all of its prefixes.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .prompt import PromptBlock, total_tokens

DEFAULT_EPOCH = 1_700_000_000.0
FIVE_MINUTES = 300.0
ONE_HOUR = 3600.0
MAX_BREAKPOINTS = 4


class FakeClock:
    """A clock that only moves when a test says so."""

    def __init__(self, start: float = DEFAULT_EPOCH) -> None:
        self._start = start
        self._now = start

    def now(self) -> float:
        """Current fake time in seconds since the epoch."""
        return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (must not be negative)."""
        if seconds < 0:
            raise ValueError("the fake clock cannot go backwards")
        self._now += seconds

    def reset(self) -> None:
        """Return to the starting time."""
        self._now = self._start


@dataclass(frozen=True)
class CacheFigures:
    """Token accounting for one request, independent of the API's field names."""

    prompt_tokens: int
    cache_read: int = 0
    cache_creation: int = 0

    @property
    def uncached(self) -> int:
        """Prompt tokens neither read from nor written to the cache."""
        return self.prompt_tokens - self.cache_read - self.cache_creation


@dataclass
class _Entry:
    tokens: int
    ttl: float
    expires_at: float


class PrefixStore:
    """Prefix hash -> cached length, expiring on the fake clock."""

    def __init__(self, clock: FakeClock) -> None:
        self._clock = clock
        self._entries: dict[str, _Entry] = {}

    def __len__(self) -> int:
        return sum(1 for key in self._entries if self.live(key) is not None)

    def clear(self) -> None:
        """Forget every entry."""
        self._entries.clear()

    def live(self, key: str) -> _Entry | None:
        """The entry for ``key`` if present and not expired."""
        entry = self._entries.get(key)
        if entry is None or entry.expires_at <= self._clock.now():
            return None
        return entry

    def refresh(self, key: str) -> None:
        """Extend a live entry to a full TTL from now (a cache hit)."""
        entry = self.live(key)
        if entry is not None:
            entry.expires_at = self._clock.now() + entry.ttl

    def put(self, key: str, tokens: int, ttl: float) -> None:
        """Store or refresh an entry; never shortens a longer-lived one."""
        entry = self.live(key)
        ttl = max(ttl, entry.ttl) if entry else ttl
        self._entries[key] = _Entry(tokens, ttl, self._clock.now() + ttl)

    def longest_hit(self, keys: Sequence[str]) -> int | None:
        """Index of the last key in ``keys`` with a live entry, if any."""
        for index in range(len(keys) - 1, -1, -1):
            if self.live(keys[index]) is not None:
                return index
        return None


def prefix_hashes(seed: str, blocks: Sequence[PromptBlock]) -> list[str]:
    """Cumulative hash at every block boundary (index i covers blocks[0..i])."""
    digest = hashlib.sha256(seed.encode())
    hashes: list[str] = []
    for block in blocks:
        digest.update(block.identity.encode() + b"\x00")
        hashes.append(digest.copy().hexdigest())
    return hashes


def prefix_lengths(blocks: Sequence[PromptBlock]) -> list[int]:
    """Cumulative token count at every block boundary."""
    return list(itertools.accumulate(block.tokens for block in blocks))


def marker_ttl(marker: Mapping[str, Any]) -> float:
    """TTL in seconds for a ``cache_control`` marker ("5m" default, "1h")."""
    ttl = str(marker.get("ttl", "5m"))
    units = {"s": 1.0, "m": 60.0, "h": 3600.0}
    try:
        return float(ttl[:-1]) * units[ttl[-1]]
    except (KeyError, ValueError, IndexError):
        return FIVE_MINUTES


class AnthropicCache:
    """Explicit breakpoint caching (see the module docstring for the rules)."""

    def __init__(self, store: PrefixStore) -> None:
        self._store = store
        self.min_cacheable_tokens = 0

    def account(self, model: str, blocks: Sequence[PromptBlock]) -> CacheFigures:
        """Compute read/creation for one request and record its writes."""
        total = total_tokens(blocks)
        marks = [index for index, block in enumerate(blocks) if block.is_breakpoint]
        if not marks:
            return CacheFigures(total)
        hashes = prefix_hashes(f"anthropic:{model}", blocks)
        lengths = prefix_lengths(blocks)
        last = marks[-1]
        hit = self._store.longest_hit(hashes[: last + 1])
        read = 0 if hit is None else lengths[hit]
        if hit is not None:
            self._store.refresh(hashes[hit])
        creation = lengths[last] - read if lengths[last] >= self.min_cacheable_tokens else 0
        self._write(marks, blocks, hashes, lengths)
        return CacheFigures(total, read, creation)

    def _write(
        self, marks: Sequence[int], blocks: Sequence[PromptBlock], hashes: Sequence[str], lengths: Sequence[int]
    ) -> None:
        for index in marks:
            if lengths[index] < self.min_cacheable_tokens:
                continue
            marker = blocks[index].cache_control or {}
            self._store.put(hashes[index], lengths[index], marker_ttl(marker))


class OpenAICache:
    """Automatic prefix caching: every request registers all its prefixes."""

    def __init__(self, store: PrefixStore) -> None:
        self._store = store
        self.ttl = FIVE_MINUTES
        self.min_cacheable_tokens = 0

    def account(self, model: str, blocks: Sequence[PromptBlock]) -> CacheFigures:
        """Compute ``cached_tokens`` for one request and register its prefixes."""
        hashes = prefix_hashes(f"openai:{model}", blocks)
        lengths = prefix_lengths(blocks)
        hit = self._store.longest_hit(hashes)
        cached = 0 if hit is None else lengths[hit]
        if cached < self.min_cacheable_tokens:
            cached = 0
        for key, length in zip(hashes, lengths):
            self._store.put(key, length, self.ttl)
        return CacheFigures(total_tokens(blocks), cache_read=cached)

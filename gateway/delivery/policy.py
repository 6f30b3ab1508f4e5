"""What every chunk's delivery follows: the retry policy, and the ids a chunk keeps across attempts and restarts."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from storage import OutboxRecord

PROGRESS_PREFIX = "progress:"
"""A tool-progress message's outbox turn id is this before its turn's (``gateway/delivery/progress.py``)."""
ALERT_PREFIX = "alert:"
"""An operator alert's outbox turn id starts with this (``gateway/operations/alerts/destinations.py``)."""


@dataclass(frozen=True, slots=True)
class DeliveryPolicy:
    max_attempts: int = 6
    """Attempts per chunk for retryable failures (rate limits, network hiccups)."""
    base_delay: float = 1.0
    max_delay: float = 30.0
    max_retry_after: float = 300.0
    """A longer retry_after than this is not waited out in the sending task: the chunk is deferred
    like one that ran out of attempts, and a later retry of its chat honours the wait."""
    keep_trying: float = 24 * 3600.0
    """A chunk still failing for a retryable reason (an outage, rate limits) after ``max_attempts``
    stays pending this long after it was recorded: :meth:`Delivery.retry_stalled` tries its chat
    again later, and later replies to that chat wait behind it. Older, it is given up."""


def chunk_nonce(record: OutboxRecord) -> str:
    """The chunk's idempotency key: the same for every attempt and restart, 24 hex characters.

    Derived from the outbox row's unique key (turn and chunk index), not its row id, so it does not
    repeat for a different chunk after the database is recreated; short enough for Discord's nonce.
    """
    return nonce_for(record.turn_id, record.chunk_index)


def nonce_for(key: str, index: int) -> str:
    """The idempotency key of chunk ``index`` of the message keyed ``key`` (24 hex characters)."""
    return hashlib.sha256(f"{key}\x00{index}".encode()).hexdigest()[:24]

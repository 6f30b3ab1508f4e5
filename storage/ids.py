"""Session ids: 26 characters that sort by creation time.

The layout is the ULID one: 48 bits of milliseconds since the epoch, then 80
random bits, in Crockford's base32 (no I, L, O or U). Ids made in the same
millisecond by one process keep their order because the random part is
incremented instead of redrawn.
"""

from __future__ import annotations

import secrets
import threading
import time
from typing import Final

__all__ = ["new_session_id"]

_ALPHABET: Final = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_RANDOM_BITS: Final = 80
_RANDOM_LIMIT: Final = 1 << _RANDOM_BITS


class _Monotonic:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._last_ms = -1
        self._last_random = 0

    def next(self, now_ms: int) -> tuple[int, int]:
        with self._lock:
            if now_ms <= self._last_ms:
                now_ms = self._last_ms
                self._last_random += 1
                if self._last_random >= _RANDOM_LIMIT:
                    now_ms += 1
                    self._last_random = secrets.randbits(_RANDOM_BITS - 1)
            else:
                self._last_random = secrets.randbits(_RANDOM_BITS - 1)
            self._last_ms = now_ms
            return now_ms, self._last_random


_generator = _Monotonic()


def _encode(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        value, digit = divmod(value, 32)
        chars.append(_ALPHABET[digit])
    return "".join(reversed(chars))


def new_session_id(now: float | None = None) -> str:
    """A new id; ``now`` (seconds) defaults to the wall clock."""
    now_ms = int((time.time() if now is None else now) * 1000)
    ms, random_part = _generator.next(now_ms)
    return _encode(ms, 10) + _encode(random_part, 16)

"""The storage package's logger. Events are named ``storage.<what>`` with key=value fields.

``warn_at_most_once_a_minute`` is for the background loops (checkpoints, index merging, the word
index) that fail the same way every round while the disk is full or the file cannot be written:
one line a minute, with how many were left out, instead of several a second.
"""

from __future__ import annotations

import threading
import time
from typing import Any, Final

import structlog

__all__ = ["log", "warn_at_most_once_a_minute"]

log = structlog.get_logger("storage")

REPEAT_EVERY: Final = 60.0
_last: dict[str, tuple[float, int]] = {}
"""Event name -> (when it was last written, how many were left out since)."""
_guard = threading.Lock()  # the writer's thread and the event loop both log


def warn_at_most_once_a_minute(event: str, **fields: Any) -> None:
    """``log.warning(event, ...)``, unless the same event was written less than a minute ago."""
    now = time.monotonic()
    with _guard:
        written_at, left_out = _last.get(event, (None, 0))
        if written_at is not None and now - written_at < REPEAT_EVERY:
            _last[event] = (written_at, left_out + 1)
            return
        _last[event] = (now, 0)
    log.warning(event, **fields, **({"repeated": left_out} if left_out else {}))

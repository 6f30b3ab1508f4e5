"""Recently used session histories, kept in memory so a turn does not re-read them.

The gateway loads a session's whole history at the start of every turn. Rows
never change once written (see ``storage/schema.py``), so a cached history
stays right as long as nothing was appended behind the cache's back. The store
checks that on every load with one cheap probe (message count and last
``seq``), reads only the missing tail when another process appended, and
falls back to a full read when the numbers do not add up.

Records are frozen, so callers get a fresh list that shares the cached records.
The bound is in bytes (the text a record holds, plus a fixed share for the
object itself), not messages: a tool's output can be a hundred times the size
of a chat line.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from storage.records import MessageRecord

__all__ = ["HistoryCache"]


RECORD_OVERHEAD = 300
"""Bytes a cached record costs besides its text (the record, its strings' headers, the list slot)."""
MEDIA_PART_SIZE = 1000
"""Bytes one media reference costs (a dict of about a dozen short fields)."""


def record_size(record: MessageRecord) -> int:
    """Roughly what ``record`` holds in memory, in bytes."""
    size = RECORD_OVERHEAD + len(record.content)
    if record.reasoning:
        size += len(record.reasoning)
    for call in record.tool_calls:
        size += RECORD_OVERHEAD + len(call.arguments)
    size += MEDIA_PART_SIZE * len(record.media)
    return size


class HistoryCache:
    """An LRU of histories bounded by their total size in bytes (see :func:`record_size`)."""

    def __init__(self, max_bytes: int) -> None:
        self._max = max_bytes
        self._entries: OrderedDict[str, list[MessageRecord]] = OrderedDict()
        self._sizes: dict[str, int] = {}
        self._size = 0

    def get(self, session_id: str) -> list[MessageRecord] | None:
        """A copy of the cached history (the records themselves are shared; they are frozen)."""
        entry = self._entries.get(session_id)
        if entry is None:
            return None
        self._entries.move_to_end(session_id)
        return list(entry)

    def put(self, session_id: str, records: Sequence[MessageRecord]) -> None:
        self.discard(session_id)
        size = sum(map(record_size, records))
        if self._max <= 0 or size > self._max:
            return
        self._entries[session_id] = list(records)
        self._sizes[session_id] = size
        self._size += size
        self._evict()

    def extend(self, session_id: str, records: Sequence[MessageRecord]) -> None:
        """Add newly committed records; drops the entry if they do not follow on."""
        entry = self._entries.get(session_id)
        if entry is None or not records:
            return
        expected = entry[-1].seq + 1 if entry else 1
        if records[0].seq != expected:
            self.discard(session_id)
            return
        entry.extend(records)
        size = sum(map(record_size, records))
        self._sizes[session_id] += size
        self._size += size
        self._entries.move_to_end(session_id)
        self._evict()

    def discard(self, session_id: str) -> None:
        if self._entries.pop(session_id, None) is not None:
            self._size -= self._sizes.pop(session_id)

    def clear(self) -> None:
        self._entries.clear()
        self._sizes.clear()
        self._size = 0

    def _evict(self) -> None:
        while self._size > self._max and self._entries:
            session_id, _ = self._entries.popitem(last=False)
            self._size -= self._sizes.pop(session_id)

"""Recently used session histories, kept in memory so a turn does not re-read them.

The gateway loads a session's whole history at the start of every turn. Rows
never change once written (see ``storage/schema.py``), so a cached history
stays right as long as nothing was appended behind the cache's back. The store
checks that on every load with one cheap probe (message count and last
``seq``), reads only the missing tail when another process appended, and
falls back to a full read when the numbers do not add up.

Records are frozen, so callers get a fresh list that shares the cached records.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

from storage.records import MessageRecord

__all__ = ["HistoryCache"]


class HistoryCache:
    """An LRU of histories bounded by their total number of messages."""

    def __init__(self, max_messages: int) -> None:
        self._max = max_messages
        self._entries: OrderedDict[str, list[MessageRecord]] = OrderedDict()
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
        if self._max <= 0 or len(records) > self._max:
            return
        self._entries[session_id] = list(records)
        self._size += len(records)
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
        self._size += len(records)
        self._entries.move_to_end(session_id)
        self._evict()

    def discard(self, session_id: str) -> None:
        entry = self._entries.pop(session_id, None)
        if entry is not None:
            self._size -= len(entry)

    def clear(self) -> None:
        self._entries.clear()
        self._size = 0

    def _evict(self) -> None:
        while self._size > self._max and self._entries:
            _, entry = self._entries.popitem(last=False)
            self._size -= len(entry)

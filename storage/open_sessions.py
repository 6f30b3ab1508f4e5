"""The open session of each routing key, kept in memory so a turn does not read it back every time.

The gateway asks for the open session of a key at the start of every turn. Within one
process every change to a session goes through the store, so the store keeps its answer
current as it writes: a new session is remembered, an ended or split one forgotten, appends
move ``message_count`` and usage moves the counters.

Changes made by another process:

* the writer notices at its next transaction that another connection committed
  (``PRAGMA data_version``) and counts it; the store then drops the whole map;
* an entry is read again once it was last read from the database more than
  ``max_age`` seconds ago, which bounds how long an idle process (no transaction
  of its own to notice with) can miss such a change.

A read that overlapped a change of this process is not remembered (a generation
count moves on every change), so a stale answer never replaces a fresh one.
The read this saves is a reader thread's hop and a query on every turn, and
the event loop's share of both.
"""

from __future__ import annotations

import dataclasses
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

from storage.records import SessionRecord
from storage.sessions import Usage

__all__ = ["OpenSessions"]


class OpenSessions:
    """Routing key -> its open ``SessionRecord``, least recently used first; bounded."""

    def __init__(
        self, *, max_entries: int = 10_000, max_age: float = 30.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._max_entries = max_entries
        self._max_age = max_age
        self._clock = clock
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self._keys: dict[str, str] = {}  # session id -> routing key, for the entries held
        self._generation = 0
        self._external_seen = 0

    @property
    def generation(self) -> int:
        """Moves on every change; take it before a read and hand it to :meth:`remember` after."""
        return self._generation

    def sync(self, external_commits: int) -> None:
        """Drop everything if another process committed since the last call (the writer's count)."""
        if external_commits != self._external_seen:
            self._external_seen = external_commits
            self.clear()

    def get(self, session_key: str) -> SessionRecord | None:
        """The open session of ``session_key`` if known and fresh enough, else None (read it)."""
        entry = self._entries.get(session_key)
        if entry is None:
            return None
        if self._clock() - entry.read_at > self._max_age:
            self._drop(session_key)
            return None
        self._entries.move_to_end(session_key)
        return entry.current()

    def remember(self, record: SessionRecord, *, generation: int) -> None:
        """Keep what a read returned, unless something changed since ``generation`` was taken."""
        if generation == self._generation and record.is_open:
            self._put(record)

    def written(self, record: SessionRecord) -> None:
        """This process just committed ``record`` (a new session, a lineage child): it is the key's open one."""
        self._generation += 1
        if record.is_open:
            self._put(record)

    def update(self, session_id: str, **changes: Any) -> None:
        """This process committed new values for some fields of ``session_id``."""
        self._generation += 1
        key = self._keys.get(session_id)
        if key is not None:
            self._entries[key].changes.update(changes)

    def add_usage(self, session_id: str, usage: Usage) -> None:
        """This process committed one model call's usage for ``session_id``."""
        key = self._keys.get(session_id)
        if key is None:
            self._generation += 1
            return
        value = self._entries[key].value
        self.update(
            session_id,
            input_tokens=value("input_tokens") + usage.input_tokens,
            output_tokens=value("output_tokens") + usage.output_tokens,
            cache_read_tokens=value("cache_read_tokens") + usage.cache_read_tokens,
            cache_write_tokens=value("cache_write_tokens") + usage.cache_write_tokens,
            last_prompt_tokens=usage.last_prompt_tokens,
            cost_usd=value("cost_usd") + usage.cost_usd,
        )

    def forget(self, session_id: str) -> None:
        """``session_id`` ended, or changed in a way not tracked here: read it again next time."""
        self._generation += 1
        key = self._keys.get(session_id)
        if key is not None:
            self._drop(key)

    def clear(self) -> None:
        self._generation += 1
        self._entries.clear()
        self._keys.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def _put(self, record: SessionRecord) -> None:
        self._drop(record.session_key)
        self._entries[record.session_key] = _Entry(record, self._clock())
        self._keys[record.id] = record.session_key
        while len(self._entries) > self._max_entries:
            _, old = self._entries.popitem(last=False)
            self._keys.pop(old.record.id, None)

    def _drop(self, session_key: str) -> None:
        entry = self._entries.pop(session_key, None)
        if entry is not None:
            self._keys.pop(entry.record.id, None)


class _Entry:
    """A record as last read or written, the changes since (applied when asked: a turn makes three or
    four, and a frozen record's copy costs more than the rest of the bookkeeping), and when it was read."""

    __slots__ = ("changes", "read_at", "record")

    def __init__(self, record: SessionRecord, read_at: float) -> None:
        self.record = record
        self.read_at = read_at
        self.changes: dict[str, Any] = {}

    def value(self, field: str) -> Any:
        return self.changes[field] if field in self.changes else getattr(self.record, field)

    def current(self) -> SessionRecord:
        if self.changes:
            record, changes = self.record, self.changes
            # Positional construction: ``dataclasses.replace`` costs more than twice as much per turn.
            self.record = SessionRecord(*[changes[f] if f in changes else getattr(record, f) for f in _FIELDS])
            self.changes = {}
        return self.record


_FIELDS: Final = tuple(f.name for f in dataclasses.fields(SessionRecord))
assert all(f.init for f in dataclasses.fields(SessionRecord)), "every SessionRecord field is passed positionally"

"""Writes that many callers queue at once, applied together in one statement.

The writer (``storage/engine/writer.py``) commits whatever is queued as one
transaction. Most of the gateway's writes are small and of a few kinds (accept
an inbound event, queue a reply's chunks, mark them sent, mark the event done,
count a model call's usage), and a batch holds dozens of each. Run one by one,
each is one or two statements, and every statement is a trip out of Python into
SQLite and back: the writer's thread gives up the GIL for it and then has to
win it back from the event loop. Applied together, a kind costs a couple of
statements per batch instead of per item. A
:class:`BulkWrite` names its *kind* (a
function that applies a list of items in a couple of statements, over a JSON
array read with ``json_each``) and one caller's *item*; the writer hands every
item of a kind in the batch to that function at once.

A kind returns one result per item, in order; an item that failed gets the
exception instance as its result and its neighbours are unaffected. What a
kind reads back comes as one row (``json_group_array``), not a row per item:
the sqlite3 module gives up and retakes the GIL for every row it steps through. SQLite's
JSON functions cut a string at a NUL character, so a batch whose values hold
one goes through the kind's row-at-a-time path instead. What the JSON paths buy
shows in ``bench.gateway``'s turns per second and event-loop CPU per turn
(``bench.storage`` runs none of these writes).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

__all__ = ["PAIRS_IN", "BulkKind", "BulkWrite", "first_hits", "json_rows", "json_result"]

BulkKind = Callable[[sqlite3.Connection, Sequence[Any], float], list[Any]]
"""``kind(conn, items, now)``: apply the items in queue order; one result (or exception instance) per item."""


@dataclass(frozen=True, slots=True)
class BulkWrite:
    """One caller's part of a write of ``kind``."""

    kind: BulkKind
    item: Any


def json_rows(rows: Sequence[Sequence[Any]]) -> str | None:
    """The rows as one JSON array for ``json_each``, or None when a string in them holds a NUL character."""
    payload = json.dumps(rows, ensure_ascii=False)
    return None if "\\u0000" in payload else payload


PAIRS_IN: Final = "(SELECT j.value->>0, j.value->>1 FROM json_each(?) AS j)"
"""The first two values of each item of a JSON array parameter, for ``(a, b) IN ...``."""


def first_hits(keys: Sequence[Any], hit: set[Any]) -> list[bool]:
    """Per key: whether it is in ``hit`` (what the write will change); a key repeated in the batch counts for
    its first item only (the later ones find it already done, as they would one at a time)."""
    seen: set[Any] = set()
    results = []
    for key in keys:
        results.append(key in hit and key not in seen)
        seen.add(key)
    return results


def json_result(conn: sqlite3.Connection, sql: str, parameters: Sequence[Any]) -> list[Any]:
    """Run a query whose one row holds a ``json_group_array(...)``; returns that array."""
    row = conn.execute(sql, parameters).fetchone()
    return json.loads(row[0]) if row and row[0] else []

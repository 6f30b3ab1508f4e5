"""Applying one batch of the writer's jobs on its connection, in the writer's thread.

``apply_batch`` runs a batch inside the transaction the writer opened: the
appends together (one statement), each kind of bulk write together, the rest
one by one. ``append_batch_alone`` writes a batch of nothing but plain appends
as one statement with no transaction around it, when it can. Both return one
``Outcome`` per operation, in order; the writer hands them back to the callers.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from storage.engine.bulk import BulkWrite
from storage.messages import AppendRequest, Sequences, append_alone, insert_appends
from storage.sessions import add_usage_all

__all__ = ["Operation", "Outcome", "append_batch_alone", "apply_batch"]

Operation: TypeAlias = Callable[[sqlite3.Connection], Any] | AppendRequest | BulkWrite
"""One job of a batch: a write operation (a function of the connection), an append, or a bulk write item."""


@dataclass(slots=True)
class Outcome:
    """What one operation of a batch returned, or the error it alone failed with."""

    value: Any = None
    error: BaseException | None = None


def apply_batch(
    conn: sqlite3.Connection, ops: Sequence[Operation], now: float, known: Sequences
) -> list[Outcome]:
    """Apply a batch in one transaction: the appends together, each kind of bulk write together, the rest one by one.

    A group runs at the place of its first member: operations queued before that run before it.
    Members queued later join it, ahead of operations queued between them; those come from callers
    that were all waiting at once, so none depends on another's write (a caller that awaits its
    write sees it committed first). All messages in one statement are one new full-text index
    segment per transaction: at the gateway's mix of writes, runs of consecutive appends are mostly
    one message long, and a segment per run would leave the writer that much more merging.
    """
    known.refresh(conn)
    outcomes: list[Outcome | None] = [None] * len(ops)
    groups: dict[Any, list[int]] = {}
    for index, op in enumerate(ops):
        if isinstance(op, AppendRequest):
            groups.setdefault(AppendRequest, []).append(index)
        elif isinstance(op, BulkWrite):
            groups.setdefault(op.kind, []).append(index)
    leaders = {members[0]: key for key, members in groups.items()}
    for index, op in enumerate(ops):
        key = leaders.get(index)
        if key is not None:
            members = groups[key]
            if key is AppendRequest:
                results: list[Any] = _apply_appends(conn, [ops[i] for i in members], now, known)  # type: ignore[misc]
            else:
                results = key(conn, [ops[i].item for i in members], now)  # type: ignore[union-attr]
            for member, result in zip(members, results, strict=True):
                outcomes[member] = Outcome(error=result) if isinstance(result, BaseException) else Outcome(result)
        elif outcomes[index] is None:
            outcomes[index] = Outcome(op(conn))  # type: ignore[operator]
            known.last_id = None  # it may have added messages (a lineage split does): read the last id again
    return outcomes  # type: ignore[return-value]


def append_batch_alone(
    conn: sqlite3.Connection, ops: Sequence[Operation], now: float, known: Sequences
) -> list[Outcome] | None:
    """A batch of nothing but plain appends (no usage, no riding write) as one statement, without a
    transaction of its own (``storage.messages.append_alone``); None if it must take a transaction.
    It saves the ``BEGIN`` and the ``COMMIT``, each a trip out of SQLite that must win the GIL back.
    """
    for op in ops:
        if not isinstance(op, AppendRequest) or op.usage is not None or op.then is not None:
            return None
    try:
        results = append_alone(conn, ops, now, known)  # type: ignore[arg-type]
    except sqlite3.IntegrityError:  # another connection appended meanwhile: nothing was written
        known.forget()
        return None
    return None if results is None else [Outcome(result) for result in results]


def _apply_appends(
    conn: sqlite3.Connection, requests: list[AppendRequest], now: float, known: Sequences
) -> list[Any]:
    """Every append of a batch, then what rides on the ones that went in: usage, and ``then`` writes."""
    results: list[Any] = insert_appends(conn, requests, now, known)
    stored = [i for i, result in enumerate(results) if not isinstance(result, BaseException)]
    usage = [(requests[i].session_id, requests[i].usage) for i in stored if requests[i].usage is not None]
    if usage:
        add_usage_all(conn, usage, now, sessions_exist=True)  # their messages were just inserted
    followers: dict[Any, list[int]] = {}
    for i in stored:
        then = requests[i].then
        if then is not None:
            followers.setdefault(then.kind, []).append(i)
    for kind, positions in followers.items():
        items = [requests[i].then.item for i in positions]  # type: ignore[union-attr]
        for i, outcome in zip(positions, kind(conn, items, now), strict=True):
            results[i] = (results[i], outcome)
    return results

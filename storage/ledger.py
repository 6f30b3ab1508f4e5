"""The end of a turn, written in one transaction: :meth:`storage.store.Store.finish_turn`.

A turn ends with one commit that holds everything the turn decided:

* the final messages (the answer as the model wrote it) and the usage of the model call
  that produced them;
* the reply's chunks in the outbox, from where delivery sends them;
* the inbound events the reply answers, marked done.

All of it goes in, or none of it: a crash or a failing database leaves either the finished
turn (its reply queued, its events done) or the turn as it was before (the events still
unfinished, so the turn runs again). The write takes the same path as an append: the
messages are the append, and the outbox rows with the inbox marks ride on it
(``AppendRequest.then``), so the writer's group commit batches it with every other write
and ending a turn costs no transaction of its own. A turn with no message to store (a
replayed answer, an apology) is one item of the outbox's bulk kind, batched the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from storage import outbox
from storage.engine.bulk import BulkWrite
from storage.messages import AppendRequest, MessageAppend, prepare_append
from storage.records import OutboxChunk, OutboxRecord

__all__ = ["TurnEnd", "plan", "queued_rows"]


@dataclass(frozen=True, slots=True)
class TurnEnd:
    """What one turn leaves behind; :meth:`Store.finish_turn` writes it in one transaction."""

    turn_id: str
    """The reply's outbox key: the same turn finished again (a replay) gets the rows it queued before."""
    platform: str
    chat_id: str
    thread_id: str | None
    chunks: Sequence[OutboxChunk]
    """The reply, rendered and cut for the platform, in order (none for a blank reply)."""
    answered: Sequence[tuple[str, str]] = ()
    """The inbound events ``(platform, event_id)`` the reply answers: marked done with it."""
    messages: MessageAppend | None = None
    """The turn's final messages and their call's usage, when they are not stored yet."""


def plan(end: TurnEnd) -> AppendRequest | BulkWrite:
    """The writer's job for ``end``: an append carrying the outbox write, or the outbox write alone."""
    reply = BulkWrite(
        outbox.add_all, (end.turn_id, end.platform, end.chat_id, end.thread_id, tuple(end.chunks), tuple(end.answered))
    )
    final = end.messages
    if final is None:
        return reply
    if not final.messages:
        raise ValueError("a turn's final messages, when given, hold at least one message")
    return prepare_append(final.session_id, final.messages, final.usage, then=reply)


async def queued_rows(appended: asyncio.Future[Any]) -> list[OutboxRecord]:
    """The outbox rows of a turn written as an append (the append is queued already)."""
    _, rows = await appended
    if isinstance(rows, BaseException):
        raise rows
    return rows  # type: ignore[no-any-return]

"""The inbound ledger: the one place that decides an accepted inbound event is done.

The intake records every event in the durable inbox before the platform is acknowledged;
it stays unfinished, and a restart routes it again, until it is settled here, exactly one way:

* ``answered``: a turn's reply answers it;
* ``command``: it was a command, and was handled (its answer, if any, goes with it);
* ``ignored``: not for the bot, with the reason (a bot, no mention, outside the allowlists,
  another bot's command, an unknown user, who may get a pairing code);
* ``stopped``: its turn was stopped (``/stop``, ``/new``, or a newer message with ``busy: interrupt``);
* ``given_up``: it cannot be answered: its turn kept breaking (the apology answers it), or
  the stored event no longer reads as a message;
* ``too_old``: it was read back after a reconnect (``gateway/inbound/catch_up.py``) but sent too
  long ago to answer now (its chat gets one note about such messages, or nothing).

An outcome that comes with a reply is one commit (:meth:`storage.Store.finish_turn`): the
reply's chunks in the outbox, the turn's final messages and usage, and the events marked
done, all or nothing; from then on the outbox owns the reply and delivery sends it
(``Delivery.deliver`` with the rows :meth:`InboundLedger.settle` returns). Without a
reply the events are just marked done.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import structlog

from adapters.contract import InboundMessage
from gateway.delivery.outbox import Delivery
from gateway.operations.metrics import Metrics
from storage import InboxRecord, MessageAppend, OutboxRecord, StorageEngine, TurnEnd

log = structlog.get_logger("gateway.inbound")

Event = InboundMessage | tuple[str, str]
"""An inbound event: the message, or its ``(platform, event_id)`` when it no longer reads as one."""


class Outcome(enum.Enum):
    ANSWERED = "answered"
    COMMAND = "command"
    IGNORED = "ignored"
    STOPPED = "stopped"
    GIVEN_UP = "given_up"
    TOO_OLD = "too_old"


@dataclass(frozen=True, slots=True)
class Reply:
    """The message that settles events: what the bot says back, and where."""

    turn_id: str
    """Its outbox key: settling the same events again (a replay) finds the rows queued the first time."""
    text: str
    """Model Markdown, rendered for the platform by delivery."""
    chat_id: str
    thread_id: str | None = None
    reply_to: str | None = None
    final: MessageAppend | None = None
    """The turn's final messages (the answer and its call's usage), stored in the same commit."""

    @classmethod
    def to(cls, batch: Sequence[InboundMessage], turn_id: str, text: str, final: MessageAppend | None = None) -> Reply:
        """A reply in the chat of ``batch``, replying to its last message."""
        first = batch[0]
        return cls(turn_id, text, first.chat_id, first.thread_id, batch[-1].message_id, final)


class InboundLedger:
    def __init__(
        self, store: StorageEngine, delivery: Delivery, metrics: Metrics, *, fence: Callable[[], None] | None = None
    ) -> None:
        """``fence``: raises when this process may no longer settle events (a replica of a cluster whose
        incarnation expired: another one routes them now); called before every settlement."""
        self._store = store
        self._fence = fence
        self._delivery = delivery
        self._metrics = metrics

    async def settle(
        self, events: Sequence[Event], outcome: Outcome, *, reply: Reply | None = None
    ) -> list[OutboxRecord]:
        """Mark ``events`` done with ``outcome``, in one commit with ``reply`` when there is one.

        Returns the reply's outbox rows, for ``Delivery.deliver`` (none without a reply, or for
        a blank one); the reply goes to the platform of the first event.
        """
        keys = [_key(event) for event in events]
        if self._fence is not None:
            self._fence()
        if reply is None:
            await asyncio.gather(*(self._store.inbox_mark_done(p, e) for p, e in keys))
            rows: list[OutboxRecord] = []
        else:
            where = keys[0][0]
            end = TurnEnd(
                reply.turn_id, where, reply.chat_id, reply.thread_id,
                self._delivery.chunks(where, reply.text, reply_to=reply.reply_to), answered=keys, messages=reply.final,
            )  # fmt: skip
            rows = await self._store.finish_turn(end)
        for event_platform, event_id in keys:
            self._metrics.settled.inc(event_platform, outcome.value)
            log.debug("inbound.settled", outcome=outcome.value, platform=event_platform, event_id=event_id)
        return rows

    async def read_back(self, record: InboxRecord) -> InboundMessage | None:
        """A stored event as the message it was; one that no longer reads as one (stored by an older version that
        let a wrong type through) is logged and settled ``given_up`` (None), so it cannot hold up the rest."""
        try:
            return InboundMessage.from_dict(record.payload)
        except (KeyError, TypeError, ValueError) as error:
            log.warning("inbound.replay_rejected", platform=record.platform, event_id=record.event_id,
                        reason=f"{type(error).__name__}: {error}"[:300],
                        hint="this stored message is not answered; everything else is")  # fmt: skip
            await self.settle([(record.platform, record.event_id)], Outcome.GIVEN_UP)
            return None


def _key(event: Event) -> tuple[str, str]:
    return (event.platform, event.event_id) if isinstance(event, InboundMessage) else event

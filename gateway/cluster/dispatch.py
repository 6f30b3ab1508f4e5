"""Session dispatch in cluster mode: each conversation is routed and run by one replica at a time.

Any replica records an inbound event (intake step 1, ``gateway/inbound/intake.py``) and acknowledges
it. Everything after that - access, commands, pairing, the session's lane - happens on the replica
that holds the session's claim (``storage/cluster.py``), which routes the session's unfinished inbox
events in arrival order, as a restart's replay does. So a session has one lane in the whole cluster:
one turn at a time, ``busy: queue | interrupt`` and the debounce work as on one gateway, and a
command (``/stop``, ``/new``, ``/compress``) reaches the lane it acts on wherever it was received.

* **After recording**, the receiving replica routes the session's new events itself when it holds
  the claim or can take it; when another live replica holds it, it sends that replica an ``inbox``
  signal and leaves the event to it.
* **On a signal** the holder fetches the session's unfinished events and routes those it has not
  routed in this holding (a set of event keys, not an id watermark: ids may commit out of order).
  A replica signalled for a session it no longer holds tries to claim it.
* **Every scan** (``cluster.scan_every``): each held session whose lane went idle is released
  (the database refuses while events are unfinished: then what is left is routed), and what this
  replica kept in memory of it is dropped (the next holder may change it); every session
  with unfinished events and no claim - a dead replica's, or one whose signal was lost - is claimed
  and its events routed. There is no start-up replay in cluster mode: the scan does it.
* **Before the first event of a chat is routed in a holding**, the chat's older replies that nobody sends
  (a dead replica's chunks, freed by the reap that freed the claim) are queued for delivery here
  (:meth:`Delivery.resume`, which returns once it holds the chat): the turn routed next answers
  after them, as on one gateway after a restart. While another replica holds some of the chat's
  chunks (its scan took the freed chunks first, or it died and is not reaped yet), nothing of the
  chat is routed here: the next scan tries again, once they went out. A held session whose chat
  has a chunk deferred here (the platform kept refusing it) or still being resumed is not let go
  while its lane is idle: the next message of the chat is routed here and its reply waits behind
  that chunk, where a replica that took the session over would send it first.
* **When this replica's incarnation expires** every lane is cancelled (their events stay unfinished)
  and every claim forgotten: the claims went with the reap, and whichever replica claims the
  sessions next routes their events again.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import structlog

from adapters.contract import InboundMessage
from gateway.cluster.replica import Replica
from gateway.delivery.outbox import Delivery
from gateway.inbound.intake import Intake
from gateway.inbound.lanes import Lanes
from gateway.inbound.ledger import InboundLedger
from gateway.inbound.session_key import SessionKey
from gateway.keyed_locks import KeyedLocks
from gateway.operations.metrics import Metrics
from gateway.turn.conversations import Conversations
from gateway.tasks import TaskTracker
from storage import InboxRecord, StorageError

log = structlog.get_logger("gateway.cluster.dispatch")

SIGNAL = "inbox"
"""The signal a replica sends the holder of a session it recorded an event of (``{"key": session key}``)."""
CLAIM_TRIES = 3
"""Claim, or find the live holder, at most this often after recording (the holder may let go in between)."""


@dataclass
class _Holding:
    """A claim this replica holds, and the events it routed while holding it."""

    fence: int
    routed: set[tuple[str, str]] = field(default_factory=set)
    chats: set[tuple[str, str]] = field(default_factory=set)
    """(platform, chat id) of the events routed: their older replies were queued for delivery first."""


class SessionDispatch:
    def __init__(
        self,
        replica: Replica,
        *,
        intake: Intake,
        lanes: Lanes[InboundMessage],
        conversations: Conversations,
        ledger: InboundLedger,
        delivery: Delivery,
        tracker: TaskTracker,
        metrics: Metrics,
    ) -> None:
        self._cluster = replica.storage
        self._replica = replica
        self._intake = intake
        self._lanes = lanes
        self._conversations = conversations
        self._ledger = ledger
        self._delivery = delivery
        self._tracker = tracker
        self._metrics = metrics
        self._held: dict[str, _Holding] = {}
        self._locks: KeyedLocks[str] = KeyedLocks()
        self._holders_seen: dict[str, str] = {}
        """Session key -> holding incarnation, as the last scan listed the claims (to tell a takeover)."""
        self._closing = False

    def attach(self) -> None:
        """Take over routing from the intake and listen to the replica (before it starts)."""
        self._intake.dispatch_to(self.recorded)
        self._replica.on_signal(SIGNAL, self._signalled)
        self._replica.on_scan(self.scan)
        self._replica.on_expired(self.expired)
        self._replica.report("sessions_claimed", lambda: len(self._held))

    def close(self) -> None:
        """The gateway stops: take on no other session (those held are finished or left for the others)."""
        self._closing = True

    async def recorded(self, key: SessionKey) -> None:
        """An event of ``key`` was recorded here: route it here, or tell the replica holding the session."""
        session = str(key)
        try:
            for _ in range(CLAIM_TRIES):
                holder = await self._take(session, waited=False)
                if holder is None:
                    return
                if holder:
                    await self._replica.signal(SIGNAL, to=holder, key=session)
                    log.debug("cluster.dispatch.signalled", session_key=session, holder=holder)
                    return
        except StorageError as error:  # recorded and acknowledged already: the scan routes it later
            log.warning("cluster.dispatch.failed", session_key=session, error=str(error),
                        hint="the message is routed by the next scan of the cluster")  # fmt: skip

    async def scan(self) -> None:
        """Release idle sessions (routing what they still have), and claim the sessions nobody works on."""
        for session in list(self._held):
            await self._quietly(self._tend(session), session)
        if self._closing:
            return
        try:
            seen = self._holders_seen
            for session in await self._cluster.unclaimed_sessions():
                await self._quietly(self._take(session, waited=True, before=seen.get(session)), session)
            self._holders_seen = {claim.session_key: claim.holder for claim in await self._cluster.claims()}
        except StorageError as error:
            log.warning("cluster.dispatch.scan_failed", error=str(error), hint="tried again at the next scan")

    async def expired(self) -> None:
        """This replica's incarnation expired: its claims are gone (or going) with it; stop every lane."""
        dropped, self._held = len(self._held), {}
        self._holders_seen = {}
        lanes = await self._lanes.abandon()
        self._conversations.forget_all()
        log.warning("cluster.dispatch.dropped", sessions=dropped, lanes=lanes,
                    hint="the conversations go on on whichever replica claims them next")  # fmt: skip

    async def _signalled(self, payload: dict[str, Any]) -> None:
        session = payload.get("key")
        if payload.get("to") not in (None, self._replica.id) or not isinstance(session, str):
            return
        self._tracker.spawn(self._quietly(self._take(session, waited=True), session), name=f"dispatch:{session}")

    async def _take(self, session: str, *, waited: bool, before: str | None = None) -> str | None:
        """Route ``session``'s new events here, claiming it first if needed. None when routed here; else the live
        holder's incarnation ("" when none could be told: it let go meanwhile, try again)."""
        async with self._locks.hold(session):
            holding = self._held.get(session)
            if holding is None:
                if self._closing or not self._replica.alive():
                    return ""
                if before is None:
                    previous = await self._cluster.claim_holder(session)
                    before = previous.holder if previous is not None else None
                claim = await self._cluster.claim_session(session)
                if claim is None:
                    holder = await self._cluster.claim_holder(session)
                    return holder.holder if holder is not None and holder.holder != self._replica.id else ""
                holding = self._held[session] = _Holding(claim.fence)
                if before is not None and before != claim.holder:
                    self._metrics.cluster_claim_expiries.inc()
                    log.info("cluster.dispatch.taken_over", session_key=session, previous=before)
            await self._route_new(session, holding, waited=waited)
            return None

    async def _tend(self, session: str) -> None:
        """Let go of a held session whose lane is idle; one with events left (or still busy) gets them routed."""
        async with self._locks.hold(session):
            holding = self._held.get(session)
            if holding is None:
                return
            if not self._lanes.idle(session):
                return  # its turn's end brings it back here idle (a signal lost meanwhile is made up for then)
            held_back = any(self._delivery.holds_back(chat) for chat in holding.chats)  # kept: its next reply waits
            if not held_back and await self._cluster.release_session(session, holding.fence):
                del self._held[session]
                await self._conversations.forget(session)  # the next holder may change it: no stale copy here
                log.debug("cluster.dispatch.released", session_key=session)
                return
            await self._route_new(session, holding, waited=True)

    async def _route_new(self, session: str, holding: _Holding, *, waited: bool) -> None:
        """Route the session's unfinished events not routed in this holding yet, oldest first. ``waited``: they
        may have waited for the claim elsewhere (the wait is measured from when they were recorded)."""
        records = await self._cluster.unfinished_of(session)
        holding.routed &= {(record.platform, record.event_id) for record in records}  # the finished ones go
        now = time.time()
        for record in _new(records, holding.routed):
            if self._held.get(session) is not holding or not self._replica.alive():
                return  # the claim was lost meanwhile (this incarnation expired): its next holder routes the rest
            key = (record.platform, record.event_id)
            holding.routed.add(key)
            try:
                message = await self._ledger.read_back(record)
                if message is None:
                    continue
                if not await self._deliver_older(holding, (message.platform, message.chat_id)):
                    holding.routed.discard(key)  # the next scan (or signal) routes it, once the older replies are out
                    return
                if waited:  # received_at is the receiving replica's clock: hosts of a cluster keep theirs in sync (NTP)
                    self._metrics.cluster_claim_waits.observe(max(0.0, now - record.received_at))
                await self._intake.route(message)
            except Exception:
                holding.routed.discard(key)  # the next scan tries it again
                raise

    async def _deliver_older(self, holding: _Holding, chat: tuple[str, str]) -> bool:
        """Before the first event of ``chat`` is routed in this holding: queue the chat's replies nobody sends (a
        dead replica's, freed by its reap; its reap may be what gave this claim) ahead of the turn's reply. False
        while another replica holds some (its scan took them first, or it is dead and not reaped yet): route later."""
        if chat in holding.chats:
            return True
        # Mostly there are none: this replica's own pending chunks of the chat go out ahead of a new reply already.
        if await self._cluster.chunks_elsewhere(*chat):
            await self._delivery.resume(spawn=self._tracker.spawn, only={chat}, deferred=False)  # takes the free ones
            if await self._cluster.chunks_elsewhere(*chat):
                log.debug("cluster.dispatch.older_replies_elsewhere", platform=chat[0], chat=chat[1],
                          hint="routed once another replica sent the chat's older replies")  # fmt: skip
                return False
        holding.chats.add(chat)
        return True

    @staticmethod
    async def _quietly(step: Any, session: str) -> None:
        try:
            await step
        except Exception as error:  # noqa: BLE001 - one session's failure must not stop the scan; it runs again
            log.warning("cluster.dispatch.failed", session_key=session, error=f"{type(error).__name__}: {error}"[:300],
                        hint="tried again at the next scan")  # fmt: skip


def _new(records: Iterable[InboxRecord], routed: set[tuple[str, str]]) -> list[InboxRecord]:
    return [record for record in records if (record.platform, record.event_id) not in routed]

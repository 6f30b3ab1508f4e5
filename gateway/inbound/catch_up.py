"""Catching up after a reconnect: asking a platform for what was sent while its connection heard nothing.

An adapter whose connection was rebuilt in a way that may have lost events reports a gap
(``Adapter.on_gap``); the liveness monitor asks for a catch-up too once a connection it had
restarted after a failed probe runs again (``gateway/operations/liveness.py``). A catch-up:

1. lists the chats and threads of the platform with an open session, the most recently active
   first, at most :data:`MAX_POINTS`, each with the last message the inbox holds from there
   (``Store.last_heard``), as the adapter's :class:`~adapters.contract.CatchUpPoint`;
2. reads no further back than ``catch_up.max_age_hours``, nor before the oldest of those
   messages (or, where the inbox holds none any more, the session's start);
3. hands each message the adapter fetched to intake, the way a live one arrives: the inbox
   drops the ones it has, access control and lanes treat the others as usual;
4. a message sent more than ``catch_up.answer_within_minutes`` ago is stored but not answered
   by the model (an answer to a day-old question out of nowhere helps nobody): it is settled
   ``too_old``, and its chat (or thread) gets one note per catch-up, in the same commit, saying
   how many messages came too late and to send again what still matters
   (``catch_up.old_messages: note``), or nothing (``skip``).

The gateway also catches up once at start, on each platform whose adapter can, as soon as its
connection runs (:meth:`CatchUp.request_when_running`): Discord does not keep the messages sent
while the gateway was stopped, and Slack keeps them only a short while.

One catch-up per platform runs at a time; a gap reported during one queues one more run after
it (however many are reported). Each run is logged as ``adapter.catchup`` with what it found,
how many of those were new to the gateway and how many of the new were too old to answer; the
same figures go to ``switchboard_catchup_messages_total``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

import structlog

from adapters.contract import Adapter, AdapterState, CatchUpPoint, CatchUpWindow, ChatType, InboundMessage
from config.liveness import CatchUpConfig
from gateway.delivery.outbox import Delivery
from gateway.inbound.intake import Intake
from gateway.inbound.ledger import InboundLedger, Outcome, Reply
from gateway.operations.metrics import Metrics
from storage import LastHeard, StorageEngine

log = structlog.get_logger("gateway.catch_up")

__all__ = ["MAX_POINTS", "CatchUp", "CatchUpResult", "missed_note"]

MAX_POINTS: Final = 100
"""The most chats (threads) one catch-up reads: the most recently active ones."""

START_WAIT: Final = 600.0
"""Seconds the catch-up at start waits for a connection to run before it gives up (the next gap catches up)."""


def missed_note(count: int) -> str:
    """What a chat is told about ``count`` of its messages that reached the bot too late to answer."""
    if count == 1:
        return (
            "I was disconnected for a while, and one message sent here in that time reached me only now, "
            "too late for a useful answer. If it still matters, please send it again."
        )
    return (
        f"I was disconnected for a while, and {count} messages sent here in that time reached me only now, "
        "too late for a useful answer. If any of them still matter, please send them again."
    )


@dataclass(frozen=True, slots=True)
class CatchUpResult:
    points: int
    found: int
    """Messages the platform returned."""
    new: int
    """Of those, the ones the gateway had never received (the rest were dropped as duplicates)."""
    old: int
    """Of the new ones, those sent too long ago to answer."""


class CatchUp:
    def __init__(
        self,
        *,
        store: StorageEngine,
        adapters: Mapping[str, Adapter],
        intake: Intake,
        ledger: InboundLedger,
        delivery: Delivery,
        metrics: Metrics,
        settings: CatchUpConfig,
        clock: Callable[[], float],
    ) -> None:
        self._store = store
        self._adapters = adapters
        self._intake = intake
        self._ledger = ledger
        self._delivery = delivery
        self._metrics = metrics
        self._settings = settings
        self._clock = clock
        self._running: dict[str, asyncio.Task[None]] = {}
        self._again: dict[str, str] = {}
        """Platform -> the reason of a gap reported while its catch-up ran: one more run follows."""
        self._closed = False
        self._waiting: set[asyncio.Task[None]] = set()

    def can(self, platform: str) -> bool:
        """Whether ``platform``'s adapter reads history back (Telegram's need not: Telegram keeps what waits)."""
        adapter = self._adapters.get(platform)
        return adapter is not None and type(adapter).catch_up is not Adapter.catch_up

    def request_when_running(self, platform: str, reason: str, *, every: float = 0.5) -> None:
        """Catch up on ``platform`` once its adapter runs (at start its connection may still be coming up);
        nothing when it does not run within :data:`START_WAIT` seconds. Returns at once."""

        async def wait() -> None:
            adapter = self._adapters[platform]
            loop = asyncio.get_running_loop()
            deadline = loop.time() + START_WAIT
            while adapter.status().state is not AdapterState.RUNNING:
                if loop.time() >= deadline:
                    log.info("adapter.catchup_skipped", platform=platform, reason=reason,
                             why=f"not running within {START_WAIT:g} s; the next gap catches up")  # fmt: skip
                    return
                await asyncio.sleep(every)
            self.request(platform, reason)

        if self._settings.enabled and not self._closed and self.can(platform):
            task = asyncio.create_task(wait(), name=f"catch-up-wait:{platform}")
            self._waiting.add(task)
            task.add_done_callback(self._waiting.discard)

    def request(self, platform: str, reason: str) -> None:
        """Catch up on ``platform`` now, or once the run in progress there ends. Returns at once."""
        if not self._settings.enabled or self._closed or not self.can(platform):
            why = ("catch_up.enabled is off" if not self._settings.enabled else "stopping" if self._closed
                   else "the platform keeps what was not delivered" if platform in self._adapters else "not running")
            log.info("adapter.catchup_skipped", platform=platform, reason=reason, why=why)
            return
        if platform in self._running:
            self._again[platform] = reason
            log.info("adapter.catchup_queued", platform=platform, reason=reason)
            return
        self._running[platform] = asyncio.create_task(self._runs(platform, reason), name=f"catch-up:{platform}")

    def running(self, platform: str) -> bool:
        return platform in self._running

    async def close(self) -> None:
        """Stop every catch-up in progress (what it did not feed is fetched again after the next gap)."""
        self._closed = True
        tasks = [*self._waiting, *self._running.values()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def _runs(self, platform: str, reason: str) -> None:
        try:
            while True:
                try:
                    await self.run(platform, reason)
                except Exception as error:  # noqa: BLE001 - one failed catch-up must not end the next ones
                    log.warning("adapter.catchup_failed", platform=platform, reason=reason, error=str(error)[:300],
                                hint="the next gap or failed liveness probe tries again", exc_info=error)  # fmt: skip
                    self._metrics.errors.inc("catch_up")
                next_reason = self._again.pop(platform, None)
                if next_reason is None:
                    return
                reason = next_reason
        finally:
            self._running.pop(platform, None)

    async def points(self, platform: str, limit: int = MAX_POINTS) -> list[CatchUpPoint]:
        """The chats of ``platform`` with an open session, each with the last message stored from it."""
        return _points(await self._store.last_heard(platform, limit=limit))

    async def run(self, platform: str, reason: str) -> CatchUpResult:
        """One catch-up of ``platform`` (see the module's docstring). Raises what the adapter or storage raised."""
        adapter = self._adapters[platform]
        heard = await self._store.last_heard(platform, limit=MAX_POINTS)
        points = _points(heard)
        now = self._clock()
        since = now - self._settings.max_age_hours * 3600.0
        if heard:
            since = max(since, min(row.active_at for row in heard))
        window = CatchUpWindow(since=since, per_chat=self._settings.per_chat, total=self._settings.total)
        fetched = await adapter.catch_up(points, window) if points else []
        cutoff = now - self._settings.answer_within_minutes * 60.0
        found = new = old = 0
        missed: dict[tuple[str, str | None], list[InboundMessage]] = defaultdict(list)
        for message in fetched:
            if message.platform != platform:
                log.warning("adapter.catchup_rejected", platform=platform, event_id=message.event_id,
                            reason=f"a message of {message.platform!r}")  # fmt: skip
                continue
            found += 1
            if message.timestamp >= cutoff:
                new += await self._intake.accept(message)
                continue
            answerable = await self._intake.accept_unanswered(message)
            if answerable is None:
                continue
            new += 1
            old += 1
            if answerable:
                missed[(message.chat_id, message.thread_id)].append(message)
        for batch in missed.values():
            await self._settle_too_old(batch)
        for kind, count in (("found", found), ("new", new), ("old", old)):
            if count:
                self._metrics.catch_up.inc(platform, kind, amount=count)
        log.info("adapter.catchup", platform=platform, reason=reason, points=len(points), found=found, new=new, old=old,
                 since=round(since, 1))  # fmt: skip
        return CatchUpResult(len(points), found, new, old)

    async def _settle_too_old(self, batch: Sequence[InboundMessage]) -> None:
        """Settle one chat's (thread's) messages too old to answer, with the note when there is one: one commit,
        so a restart neither answers them nor sends the note twice (its outbox key is the newest message's)."""
        reply = None
        if self._settings.old_messages == "note":
            last = batch[-1]
            reply = Reply.to(batch, f"catch-up:{last.platform}:{last.event_id}", missed_note(len(batch)))
        await self._delivery.deliver(await self._ledger.settle(batch, Outcome.TOO_OLD, reply=reply))


def _points(rows: Sequence[LastHeard]) -> list[CatchUpPoint]:
    points = []
    for row in rows:
        try:
            chat_type = ChatType(row.chat_type)
        except ValueError:  # a session stored without a chat type (never by this version): no place to read
            log.warning("adapter.catchup_point_skipped", chat=row.chat_id, chat_type=row.chat_type)
            continue
        points.append(CatchUpPoint(row.chat_id, chat_type, row.thread_id, after=row.message_id, after_time=row.message_at))
    return points

"""Trying a turn again while the database lets it down, so that every message is still answered once, in order.

:class:`TurnRetry` is the lane's turn; it runs :meth:`gateway.turn.runner.TurnRunner.run` and, when that
fails:

* on a fault of the database itself (``storage.Fault``: locked by another process past the
  writer's own retries, a full disk, a file that cannot be written, an I/O error) it tries the
  turn again, pausing first half a second and then twice as long each time, up to
  ``gateway.database_retry_max_delay``, for as long as the gateway runs: the message was
  acknowledged to the platform, so its answer is still owed. Each try takes the path a restart
  takes (the turn finds what an earlier try stored), so the answer goes out exactly once.
  Meanwhile the lane waits: later messages of the chat queue behind the turn, and are answered
  after it. Once the turn has taken ``gateway.database_retry_notice_after`` seconds, the user gets
  one short notice, sent past the outbox (which cannot record it now);
* on a damaged file (SQLITE_CORRUPT) the same, except that the chat is told once, whichever turn
  meets it, that the bot cannot answer until its operator repairs the database: it does not heal
  while the gateway runs;
* on anything else (a bug in our own code) it tries :data:`BUG_TRIES` times in all, then sends the
  turn's apology (``TURN_FAILED_NOTICE``, with the ``turn=`` reference), which settles the
  messages as given up (``gateway/inbound/ledger.py``), as when the model part of a turn breaks.

Every fault goes to :class:`gateway.operations.database_health.DatabaseHealth` (/health, one log line a
minute). When the gateway stops, waiting turns stop waiting: they are answered on the next start.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Final

import structlog
from tenacity import RetryCallState, wait_exponential

from adapters.contract import InboundMessage
from gateway.operations.database_health import DatabaseHealth
from gateway.delivery.outbox import Delivery
from gateway.inbound.ledger import InboundLedger, Outcome, Reply
from gateway.operations.logs import bind, short_turn_id, turn_id_for
from gateway.operations.metrics import Metrics
from gateway.turn.runner import TURN_FAILED_NOTICE
from storage import Fault, StorageEngine, StorageError, fault_of
from storage.cluster import ReplicaExpiredError

log = structlog.get_logger("gateway.turn")

RunTurn = Callable[..., Awaitable[None]]
"""``run(lane, batch, retry=...)``: :meth:`gateway.turn.runner.TurnRunner.run`."""

BUG_TRIES: Final = 3
"""Tries of a turn that keeps failing on something other than the database, before the apology."""
FIRST_PAUSE: Final = 0.5
MAX_REMEMBERED_CHATS: Final = 10_000
DELAYED_NOTICE = (
    "I'm having trouble saving our conversation right now, so my answer is delayed. "
    "Your message is safe: I'll answer as soon as I can."
)
DAMAGED_NOTICE = (
    "Sorry, I can't answer right now: the database where I keep our conversations is damaged, "
    "and my operator has to repair it. Please try again later."
)


@dataclass(frozen=True, slots=True)
class TurnRetryPolicy:
    notice_after: float = 5.0
    """Seconds a turn the database let down may take before the user is told (once)."""
    max_pause: float = 60.0
    """The longest pause between two tries."""

    def pause(self, failures: int) -> float:
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # the formula reads the attempt only
        state.attempt_number = failures
        return wait_exponential(multiplier=FIRST_PAUSE, max=self.max_pause)(state)


class TurnRetry:
    def __init__(
        self,
        run_turn: RunTurn,
        *,
        store: StorageEngine,
        delivery: Delivery,
        ledger: InboundLedger,
        health: DatabaseHealth,
        metrics: Metrics,
        policy: TurnRetryPolicy = TurnRetryPolicy(),
    ) -> None:
        self._run_turn = run_turn
        self._metrics = metrics
        self._store = store
        self._delivery = delivery
        self._ledger = ledger
        self._health = health
        self._policy = policy
        self._stopping = asyncio.Event()
        self._told_damaged: OrderedDict[tuple[str, str], None] = OrderedDict()
        """Chats already told that the database is damaged (the most recent ones; bounded)."""

    def stop(self) -> None:
        """The gateway stops: turns waiting for the database stop waiting (the next start answers them)."""
        self._stopping.set()

    async def __call__(self, lane: str, batch: list[InboundMessage]) -> None:
        first = batch[0]
        turn_id = turn_id_for(first.platform, first.event_id)
        with bind(platform=first.platform, chat=first.chat_id, turn=short_turn_id(turn_id)):
            await self._run(lane, batch, turn_id)

    async def _run(self, lane: str, batch: list[InboundMessage], turn_id: str) -> None:
        started = time.monotonic()
        failures = bugs = 0
        told = waiting = False
        try:
            while True:
                try:
                    if bugs >= BUG_TRIES:
                        await self._apologise(batch, turn_id)
                    else:
                        await self._run_turn(lane, batch, retry=failures > 0)
                except asyncio.CancelledError:
                    raise
                except ReplicaExpiredError as error:  # cluster mode: another replica answers these messages now
                    log.warning("turn.abandoned", reason=str(error), hint="the replica holding the session answers it")
                    return
                except Exception as error:  # noqa: BLE001 - sorted below: the database's fault, or ours
                    failures += 1
                    fault = fault_of(error)
                    if fault is None:
                        bugs += 1
                        log.error("turn.crashed", error=f"{type(error).__name__}: {error}", attempt=bugs,
                                  of=BUG_TRIES, exc_info=error)  # fmt: skip
                        if bugs > BUG_TRIES:
                            log.error("turn.abandoned", hint="the message is answered on the next start")
                            return
                    else:
                        if not waiting:
                            waiting = True
                            self._health.waiting += 1
                            log.warning("turn.waiting", fault=fault.value, reason=fault.reason, error=str(error)[:300],
                                        hint="tried again while the gateway runs; later messages of the chat wait")  # fmt: skip
                        self._health.failed(fault, error)
                        self._metrics.turn_retries.inc(fault.value)
                        if fault is Fault.DAMAGED and not told:
                            await self._tell_damaged(batch[0])
                            told = True
                    notice_due = None if told or not waiting else started + self._policy.notice_after
                    go_on, sent = await self._pause(failures, notice_due, batch[0], turn_id)
                    told = told or sent
                    if not go_on:
                        return  # the gateway stops: the next start answers these messages
                    batch = await self._still_owed(batch)
                    if not batch:
                        return
                else:
                    if failures:
                        log.info("turn.recovered", tries=failures + 1, waited_s=round(time.monotonic() - started, 1))
                    self._health.recovered()
                    return
        finally:
            if waiting:
                self._health.waiting -= 1

    async def _pause(
        self, failures: int, notice_due: float | None, first: InboundMessage, turn_id: str
    ) -> tuple[bool, bool]:
        """Wait before the next try, sending the delay notice if it falls due meanwhile.

        Returns whether to go on (False: the gateway stops) and whether the notice went out.
        """
        resume_at = time.monotonic() + self._policy.pause(failures)
        sent = False
        while not self._stopping.is_set():
            now = time.monotonic()
            if notice_due is not None and now >= notice_due:
                notice_due, sent = None, True
                await self._delivery.send_unrecorded(
                    key=f"notice:delayed:{turn_id}", platform=first.platform, chat_id=first.chat_id,
                    thread_id=first.thread_id, text=DELAYED_NOTICE,
                )  # fmt: skip
                continue
            if now >= resume_at:
                return True, sent
            wake = resume_at if notice_due is None else min(resume_at, notice_due)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), timeout=wake - now)
        return False, sent

    async def _still_owed(self, batch: Sequence[InboundMessage]) -> list[InboundMessage]:
        """The messages of ``batch`` not answered yet (a try may have finished part of it)."""
        try:
            unfinished = {(r.platform, r.event_id) for r in await self._store.inbox_unfinished()}
        except StorageError:
            return list(batch)  # cannot tell: the turn finds out what it already did
        return [m for m in batch if (m.platform, m.event_id) in unfinished]

    async def _tell_damaged(self, first: InboundMessage) -> None:
        """Tell the chat, once whichever of its turns meets the damage, that it must wait for the operator."""
        chat = (first.platform, first.chat_id)
        if chat in self._told_damaged:
            return
        self._told_damaged[chat] = None
        if len(self._told_damaged) > MAX_REMEMBERED_CHATS:
            self._told_damaged.popitem(last=False)
        await self._delivery.send_unrecorded(
            key=f"notice:damaged:{first.platform}:{first.event_id}", platform=first.platform, chat_id=first.chat_id,
            thread_id=first.thread_id, text=DAMAGED_NOTICE,
        )  # fmt: skip

    async def _apologise(self, batch: Sequence[InboundMessage], turn_id: str) -> None:
        """The turn kept breaking on our side: the apology answers its messages (they are given up with it)."""
        reply = Reply.to(batch, turn_id, TURN_FAILED_NOTICE.format(ref=short_turn_id(turn_id)))
        await self._delivery.deliver(await self._ledger.settle(batch, Outcome.GIVEN_UP, reply=reply))

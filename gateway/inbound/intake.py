"""Intake: what happens to an inbound message before any turn runs.

In order, each step with a reason in the log:

1. the event is written to the durable inbox (a redelivered event is
   recognised here and skipped) - only then does the adapter acknowledge it;
2. the place: bots, unmentioned group messages, chats outside the
   allowlists and commands addressed to another bot (``/help@other_bot``) are ignored;
3. ``/whoami`` is answered for anyone, so a stranger can learn their ids;
4. the person: unknown users in DMs get a pairing code, elsewhere they are ignored;
5. other commands are answered at once, even while a turn runs;
6. everything else goes onto its session's lane.

Every way out of steps 2 - 5 settles the event (``gateway/inbound/ledger.py``): ignored,
or handled as a command; a queued message is settled by its turn. Messages accepted
before a restart but never settled go through steps 2 - 6 again, in arrival order, in
:meth:`Intake.replay` before new ones are let through. Messages read back after a reconnect
(``gateway/inbound/catch_up.py``) come in the same way; those sent too long ago to answer only
pass steps 1, 2 and 4 (:meth:`Intake.accept_unanswered`).

In cluster mode step 1 stays with the replica that received the event, and steps 2 - 6 run on the
replica holding the session's claim, in arrival order (``gateway/cluster/dispatch.py``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

import structlog

from adapters.contract import InboundMessage
from gateway.inbound.access import AccessControl, Decision, Verdict
from gateway.commands.handlers import CommandHandlers
from gateway.commands.parsing import Command, for_another_bot, parse_command
from gateway.delivery.outbox import Delivery
from gateway.inbound.ledger import InboundLedger, Outcome, Reply
from gateway.inbound.lanes import Lanes
from gateway.operations.logs import short_turn_id, turn_id_for
from gateway.operations.metrics import Metrics
from gateway.inbound.pairing import Pairing, pairing_message
from gateway.inbound.session_key import SessionKey, session_key_for
from gateway.tasks import TaskTracker
from storage import StorageEngine

log = structlog.get_logger("gateway.intake")

Dispatch = Callable[[SessionKey], Awaitable[None]]
"""Told the session of each message recorded (cluster mode): it routes the session's new messages, here or on
the replica holding the session's claim."""


class Intake:
    def __init__(
        self,
        *,
        store: StorageEngine,
        access: AccessControl,
        pairing: Pairing,
        lanes: Lanes[InboundMessage],
        commands: CommandHandlers,
        delivery: Delivery,
        ledger: InboundLedger,
        tracker: TaskTracker,
        metrics: Metrics,
        group_per_user: bool,
        bot_username: Callable[[str], str | None] = lambda platform: None,
        heard: Callable[[InboundMessage], None] = lambda message: None,
    ) -> None:
        """``heard``: told of every message an adapter hands over, before anything else (the liveness
        monitor's record of when each chat was last heard from)."""
        self._store = store
        self._access = access
        self._pairing = pairing
        self._lanes = lanes
        self._commands = commands
        self._delivery = delivery
        self._ledger = ledger
        self._tracker = tracker
        self._metrics = metrics
        self._group_per_user = group_per_user
        self._bot_username = bot_username
        self._heard = heard
        self._open = asyncio.Event()
        self._dispatch: Dispatch | None = None

    def dispatch_to(self, dispatch: Dispatch) -> None:
        """Cluster mode: hand each recorded message to ``dispatch`` (``gateway/cluster/dispatch.py``), which has
        steps 2 - 6 run by the replica holding the session's claim (:meth:`route`), instead of routing it here."""
        self._dispatch = dispatch

    def open(self) -> None:
        """Let new messages through to the lanes (after :meth:`replay`)."""
        self._open.set()

    async def replay(self, unfinished: Sequence[InboundMessage]) -> int:
        """Route events accepted before a restart but not finished, oldest first, the way new ones are.

        Access is checked again (with today's config and approvals) and commands
        are answered as commands: a message that was waiting for a pairing code
        or to be ignored when the process died never reaches the agent.
        """
        for message in unfinished:
            await self._route(message, session_key_for(message, group_per_user=self._group_per_user), replay=True)
        if unfinished:
            log.info("inbound.replayed", events=len(unfinished))
        return len(unfinished)

    async def __call__(self, message: InboundMessage) -> None:
        """Accept one message from an adapter. Returns once it is durably recorded (or refused)."""
        await self.accept(message)

    async def accept(self, message: InboundMessage) -> bool:
        """:meth:`__call__`, saying whether the message was new (False: seen before, skipped)."""
        key = session_key_for(message, group_per_user=self._group_per_user)
        if not await self._record(message, key):
            return False
        if self._dispatch is not None:
            await self._dispatch(key)
        else:
            await self._route(message, key, replay=False)
        return True

    async def route(self, message: InboundMessage, *, replay: bool = False) -> None:
        """Steps 2 to 6 for a message recorded before (by this replica or another one of the cluster)."""
        await self._route(message, session_key_for(message, group_per_user=self._group_per_user), replay=replay)

    async def accept_unanswered(self, message: InboundMessage) -> bool | None:
        """Record a message that is not to be answered (read back after a reconnect, sent too long ago): no
        turn, no command. None: seen before. False: it would have been ignored anyway (settled so here). True:
        it came from a place and a person the bot answers; the caller settles it (``too_old``), with a note
        to its chat if it likes (until then a restart would answer it, as any unsettled event)."""
        key = session_key_for(message, group_per_user=self._group_per_user)
        if not await self._record(message, key):
            return None
        fields = {"platform": message.platform, "chat": message.chat_id, "user": message.user_id, "event_id": message.event_id}
        place = self._access.where(message)
        person = await self._person(message) if place.allowed else place
        if not person.allowed:
            await self._ignore(message, person.reason, fields)
            return False
        log.info("inbound.too_old", session_key=str(key), sent_at=round(message.timestamp, 1), **fields)
        return True

    async def _record(self, message: InboundMessage, key: SessionKey) -> bool:
        """Step 1: the durable inbox; False (logged, counted) for an event recorded before."""
        self._heard(message)
        if await self._store.inbox_accept(message.platform, message.event_id, str(key), message.to_dict()):
            return True
        self._metrics.duplicates.inc(message.platform)
        log.info("inbound.duplicate", platform=message.platform, chat=message.chat_id, user=message.user_id,
                 event_id=message.event_id)  # fmt: skip
        return False

    async def _route(self, message: InboundMessage, key: SessionKey, *, replay: bool) -> None:
        """Steps 2 to 6 for a recorded message: ignore it, offer pairing, answer a command, or queue a turn."""
        fields = {"platform": message.platform, "chat": message.chat_id, "user": message.user_id, "event_id": message.event_id}
        place = self._access.where(message)
        if not place.allowed:
            await self._ignore(message, place.reason, fields)
            return
        bot_username = self._bot_username(message.platform)
        command = parse_command(message.text, bot_username=bot_username)
        if command is None and for_another_bot(message.text, bot_username=bot_username):
            await self._ignore(message, "a command addressed to another bot", fields)
            return
        if command is not None and command.name == "whoami":
            self._spawn_command(command, message, key)
            return
        person = await self._person(message)
        if person.verdict is Verdict.PAIR:
            self._tracker.spawn(self._offer_pairing(message), name=f"pairing:{message.platform}:{message.user_id}")
            return
        if not person.allowed:
            await self._ignore(message, person.reason, fields)
            return
        self._metrics.inbound.inc(message.platform)
        if command is not None:
            self._spawn_command(command, message, key)
            return
        if not replay:
            await self._open.wait()
        self._lanes.submit(str(key), message)
        log.info("inbound.replayed_message" if replay else "inbound.accepted", session_key=str(key), chars=len(message.text), attachments=len(message.attachments),
                 turn=short_turn_id(turn_id_for(message.platform, message.event_id)), **fields)  # the turn it starts, or joins (fmt: skip)

    async def _person(self, message: InboundMessage) -> Decision:
        person = self._access.who(message, approved=False)
        if person.allowed:
            return person
        # Only a user the config does not let in needs the database's pairing approvals.
        approved = await self._pairing.is_approved(message.platform, message.user_id)
        return self._access.who(message, approved=approved)

    async def _ignore(self, message: InboundMessage, reason: str, fields: dict[str, str]) -> None:
        self._metrics.ignored.inc(message.platform, _reason_label(reason))
        log.debug("inbound.ignored", reason=reason, **fields)
        await self._ledger.settle([message], Outcome.IGNORED)

    def _spawn_command(self, command: Command, message: InboundMessage, key: SessionKey) -> None:
        async def run() -> None:
            answer = None
            try:
                answer = await self._commands.handle(command, message, key)
            finally:  # a command that failed is settled too: running it again would fail the same way
                reply = Reply.to([message], f"command:{message.platform}:{message.event_id}", answer or "")
                await self._delivery.deliver(await self._ledger.settle([message], Outcome.COMMAND, reply=reply))

        self._tracker.spawn(run(), name=f"command:{message.platform}:{message.event_id}")

    async def _offer_pairing(self, message: InboundMessage) -> None:
        reply = None
        try:
            code = await self._pairing.offer(message.platform, message.user_id, message.user_name, message.chat_id)
            if code is not None:
                reply = Reply(f"pairing:{message.platform}:{message.event_id}", pairing_message(code, message.platform,
                              message.user_id), message.chat_id)  # fmt: skip
            log.info("inbound.ignored", reason="unknown user: pairing code offered" if code else
                     "unknown user: pairing code already offered recently", platform=message.platform,
                     user=message.user_id)  # fmt: skip
        finally:
            await self._delivery.deliver(await self._ledger.settle([message], Outcome.IGNORED, reply=reply))

def _reason_label(reason: str) -> str:
    """A short, bounded label for the metric (the full reason goes to the log)."""
    for label in ("another bot", "bot", "mention", "allowed chats", "allowed servers", "not allowed"):
        if label in reason:
            return label.replace(" ", "_")
    return "other"

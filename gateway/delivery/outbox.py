"""Delivery: the one path every message the bot sends takes.

A reply is rendered once into the platform's dialect and cut into chunks that
fit its limit (:meth:`Delivery.chunks`); every chunk is written to the outbox
before it is sent and marked with the platform's message id after. A turn's
reply is written by the turn's end, with the events it answers
(``gateway/inbound/ledger.py``), and handed to :meth:`Delivery.deliver`;
:meth:`Delivery.send_text` records and sends anything else (a command's
answer, a notice, tool progress). Per chat, chunks go out strictly
in order, and a 429 holds back that chat (and only that chat) for the
``retry_after`` the platform asked for. When the platform rejects a chunk's
markup, that chunk is sent again as plain text. After a restart,
:meth:`Delivery.resume` sends what was recorded but not delivered; what was
delivered is never sent again. Nothing is silently truncated or dropped: a
chunk that cannot be delivered is marked failed and logged with the reason.

One gap is left to the platform: a crash after the platform accepted a chunk
but before it was marked sent makes :meth:`Delivery.resume` send that chunk
again. Every attempt at a chunk therefore carries the same
``OutboundMessage.nonce`` (see :func:`chunk_nonce`), so a platform with
idempotent sends shows it once; a send that may repeat an accepted attempt (a
retry after a lost answer, any send by :meth:`Delivery.resume`) is marked
``maybe_sent`` so an adapter without such keys can look for the chunk first. A
chunk counts as sent only with the platform's message id; a retry after a
failure that never left (``may_have_arrived`` false: no connection was made) is
not ``maybe_sent``. README "What 'delivered' means" has what each platform leaves open.

With several gateways on one database (``cluster.enabled``) each sends only the chunks its
replica claims (``storage/postgres/outbox_claims.py``): its own, and the ones a dead replica left,
which :meth:`Delivery.resume` takes over (``gateway/cluster/outbox_claims.py`` runs it after each
scan). Right before every write to a platform it asks :meth:`Delivery.may_send`: a replica that
expired (frozen past its expiry, say) sends nothing more, so what it held is sent once, by another.

Every text is masked first (``redactor.credentials``: configured secrets and
credential formats such as bot tokens and API keys), before it is rendered,
cut into chunks (a secret split between two chunks would pass) and recorded.

Edits (:meth:`Delivery.edit_text`) go through the outbox too: the new text is
written to the chunk's row, which goes back to ``pending`` while keeping its
platform message id, before the adapter is asked to edit; the row is marked
sent again after. :meth:`Delivery.resume` edits such rows instead of sending
them again. An edit is one message: when the new text no longer fits, the
message is edited to the first chunk and the rest follow as new messages
(rows of their own), so nothing is truncated.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import structlog
from tenacity import RetryCallState, wait_exponential

from adapters.contract import (
    Adapter,
    AdapterError,
    DeliveryError,
    Markup,
    MarkupRejected,
    OutboundMessage,
    RateLimited,
    RecipientUnavailable,
    StreamingUnsupported,
)
from gateway.delivery.budget import ChatBudget
from gateway.delivery.formatting import Chunk, render
from gateway.delivery.formatting.preview import preview
from gateway.keyed_locks import KeyedLocks
from gateway.operations.logs import bind, short_turn_id
from gateway.operations.metrics import Metrics
from gateway.operations.redaction import redactor
from gateway.delivery.policy import ALERT_PREFIX, PROGRESS_PREFIX, DeliveryPolicy, chunk_nonce, nonce_for
from storage import OutboxChunk, OutboxRecord, StorageEngine

log = structlog.get_logger("gateway.delivery")

RESENT_KEPT = 4096
"""How many rows a resume delivered :class:`Delivery` remembers (a reply still on its way to :meth:`~Delivery.deliver`
when a resume took its rows is one of the last few)."""

Sleep = Callable[[float], Awaitable[None]]
Spawn = Callable[..., Any]
"""Starts a coroutine as a tracked task: ``spawn(coro, name=...)`` (``TaskTracker.spawn``)."""


class Delivery:
    def __init__(
        self,
        store: StorageEngine,
        adapters: Mapping[str, Adapter],
        metrics: Metrics,
        *,
        policy: DeliveryPolicy = DeliveryPolicy(),
        sleep: Sleep = asyncio.sleep,
        clock: Callable[[], float] = time.monotonic,
        budget: ChatBudget | None = None,
        may_send: Callable[[], bool] = lambda: True,
    ) -> None:
        """``budget``: the rate budget every send and edit takes from (:attr:`budget`); by default one
        of its own over ``adapters``, with the adapters' stream intervals and ``clock`` and ``sleep``.
        ``may_send``: asked right before every platform write (:meth:`may_send`); one of several
        gateways passes whether its replica is still alive (``Replica.alive``)."""
        self._store = store
        self._may_send = may_send
        self._adapters = adapters
        self._metrics = metrics
        self._policy = policy
        self._sleep = sleep
        self.budget = budget if budget is not None else ChatBudget(adapters, clock=clock, sleep=sleep)
        """The one rate budget of every platform's chats: whatever else writes to a chat (a streamed
        reply's updates) takes from it too, so all of them together stay inside the platform's rates."""
        self._chat_locks: KeyedLocks[tuple[str, str]] = KeyedLocks()
        self._stalled: set[tuple[str, str]] = set()
        """Chats with a chunk deferred after its attempts ran out: new replies wait behind it."""
        self._resuming: dict[tuple[str, str], asyncio.Event] = {}
        """Chats being resumed, each with the event set once its resume holds the chat's lock."""
        self._claims = 0
        """Counts this gateway's replica incarnations (:meth:`forget_claims`): a resume stops when it changes."""
        self._resent: OrderedDict[int, str] = OrderedDict()
        """Rows a resume delivered lately, with their message ids: a reply handed to :meth:`deliver`
        with its rows as queued (still pending) does not send them again."""

    def may_send(self) -> bool:
        """Whether this gateway may write to a platform now. One of several gateways whose replica
        expired (it was frozen or cut off past its expiry) may not: another replica sends its chunks,
        and what it holds is left for that one (the rows stay pending, nothing is marked)."""
        if self._may_send():
            return True
        log.warning("delivery.withheld", reason="this replica expired: another one sends what it held",
                    hint="it joins the cluster again as a new replica; nothing is lost")  # fmt: skip
        return False

    def holds_back(self, chat: tuple[str, str]) -> bool:
        """Whether a new reply to ``chat`` (platform, chat id) queues behind older chunks here: one deferred (the
        platform kept refusing it), or a resume sending the chat's old chunks."""
        return chat in self._stalled or chat in self._resuming

    def forget_claims(self) -> None:
        """This gateway's replica expired (one of several gateways): the chunks its resumes hold are another
        replica's now. Each stops before its next chunk, even once the replica joined again."""
        self._claims += 1

    def add_sender(self, sender: Adapter) -> None:
        """Deliver the outbox rows of ``sender.platform`` through ``sender`` too: a destination that is not a
        chat platform (the alert webhooks, ``gateway/operations/alerts/webhook.py``), kept like a chunk."""
        self._adapters = {**self._adapters, sender.platform: sender}
        self.budget.add_sender(sender)

    async def send_text(
        self,
        *,
        turn_id: str,
        platform: str,
        chat_id: str,
        thread_id: str | None = None,
        reply_to: str | None = None,
        text: str,
    ) -> list[str]:
        """Render, record and send ``text`` (model Markdown) that answers no inbound event (a command's
        answer, a notice); returns the platform message ids sent. A turn's reply is recorded with
        the turn's end (``gateway/inbound/ledger.py``) and handed to :meth:`deliver`.
        """
        sent = await self.send_text_rows(
            turn_id=turn_id, platform=platform, chat_id=chat_id, thread_id=thread_id, reply_to=reply_to, text=text
        )
        return [message_id for _, message_id in sent if message_id]

    async def send_text_rows(
        self,
        *,
        turn_id: str,
        platform: str,
        chat_id: str,
        thread_id: str | None = None,
        reply_to: str | None = None,
        text: str,
    ) -> list[tuple[OutboxRecord, str | None]]:
        """Like :meth:`send_text`, with each chunk's outbox row (as queued) and its message id or None.

        The row is what a later :meth:`edit_text` takes.
        """
        chunks = self.chunks(platform, text, reply_to=reply_to)
        if not chunks:
            return []
        return await self.deliver(await self._store.outbox_add(turn_id, platform, chat_id, thread_id, chunks))

    def chunks(self, platform: str, text: str, *, reply_to: str | None = None) -> list[OutboxChunk]:
        """``text`` (model Markdown) masked, rendered for ``platform`` and cut to its limit, as outbox chunks.

        The first chunk replies to ``reply_to``. Blank text gives none.
        """
        adapter = self._adapters[platform]
        markup = adapter.capabilities.markup.value
        return [
            OutboxChunk(text=chunk.text, plain=chunk.plain, markup=markup, reply_to=reply_to if i == 0 else None)
            for i, chunk in enumerate(self._render(adapter, redactor.credentials(text)))
        ]

    def preview(self, platform: str, text: str) -> Chunk:
        """What a reply still being written (``text``, model Markdown so far) shows now on ``platform``:
        masked, rendered safely although unfinished, cut to one message (empty: nothing to show yet).
        Its unfinished last word is not shown, so a secret being written never shows in part."""
        caps = self._adapters[platform].capabilities
        return preview(redactor.credentials(text), caps.markup, max_length=caps.max_message_length,
                       length_unit=caps.length_unit)  # fmt: skip

    async def deliver(self, records: Sequence[OutboxRecord]) -> list[tuple[OutboxRecord, str | None]]:
        """Send the chunks of one message, recorded in the outbox, in order; each row with its message id or None.

        A chunk already delivered is not sent again (a replayed turn gets its old rows back).
        """
        if not records:
            return []
        platform, chat_id = records[0].platform, records[0].chat_id
        adapter = self._adapters[platform]
        # One reply's chunks go out together: another reply to the chat (a command's answer, another
        # user's turn in a group) waits for the chat's lock instead of landing between them.
        async with self._chat_locks.hold((platform, chat_id)):
            sent = []
            for record in records:
                stalled = (platform, chat_id) in self._stalled  # an older chunk waits: keep the order
                sent.append((record, None if stalled else await self._deliver_held(adapter, record)))
            return sent

    async def send_unrecorded(
        self, *, key: str, platform: str, chat_id: str, thread_id: str | None = None, text: str
    ) -> bool:
        """Send ``text`` without the outbox: for telling a user that the database is failing, when it
        cannot record anything. One attempt (plain text if the markup is refused), in order with the
        chat's other messages; lost if the process stops first. ``key`` names it for the platform's
        idempotency. True if it went out; a failure is logged, never raised."""
        adapter = self._adapters[platform]
        chunks = self._render(adapter, redactor.credentials(text))
        markup = adapter.capabilities.markup
        async with self._chat_locks.hold((platform, chat_id)):
            for index, chunk in enumerate(chunks):
                nonce = nonce_for(key, index)
                message = OutboundMessage(chat_id=chat_id, text=chunk.text, thread_id=thread_id, markup=markup,
                                          nonce=nonce)  # fmt: skip
                if not self.may_send():
                    return False
                try:
                    await self._send_once(adapter, platform, message, plain=chunk.plain or chunk.text)
                except AdapterError as error:
                    if isinstance(error, RateLimited):
                        self.budget.hold(platform, chat_id, error.retry_after)
                    log.warning("delivery.notice_failed", platform=platform, chat=chat_id, error=str(error))
                    return False
        log.info("delivery.notice_sent", platform=platform, chat=chat_id, notice=key)
        return True

    async def edit_text(self, record: OutboxRecord | int, text: str) -> list[str]:
        """Replace the text of a delivered chunk (its outbox row or row id) with ``text`` (model Markdown).

        The new text is recorded before the adapter is asked, so a crash in between leaves an edit
        that :meth:`resume` finishes. Returns the platform message ids showing the new text: the
        edited message, then any new messages for what no longer fit in it. A chunk that never
        reached the platform cannot be edited: nothing happens and nothing is returned. Messages an
        earlier, longer version of the text overflowed into are left as they are.
        """
        if isinstance(record, int):
            found = await self._store.outbox_get(record)
            if found is None:
                raise KeyError(f"no outbox row {record}")
            record = found
        adapter = self._adapters.get(record.platform)
        if adapter is None:
            log.warning("delivery.no_adapter", platform=record.platform, outbox_id=record.id)
            return []
        if not adapter.capabilities.can_edit:
            raise ValueError(f"{record.platform} messages cannot be edited")
        text = redactor.credentials(text)
        chunks = self._render(adapter, text)
        if not chunks:
            return []  # nothing to show: the message keeps its text (there is no delete)
        head, *tail = chunks
        markup = adapter.capabilities.markup.value
        chat = (record.platform, record.chat_id)
        # Recorded under the chat's lock, so edits of one chat reach the platform in the order their
        # text was recorded: the text stored last is the text shown. What no longer fits is recorded
        # too (as new chunks, keyed by the edit so a replay finds them) before the adapter is asked.
        async with self._chat_locks.hold(chat):
            pending = await self._store.outbox_edit(record.id, head.text, plain=head.plain, markup=markup)
            if pending is None:
                log.warning("delivery.edit_skipped", platform=record.platform, chat=record.chat_id,
                            outbox_id=record.id, reason="the chunk never reached the platform")  # fmt: skip
                return []
            rows = await self._store.outbox_add(
                f"{record.turn_id}#{record.chunk_index}:edit:{hashlib.sha256(text.encode()).hexdigest()[:12]}",
                record.platform,
                record.chat_id,
                record.thread_id,
                [OutboxChunk(text=chunk.text, plain=chunk.plain, markup=markup) for chunk in tail],
            ) if tail else []  # fmt: skip
            message_id = await self._attempts(adapter, pending, chat)
        ids = [message_id] if message_id else []
        for row in rows:
            if sent := await self._deliver(adapter, row):
                ids.append(sent)
        return ids

    @staticmethod
    def _render(adapter: Adapter, text: str) -> list[Chunk]:
        caps = adapter.capabilities
        return render(text, caps.markup, max_length=caps.max_message_length, length_unit=caps.length_unit)

    async def resume(
        self, *, spawn: Spawn | None = None, only: set[tuple[str, str]] | None = None, deferred: bool = True
    ) -> int:
        """Deliver every chunk recorded but not delivered (after a restart), each chat on its own.

        A pending row that already has a platform message id is an edit that did not finish: that
        message is edited, never sent again. Chats go concurrently, so one unreachable platform or
        one rate-limited chat holds back only itself. Without ``spawn``: returns once all are done,
        with how many chunks went out. With ``spawn`` (a task tracker's): each chat's delivery runs
        as a task, and this returns as soon as every one holds its chat's lock (a new reply to the
        chat then queues behind the old chunks), with how many chunks are queued. ``only``: just
        these chats. A chat already being resumed is left to that run (with ``only`` and
        ``spawn``, this waits until that run holds the chat too). ``deferred=False``: not the chats with a
        chunk deferred here, which :meth:`retry_stalled` tries when their time comes (one of several
        gateways picks up after every scan; such a chat's new replies wait behind the deferred chunk).
        """
        chats: dict[tuple[str, str], list[OutboxRecord]] = {}
        claims = self._claims
        for record in await self._store.outbox_pending():
            chat = (record.platform, record.chat_id)
            if record.platform not in self._adapters:
                log.warning("delivery.no_adapter", platform=record.platform, outbox_id=record.id)
            elif (only is None or chat in only) and chat not in self._resuming:
                if deferred or chat not in self._stalled:
                    chats.setdefault(chat, []).append(record)
        under_way = [held for chat, held in self._resuming.items() if only is not None and chat in only]
        holding = {chat: asyncio.Event() for chat in chats}
        self._resuming.update(holding)
        runs = [self._resume_chat(chat, rows, holding[chat], claims) for chat, rows in chats.items()]
        if spawn is None:
            results = await asyncio.gather(*runs, return_exceptions=True)
            for error in (r for r in results if isinstance(r, BaseException)):
                log.error("delivery.resume_failed", error=str(error), exc_info=error)
            return sum(r for r in results if isinstance(r, int))
        for (platform, chat_id), run in zip(chats, runs, strict=True):
            spawn(run, name=f"resume:{platform}:{chat_id}")
        for held in [*under_way, *holding.values()]:
            await held.wait()
        return sum(len(rows) for rows in chats.values())

    async def retry_stalled(self, *, spawn: Spawn | None = None) -> int:
        """Try again the chats whose chunks were deferred (see ``DeliveryPolicy.keep_trying``)."""
        return await self.resume(spawn=spawn, only=set(self._stalled)) if self._stalled else 0

    async def _resume_chat(
        self, chat: tuple[str, str], rows: list[OutboxRecord], held: asyncio.Event, claims: int
    ) -> int:
        adapter = self._adapters[chat[0]]
        delivered = 0
        try:
            async with self._chat_locks.hold(chat):
                held.set()
                self._stalled.discard(chat)  # retried now; a chunk that fails again stalls it anew
                for listed in rows:
                    if claims != self._claims:
                        log.warning("delivery.resume_dropped", platform=chat[0], chat=chat[1],
                                    reason="this replica expired: another one sends these chunks")  # fmt: skip
                        break
                    # Read again under the lock: a reply still going out when the rows were listed
                    # (a turn stopped at shutdown) may have sent this chunk since.
                    record = await self._store.outbox_get(listed.id) or listed
                    with bind(turn=_log_turn(record)):  # outside any turn now: name the one it came from
                        if message_id := await self._deliver_held(adapter, record, resumed=True):
                            delivered += 1
                            self._remember_resent(record.id, message_id)
                    if chat in self._stalled:
                        break  # deferred again: the chunks after it wait, in order
        finally:
            held.set()
            self._resuming.pop(chat, None)
        if delivered:
            log.info("delivery.resumed", platform=chat[0], chat=chat[1], chunks=delivered)
        return delivered

    def _remember_resent(self, outbox_id: int, message_id: str) -> None:
        self._resent[outbox_id] = message_id
        while len(self._resent) > RESENT_KEPT:
            self._resent.popitem(last=False)

    async def _deliver(self, adapter: Adapter, record: OutboxRecord) -> str | None:
        async with self._chat_locks.hold((record.platform, record.chat_id)):
            return await self._deliver_held(adapter, record)

    async def _deliver_held(self, adapter: Adapter, record: OutboxRecord, *, resumed: bool = False) -> str | None:
        """Deliver a chunk, holding its chat's lock already."""
        if record.status == "sent" or (record.status == "failed" and record.platform_message_id is not None):
            return record.platform_message_id  # delivered (a failed row with an id is an edit given up)
        if record.live:
            return record.platform_message_id  # a message being streamed: only its stream writes to it
        if not resumed and (sent := self._resent.get(record.id)) is not None:
            return sent  # a resume sent it after these rows were queued (one of several gateways picks up)
        return await self._attempts(adapter, record, (record.platform, record.chat_id), resumed=resumed)

    async def _attempts(
        self, adapter: Adapter, record: OutboxRecord, chat: tuple[str, str], *, resumed: bool = False
    ) -> str | None:
        """Send the chunk, or edit its message when the row is a pending edit; returns the message id.

        ``resumed``: pending from before a restart; as attempt starts are not recorded, it may have landed.
        """
        text, markup = record.text, Markup(record.markup or Markup.PLAIN.value)
        policy = self._policy
        editing = record.platform_message_id is not None
        maybe_sent = resumed or record.attempts > 0
        last_error = "no attempt made"
        if editing and resumed and record.stream == "native" and record.platform_message_id is not None:
            if not self.may_send():
                return None
            await self._stop_stream(adapter, record, record.platform_message_id)
        for attempt in range(1, policy.max_attempts + 1):
            try:
                async with self.budget.write(record.platform, record.chat_id):
                    if not self.may_send():  # asked last, after the wait for the budget
                        return None
                    if editing and record.platform_message_id is not None:
                        await adapter.edit(record.chat_id, record.platform_message_id, text, markup=markup)
                        message_id = record.platform_message_id
                    else:
                        message_id = await adapter.send(OutboundMessage(
                            chat_id=record.chat_id, text=text, thread_id=record.thread_id, reply_to=record.reply_to,
                            markup=markup, nonce=chunk_nonce(record), maybe_sent=maybe_sent,
                        ))  # fmt: skip
            except MarkupRejected as error:
                if markup is Markup.PLAIN:
                    return await self._give_up(record, f"plain text rejected: {error}")
                log.warning("delivery.plain_fallback", platform=record.platform, chat=record.chat_id,
                            chunk=record.chunk_index, error=str(error))  # fmt: skip
                self._metrics.delivery_retries.inc(record.platform, "markup")
                text, markup = record.plain or text, Markup.PLAIN
                continue
            except RateLimited as error:
                last_error = f"rate limited (retry after {error.retry_after:g} s)"
                self.budget.hold(record.platform, record.chat_id, error.retry_after)
                self._metrics.delivery_retries.inc(record.platform, "rate_limited")
                log.warning("delivery.rate_limited", platform=record.platform, chat=record.chat_id,
                            retry_after=error.retry_after, attempt=attempt)  # fmt: skip
                if error.retry_after > policy.max_retry_after:
                    break  # a long wait is not spent here: the chunk is deferred (or given up) below
                continue
            except RecipientUnavailable as error:
                return await self._give_up(record, f"recipient unavailable: {error}")
            except DeliveryError as error:
                if not error.retryable and editing and record.stream is not None:
                    return await self._send_instead(adapter, record, text, markup, str(error))
                if not error.retryable:
                    return await self._give_up(record, str(error))
                # A lost answer (a timeout or a cut connection after the request left) says nothing about
                # whether the chunk arrived: the next attempt resolves it first. One that never left does not.
                maybe_sent = maybe_sent or error.may_have_arrived
                last_error = str(error)
                if attempt < policy.max_attempts:  # no pause after the last one: nothing follows it
                    await self._backoff(record, attempt, error)
                continue
            except AdapterError as error:  # e.g. an adapter that cannot edit
                return await self._give_up(record, str(error))
            await self._store.outbox_mark_sent(record.id, message_id)
            if not editing:
                self._metrics.deliveries.inc(record.platform)
            log.info("delivery.edited" if editing else "delivery.sent", platform=record.platform, chat=record.chat_id,
                     chunk=record.chunk_index, message_id=message_id,
                     plain=markup is Markup.PLAIN and record.markup != Markup.PLAIN.value)  # fmt: skip
            return message_id
        reason = f"still failing after {attempt} attempt{'s' if attempt != 1 else ''}: {last_error}"
        if time.time() - record.created_at < policy.keep_trying:
            await self._store.outbox_mark_failed(record.id, reason)  # counted; the row stays pending
            self._stalled.add(chat)
            log.warning("delivery.deferred", platform=record.platform, chat=record.chat_id, chunk=record.chunk_index,
                        reason=reason, hint="the chat is tried again in the background")  # fmt: skip
            return None
        return await self._give_up(record, reason)

    async def _stop_stream(self, adapter: Adapter, record: OutboxRecord, message_id: str) -> None:
        """A natively streamed message a restart left open is ended before it is edited (idempotent)."""
        try:
            async with self.budget.write(record.platform, record.chat_id):  # a stop is a write, like the edit
                await adapter.stop_stream(record.chat_id, message_id)
        except (StreamingUnsupported, DeliveryError) as error:
            log.warning("delivery.stream_stop_failed", platform=record.platform, chat=record.chat_id,
                        message_id=message_id, error=str(error))  # fmt: skip

    async def _send_instead(
        self, adapter: Adapter, record: OutboxRecord, text: str, markup: Markup, reason: str
    ) -> str | None:
        """A streamed message that can no longer be edited (deleted, too old): the reply's chunk goes out
        as a new message, once (the row then names the new message)."""
        log.warning("delivery.edit_refused", platform=record.platform, chat=record.chat_id, chunk=record.chunk_index,
                    message_id=record.platform_message_id, reason=reason, hint="sending the text as a new message")  # fmt: skip
        message = OutboundMessage(chat_id=record.chat_id, text=text, thread_id=record.thread_id,
                                  reply_to=record.reply_to, markup=markup,
                                  nonce=nonce_for(f"{record.turn_id}#resent", record.chunk_index))  # fmt: skip
        if not self.may_send():
            return None
        try:
            message_id = await self._send_once(adapter, record.platform, message, plain=record.plain or text)
        except AdapterError as error:
            return await self._give_up(record, f"{reason}; sending it anew failed too: {error}")
        await self._store.outbox_mark_sent(record.id, message_id)
        self._metrics.deliveries.inc(record.platform)
        return message_id

    async def _send_once(self, adapter: Adapter, platform: str, message: OutboundMessage, *, plain: str) -> str:
        """One send inside the chat's budget, sent again as ``plain`` text if the platform refuses its markup."""
        try:
            async with self.budget.write(platform, message.chat_id):
                return await adapter.send(message)
        except MarkupRejected:
            async with self.budget.write(platform, message.chat_id):
                return await adapter.send(replace(message, text=plain, markup=Markup.PLAIN))

    async def _backoff(self, record: OutboxRecord, attempt: int, error: DeliveryError) -> None:
        state = RetryCallState(None, None, (), {})  # type: ignore[arg-type]  # the formula reads the attempt only
        state.attempt_number = attempt
        delay = wait_exponential(multiplier=self._policy.base_delay, max=self._policy.max_delay)(state)
        self._metrics.delivery_retries.inc(record.platform, "transient")
        log.warning("delivery.retry", platform=record.platform, chat=record.chat_id, attempt=attempt,
                    delay_s=delay, error=str(error))  # fmt: skip
        await self._sleep(delay)

    async def _give_up(self, record: OutboxRecord, reason: str) -> None:
        await self._store.outbox_mark_failed(record.id, reason, give_up=True)
        self._metrics.errors.inc("delivery")
        if not record.turn_id.startswith(ALERT_PREFIX):  # a reply given up, which is itself alerted
            self._metrics.delivery_failed.inc(record.platform)
        log.error("delivery.failed", platform=record.platform, chat=record.chat_id, chunk=record.chunk_index,
                  reason=reason)  # fmt: skip
        return None


def _log_turn(record: OutboxRecord) -> str:
    """The ``turn=`` of a chunk's log lines: its turn's (a progress message's too), else its own reply's."""
    return short_turn_id(record.turn_id.removeprefix(PROGRESS_PREFIX))

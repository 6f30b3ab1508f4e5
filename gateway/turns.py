"""Running one turn of a session: from the user's message(s) to the delivered reply.

Steps, each persisted before the next depends on it:

1. open the session (starting a new one after a reset);
2. store the user's message (messages that arrived together become one): queued
   at once, awaited before the turn's next write, so the model call does not
   wait for the commit;
3. session hygiene: compact first if the stored history is past 85% of the window;
4. the agent's turn, with every new message stored as it appears (a tool runs
   only once its call is stored) and a compaction inside the turn splitting the
   session into a lineage child;
5. one commit ends the turn: the final answer, its usage, the reply's chunks in
   the outbox and the inbox events marked done; then the chunks go to the
   platform (when the turn called tools, a progress message went out before
   them: ``gateway/progress.py``).

A turn replayed after a crash finds its own user message (tagged with the
events it answered), continues the agent from what was stored, or only
delivers the stored reply: every inbound message gets exactly one reply.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Awaitable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import structlog

from adapters.contract import Adapter, InboundMessage
from agent import ChatMessage, CompressionResult, ModelResponse, ModelUnavailableError, estimate_message
from config.models import CompressionConfig
from gateway import hygiene
from gateway.conversations import Conversation, Conversations
from gateway.convert import to_new
from gateway.delivery import Delivery
from gateway.logs import bind, short_turn_id, turn_id_for
from gateway.metrics import Metrics
from gateway.progress import ToolProgress
from gateway.session_key import session_key_for
from gateway.slots import AgentSlots
from gateway.turn_input import compose, covered_events, event_tag, overlay
from gateway.typing_indicator import typing
from storage import MessageAppend, SessionRecord, Store, Usage, fault_of

log = structlog.get_logger("gateway.turn")

INTERRUPTED_RESULT = "(not run: the gateway restarted before this tool finished)"
HYGIENE_FAILED_NOTICE = (
    "I couldn't summarise the older part of our conversation just now, so nothing was removed. "
    "If replies start failing, send /new to start a fresh conversation."
)
TURN_FAILED_NOTICE = (
    "Sorry, something went wrong on my side while handling that, and I have no answer for it. "
    "Please send it again; if it keeps failing, send /new to start a fresh conversation. "
    "(reference: {ref})"
)
NOTHING_TO_ADD = "(I have nothing to add.)"


@dataclass
class _SessionRef:
    """The session a turn writes to; it changes when a compaction splits the session."""

    record: SessionRecord
    pending: Awaitable[Any] | None = None
    """The user's message, queued but not awaited: the model needs it only in memory, so the
    turn goes on while it is committed. Every later write of the turn awaits it first."""

    async def settled(self) -> SessionRecord:
        """The session, once the queued user message is stored (its error, if it was not)."""
        if self.pending is not None:
            pending, self.pending = self.pending, None
            await pending
        return self.record


MAX_REMEMBERED_WARNINGS = 10_000
MAX_HELD_REPLIES = 1_000


@dataclass(frozen=True, slots=True)
class _Unsent:
    """A turn's answer the database could not store: its next try delivers it instead of asking the model again."""

    text: str
    append: MessageAppend

    def fits(self, session_id: str) -> bool:
        return self.append.session_id == session_id


class TurnRunner:
    def __init__(
        self,
        *,
        store: Store,
        conversations: Conversations,
        delivery: Delivery,
        adapters: Mapping[str, Adapter],
        metrics: Metrics,
        compression: CompressionConfig,
        context_length: int,
        group_per_user: bool,
        slots: AgentSlots,
        tool_progress: bool = True,
    ) -> None:
        self._store = store
        self._conversations = conversations
        self._delivery = delivery
        self._adapters = adapters
        self._metrics = metrics
        self._compression = compression
        self._context_length = context_length
        self._group_per_user = group_per_user
        self._tool_progress = tool_progress
        self._slots = slots
        self._hygiene_warned: OrderedDict[str, None] = OrderedDict()
        """Sessions already told that compaction failed (the most recent ones; bounded)."""
        self._unsent: OrderedDict[str, _Unsent] = OrderedDict()
        """Turn id -> its answer, held while the database refuses to store it (bounded)."""

    async def run(self, _lane: str, batch: list[InboundMessage], *, retry: bool = False) -> None:
        """The turn(s) for ``batch`` (messages of one session, in order), for the lane (through ``gateway/turn_retry.py``).

        After a crash the batch may start with events whose turn was already under way: that
        turn is finished first, then the rest become a new turn. ``retry``: an earlier try failed
        on the database, so the user's message is stored before the model is asked (a database
        that still fails then costs no model call).
        """
        key = session_key_for(batch[0], group_per_user=self._group_per_user)
        conversation = await self._conversations.open(key)
        covered = covered_events(conversation)
        resumed = [m for m in batch if m.event_id in covered]
        fresh = [m for m in batch if m.event_id not in covered]
        if resumed:
            # The id comes from the stored tag, i.e. the batch as it was: a crash while the turn's
            # events were being marked done leaves only the later ones unfinished, and an id taken
            # from those would queue the already delivered reply again under a new outbox key.
            await self._turn(conversation, resumed, resume=True, shared=key.shared, first_event=covered[0])
            conversation = await self._conversations.open(key)
        if fresh:
            await self._turn(conversation, fresh, resume=False, shared=key.shared, retry=retry)

    async def _turn(
        self,
        conversation: Conversation,
        batch: list[InboundMessage],
        *,
        resume: bool,
        shared: bool,
        first_event: str | None = None,
        retry: bool = False,
    ) -> None:
        first = batch[0]
        turn_id = turn_id_for(first.platform, first_event or first.event_id)
        short = short_turn_id(turn_id)
        with bind(platform=first.platform, chat=first.chat_id, session=conversation.record.id, turn=short):
            await self._run(conversation, turn_id, batch, resume=resume, shared=shared, retry=retry)

    async def _run(
        self, conversation: Conversation, turn_id: str, batch: list[InboundMessage], *, resume: bool, shared: bool,
        retry: bool = False,
    ) -> None:
        """One turn; ``shared``: several people talk in the session, so messages carry their sender's name."""
        started = time.monotonic()
        ref = _SessionRef(conversation.record)
        history = list(conversation.history)
        if resume:
            log.info("turn.resumed", events=len(batch))
        else:
            user = ChatMessage.user(compose(batch, named=shared))
            ref.pending = self._store.append_messages(ref.record.id, [to_new(user, platform_message_id=event_tag(batch))])
            history.append(user)
            if retry:
                await ref.settled()
        try:
            await self._finish_turn(ref, conversation, turn_id, history, batch, started, shared)
        finally:
            await ref.settled()  # whatever happened, a failed write of the user's message is not lost silently

    async def _finish_turn(
        self,
        ref: _SessionRef,
        conversation: Conversation,
        turn_id: str,
        history: list[ChatMessage],
        batch: list[InboundMessage],
        started: float,
        shared: bool,
    ) -> None:
        progress: ToolProgress | None = None
        stopped = failed = False
        try:
            async with self._slots:  # the agent's work only: delivering the reply (or progress) holds no slot
                history = await self._repair_tail(ref, history)
                log.info("turn.started", messages=len(batch), history=len(history), **_joined(batch))
                history = await self._hygiene(ref, conversation, history, batch[0])
                progress = self._progress_for(turn_id, batch[0])
                held = self._unsent.pop(turn_id, None)
                if held is not None and history[-1].role == "user" and held.fits(ref.record.id):
                    reply, stored_with_reply = held.text, held.append  # answered before the database failed
                else:
                    reply, stored_with_reply = await self._reply(ref, conversation, history, batch, started, shared,
                                                                 progress)  # fmt: skip
        except asyncio.CancelledError:
            stopped = True
            raise
        except Exception as error:  # noqa: BLE001 - a bug must not leave the user unanswered
            if fault_of(error) is not None:
                raise  # the database's fault: the turn is tried again (gateway/turn_retry.py)
            self._metrics.turns.inc(batch[0].platform, "error")
            log.error("turn.crashed", error=f"{type(error).__name__}: {error}", exc_info=error)
            reply, stored_with_reply = TURN_FAILED_NOTICE.format(ref=short_turn_id(turn_id)), None
            failed = True
        finally:
            if progress is not None:
                await progress.stop()  # the progress message is out before the reply, never after
                if stopped:
                    await progress.finish(stopped=True)  # not left saying "Working on it" for good
        # The reply marks the user's events done, so their message must be stored: if it could not
        # be, this raises, the events stay unfinished and the turn is tried again (or the next start runs it).
        try:
            await ref.settled()
        except Exception as error:
            self._hold(turn_id, error, reply, stored_with_reply)
            raise
        delivering = asyncio.ensure_future(self._delivery.send_text(
            turn_id=turn_id,
            platform=batch[0].platform,
            chat_id=batch[0].chat_id,
            thread_id=batch[0].thread_id,
            reply_to=batch[-1].message_id,
            text=reply,
            answers=batch,
            append=stored_with_reply,
        ))  # fmt: skip
        try:
            await asyncio.shield(delivering)
        except asyncio.CancelledError:
            # Stopped (or interrupted) while the reply goes out: its events are answered by it, so it
            # is sent whole, in order, before the turn ends; a second cancellation (shutdown) leaves
            # the rest to the outbox, which sends it at shutdown or on the next start.
            await delivering
            raise
        except Exception as error:
            self._hold(turn_id, error, reply, stored_with_reply)
            raise
        if progress is not None:
            await progress.finish(failed=failed)

    def _hold(self, turn_id: str, error: BaseException, reply: str, append: MessageAppend | None) -> None:
        """Keep a model's answer that the database refused, for the next try of the turn (not another model call)."""
        if append is None or fault_of(error) is None:
            return
        self._unsent[turn_id] = _Unsent(reply, append)
        while len(self._unsent) > MAX_HELD_REPLIES:
            self._unsent.popitem(last=False)

    def _progress_for(self, turn_id: str, first: InboundMessage) -> ToolProgress | None:
        """The turn's tool progress message, when configured and the platform can edit messages."""
        if not self._tool_progress or not self._adapters[first.platform].capabilities.can_edit:
            return None
        return ToolProgress(
            self._delivery, turn_id=turn_id, platform=first.platform, chat_id=first.chat_id, thread_id=first.thread_id
        )

    async def _repair_tail(self, ref: _SessionRef, history: list[ChatMessage]) -> list[ChatMessage]:
        """Tool calls a crash left without results get a stub result, so the model sees a valid history.

        Only the messages since the second most recent user message are looked at: every turn
        repairs its history before it runs, so anything older was repaired then, and a turn that
        crashed left its calls after its own user message (the last one when the turn is resumed,
        the one before it when a new message came first). So a turn's repair does not grow with
        the session's length.
        """
        tail = history[_recent_turns_start(history) :]
        answered = {m.tool_call_id for m in tail if m.role == "tool"}
        stubs = [
            ChatMessage.tool(call.id, INTERRUPTED_RESULT, call.name)
            for m in tail
            if m.role == "assistant"
            for call in m.tool_calls
            if call.id not in answered
        ]
        if stubs:
            await self._store.append_messages((await ref.settled()).id, [to_new(m) for m in stubs])
            log.warning("turn.repaired", stub_results=len(stubs))
        return [*history, *stubs] if stubs else history

    async def _hygiene(
        self, ref: _SessionRef, conversation: Conversation, history: list[ChatMessage], first: InboundMessage
    ) -> list[ChatMessage]:
        verdict = hygiene.check(
            history[1:],
            enabled=self._compression.enabled,
            context_length=self._context_length,
            hygiene_threshold=self._compression.hygiene_threshold,
            last_prompt_tokens=ref.record.last_prompt_tokens or None,
            estimate=lambda messages: sum(map(estimate_message, messages)),
        )
        if not verdict.fire:
            return history
        agent = self._conversations.agent_session(ref.record, conversation.records)
        # Summarising is a model call of its own, often the longest part of such a turn: show typing.
        async with typing(self._adapters[first.platform], first.chat_id, first.thread_id):
            result = await hygiene.compact(history, agent.compressor, verdict)
        if result.compacted:
            ref.record = await self._conversations.split(await ref.settled(), result.messages)
            return list(result.messages)
        if result.summary_failed and ref.record.id not in self._hygiene_warned:
            self._hygiene_warned[ref.record.id] = None
            if len(self._hygiene_warned) > MAX_REMEMBERED_WARNINGS:
                self._hygiene_warned.popitem(last=False)
            await self._delivery.send_text(
                turn_id=f"notice:hygiene:{ref.record.id}",
                platform=first.platform,
                chat_id=first.chat_id,
                thread_id=first.thread_id,
                text=HYGIENE_FAILED_NOTICE,
            )
        return history

    async def _reply(
        self,
        ref: _SessionRef,
        conversation: Conversation,
        history: list[ChatMessage],
        batch: Sequence[InboundMessage],
        started: float,
        shared: bool,
        progress: ToolProgress | None = None,
    ) -> tuple[str, MessageAppend | None]:
        """The reply's text, and the message(s) to store with it (see ``_Persist.reply``)."""
        if history[-1].role == "assistant" and not history[-1].tool_calls:
            return history[-1].content, None  # a replay: the reply was stored before the crash
        agent = self._conversations.agent_session(ref.record, conversation.records)
        adapter = self._adapters[batch[0].platform]
        observer = _Persist(self._store, self._conversations, self._metrics, ref, progress)
        self._metrics.turns_running.inc()
        try:
            async with typing(adapter, batch[0].chat_id, batch[0].thread_id):
                result = await agent.run_turn(
                    history,
                    user_time=batch[-1].timestamp,
                    observer=observer,
                    ephemeral=overlay(batch, conversation, shared=shared),
                    known_prompt_tokens=ref.record.last_prompt_tokens or None,
                )
        except ModelUnavailableError as error:
            self._metrics.turns.inc(batch[0].platform, "model_unavailable")
            log.error("turn.failed", reason=str(error.causes[-1]) if error.causes else str(error))
            return error.user_message, None
        finally:
            self._metrics.turns_running.dec()
            await observer.flush()
        elapsed = time.monotonic() - started
        self._metrics.turns.inc(batch[0].platform, result.outcome)
        self._metrics.turn_seconds.observe(elapsed)
        u = result.usage
        log.info(
            "turn.done",
            model=ref.record.model,
            calls=result.model_calls,
            **{"in": u.input_tokens, "out": u.output_tokens},
            cache_read=u.cache_read_tokens,
            cache_write=u.cache_write_tokens,
            cost=round(result.cost_usd or 0.0, 6),
            compactions=result.compactions,
            ms=round(elapsed * 1000),
        )
        # A blank answer renders to nothing at all: the user would get no reply.
        return result.reply if result.reply.strip() else NOTHING_TO_ADD, observer.reply


class _Persist:
    """Stores what the agent produces as it produces it, and accounts usage.

    A model call's usage is written together with the message that call produced, in one write.
    The final answer (an assistant message without tool calls: nothing acts on it but the
    delivery) is held in :attr:`reply` and stored by the outbox write that queues it for
    delivery: the turn ends in one commit, in which the answer, its usage, the reply's chunks
    and the finished inbox events go in together or not at all. Every other message is stored
    before the turn goes on (a tool runs only once its call is on record).
    """

    def __init__(
        self,
        store: Store,
        conversations: Conversations,
        metrics: Metrics,
        ref: _SessionRef,
        progress: ToolProgress | None = None,
    ) -> None:
        self._store = store
        self._progress = progress
        self._conversations = conversations
        self._metrics = metrics
        self._ref = ref
        self._usage: Usage | None = None
        self.reply: MessageAppend | None = None
        """The final answer and its call's usage, not yet stored: the delivery stores it."""

    async def on_message(self, message: ChatMessage) -> None:
        await self._store_reply()  # never expected (the answer ends the turn), but never lost either
        if self._progress is not None and message.role == "assistant" and message.tool_calls:
            self._progress.note(call.name for call in message.tool_calls)
        usage, self._usage = self._usage, None  # the call that produced the message: one write for both
        if message.role == "assistant" and not message.tool_calls:
            self.reply = MessageAppend(self._ref.record.id, [to_new(message)], usage)
            return
        await self._store.append_messages((await self._ref.settled()).id, [to_new(message)], usage=usage)

    async def _store_reply(self) -> None:
        if self.reply is not None:
            reply, self.reply = self.reply, None
            await self._ref.settled()
            await self._store.append_messages(reply.session_id, reply.messages, usage=reply.usage)

    async def flush(self) -> None:
        """Write usage still held (a model call whose message never came). A held reply stays held."""
        if self._usage is not None:
            usage, self._usage = self._usage, None
            await self._store.add_call_usage((await self._ref.settled()).id, usage)

    async def on_compaction(self, result: CompressionResult) -> None:
        await self._store_reply()
        await self.flush()
        self._ref.record = await self._conversations.split(await self._ref.settled(), result.messages)

    async def on_model_call(self, response: ModelResponse, cost_usd: float | None) -> None:
        await self._store_reply()
        await self.flush()
        u = response.usage
        self._usage = Usage(
            input_tokens=u.input_tokens,
            output_tokens=u.output_tokens,
            cache_read_tokens=u.cache_read_tokens,
            cache_write_tokens=u.cache_write_tokens,
            last_prompt_tokens=u.prompt_tokens,
            cost_usd=cost_usd or 0.0,
        )
        self._metrics.add_tokens(u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens)
        if cost_usd:
            self._metrics.cost.inc(amount=cost_usd)


def _joined(batch: Sequence[InboundMessage]) -> dict[str, str]:
    """``joined=``: the ``turn=`` ids the later messages of a coalesced turn were accepted under."""
    if len(batch) < 2:
        return {}
    return {"joined": ",".join(short_turn_id(turn_id_for(m.platform, m.event_id)) for m in batch[1:])}


def _recent_turns_start(history: Sequence[ChatMessage]) -> int:
    """Where the second most recent user message is (the start of the history when there is none)."""
    seen = 0
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "user":
            seen += 1
            if seen == 2:
                return index
    return 0

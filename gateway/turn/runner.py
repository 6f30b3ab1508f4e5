"""Running one turn of a session: from the user's message(s) to the delivered reply.

The protocol, each step persisted before the next depends on it:

1. ``open_session``: the session the messages continue (a new one after a reset);
2. ``store_user_message``: the messages as one user message with their files (``gateway/turn/attachments.py``),
   tagged with the inbound events it answers; queued at once and awaited before the turn's next
   write, so the model call does not wait for its commit;
3. ``compact_if_needed``: session hygiene, compacting a stored history past 85% of the
   window first, through the agent session's one compaction entry;
4. ``run_agent``: the agent's turn, every new message stored as it appears (a tool runs
   only once its call is stored: ``gateway/turn/recorder.py``), a compaction inside the
   turn splitting the session into a lineage child;
5. ``commit_turn``: one commit ends the turn: the final answer, its usage, the reply's
   chunks in the outbox and the inbound events marked done (``InboundLedger.settle``,
   ``Store.finish_turn``). From then on the events are done and the outbox owns the reply;
6. ``deliver_reply``: delivery sends those rows (after the turn's tool-progress message,
   when it called tools: ``gateway/delivery/progress.py``).

With streaming on (``gateway.streaming: auto``) and a platform that can show a reply as it is
written, the turn has a streamed reply (``gateway/delivery/streaming/``) instead of the
tool-progress message: the text and the tool line are shown as the agent runs, the stream is
stopped before step 5, and the commit makes the streamed message the reply's first chunk, so
step 6 edits it to the final text (an apology too). A turn that is stopped ends the message
with a "stopped" mark.

A turn replayed after a crash finds its own user message (tagged with the events it
answered), continues the agent from what was stored, or only commits and delivers the
stored answer: every inbound message gets exactly one reply. A turn that breaks on our side
answers with an apology; one the database lets down is tried again (``gateway/turn/retry.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import structlog

from adapters.contract import Adapter, InboundMessage
from agent import ChatMessage, ModelUnavailableError, estimate_message
from config.models import CompressionConfig
from gateway.turn import hygiene
from gateway.turn.conversations import Conversation, Conversations
from gateway.turn.convert import to_new
from gateway.delivery.outbox import Delivery
from gateway.inbound.ledger import InboundLedger, Outcome, Reply
from gateway.operations.logs import bind, short_turn_id, turn_id_for
from gateway.operations.metrics import Metrics
from gateway.delivery.progress import ToolProgress
from gateway.delivery.streaming import STOPPED_MARK, ReplyStream, StreamRefusals, StreamTarget
from gateway.inbound.session_key import SessionKey, session_key_for
from gateway.turn.attachments import MediaStep
from gateway.turn.slots import AgentSlots
from gateway.turn.input import covered_events, event_tag, overlay
from gateway.turn.recorder import INTERRUPTED_RESULT, SessionRef, TurnRecorder, interrupted_tool_results
from gateway.turn.running import RunningTurns, TurnOrigin
from gateway.delivery.typing_indicator import typing
from storage import MessageAppend, OutboxRecord, StorageEngine, fault_of

__all__ = ["HYGIENE_FAILED_NOTICE", "INTERRUPTED_RESULT", "NOTHING_TO_ADD", "TURN_FAILED_NOTICE", "TurnRunner"]

log = structlog.get_logger("gateway.turn")

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

MAX_REMEMBERED_WARNINGS = 10_000
MAX_HELD_REPLIES = 1_000


@dataclass
class _Turn:
    """One turn under way: the messages it answers, its session, the history it has so far."""

    turn_id: str
    batch: list[InboundMessage]
    conversation: Conversation
    session: SessionRef
    history: list[ChatMessage]
    shared: bool
    """Several people talk in the session, so messages carry their sender's name."""
    started: float = field(default_factory=time.monotonic)
    progress: ToolProgress | None = None
    stream: ReplyStream | None = None

    @property
    def first(self) -> InboundMessage:
        return self.batch[0]


@dataclass(frozen=True, slots=True)
class _Answer:
    """What the turn says back, the final messages still to store with it, and how it settles the events."""

    text: str
    final: MessageAppend | None = None
    outcome: Outcome = Outcome.ANSWERED


class TurnRunner:
    def __init__(
        self,
        *,
        store: StorageEngine,
        conversations: Conversations,
        delivery: Delivery,
        ledger: InboundLedger,
        adapters: Mapping[str, Adapter],
        metrics: Metrics,
        compression: CompressionConfig,
        context_length: int,
        group_per_user: bool,
        slots: AgentSlots,
        media: MediaStep,
        tool_progress: bool = True,
        streaming: bool = True,
        refusals: StreamRefusals | None = None,
        fence: Callable[[], None] | None = None,
        running: RunningTurns | None = None,
    ) -> None:
        """``fence``: raises when this process may no longer work on its turns (cluster mode: the replica's
        incarnation expired); the turn's recorder calls it before each write. ``running``: where each turn is
        known while its agent runs (for a tool that asks the person first: :mod:`gateway.tools.approval`)."""
        self._store = store
        self._running = running if running is not None else RunningTurns()
        self._fence = fence
        self._conversations = conversations
        self._delivery = delivery
        self._ledger = ledger
        self._adapters = adapters
        self._metrics = metrics
        self._compression = compression
        self._context_length = context_length
        self._group_per_user = group_per_user
        self._tool_progress = tool_progress
        self._streaming = streaming
        self._refusals = refusals if refusals is not None else StreamRefusals()
        self._slots = slots
        self._media = media
        self._hygiene_warned: OrderedDict[str, None] = OrderedDict()
        """Sessions already told that compaction failed (the most recent ones; bounded)."""
        self._unsent: OrderedDict[str, _Answer] = OrderedDict()
        """Turn id -> its answer, held while the database refuses to store it (bounded)."""

    async def run(self, _lane: str, batch: list[InboundMessage], *, retry: bool = False) -> None:
        """The turn(s) for ``batch`` (messages of one session, in order), for the lane (through ``gateway/turn/retry.py``).

        After a crash the batch may start with events whose turn was already under way: that
        turn is finished first, then the rest become a new turn. ``retry``: an earlier try failed
        on the database, so the user's message is stored before the model is asked (a database
        that still fails then costs no model call).
        """
        key = session_key_for(batch[0], group_per_user=self._group_per_user)
        conversation = await self._open_session(key)
        covered = covered_events(conversation)
        resumed = [m for m in batch if m.event_id in covered]
        fresh = [m for m in batch if m.event_id not in covered]
        if resumed:
            # The id comes from the stored tag, i.e. the batch as it was: a crash while the turn's
            # events were being marked done leaves only the later ones unfinished, and an id taken
            # from those would queue the already delivered reply again under a new outbox key.
            await self._take_turn(conversation, resumed, shared=key.shared, first_event=covered[0])
            conversation = await self._open_session(key)
        if fresh:
            await self._take_turn(conversation, fresh, shared=key.shared, store_user=True, retry=retry)

    async def _open_session(self, key: SessionKey) -> Conversation:
        """Step 1: the session ``key``'s messages continue, a new one after a reset."""
        return await self._conversations.open(key)

    async def _take_turn(
        self,
        conversation: Conversation,
        batch: list[InboundMessage],
        *,
        shared: bool,
        store_user: bool = False,
        first_event: str | None = None,
        retry: bool = False,
    ) -> None:
        """One turn, steps 2 to 6. Without ``store_user`` it resumes a turn whose user message is stored."""
        first = batch[0]
        turn_id = turn_id_for(first.platform, first_event or first.event_id)
        turn = _Turn(turn_id, batch, conversation, SessionRef(conversation.record), list(conversation.history), shared)
        with bind(platform=first.platform, chat=first.chat_id, session=conversation.record.id, turn=short_turn_id(turn_id)):
            if store_user:
                user = await self._media.user_message(turn_id, batch, conversation, named=shared)
                if user is None:
                    return  # answered by the notice about its files alone
                self._store_user_message(turn, user)
                if retry:
                    await turn.session.settled()
            else:
                log.info("turn.resumed", events=len(batch))
            try:
                answer = await self._answer(turn)
                await self._end_turn(turn, answer)
            finally:
                await turn.session.settled()  # whatever happened, a failed write of the user's message is not lost silently

    def _store_user_message(self, turn: _Turn, user: ChatMessage) -> None:
        """Step 2: the messages as one user message, queued (``SessionRef.pending``), and in the history."""
        message = to_new(user, platform_message_id=event_tag(turn.batch))
        turn.session.pending = self._store.append_messages(turn.session.record.id, [message])
        turn.history.append(user)

    async def _answer(self, turn: _Turn) -> _Answer:
        """Steps 3 and 4 while holding an agent slot (delivering the reply or progress holds none).

        A bug of ours gives the apology as the answer; the database's fault is raised, for the turn
        to be tried again.
        """
        stopped = False
        try:
            async with self._slots:
                await self._repair_interrupted_tools(turn)
                log.info("turn.started", messages=len(turn.batch), history=len(turn.history), **_joined(turn.batch))
                await self._compact_if_needed(turn)
                turn.stream = self._stream_for(turn)
                if turn.stream is None:
                    turn.progress = self._progress_for(turn)
                return self._held_answer(turn) or await self._run_agent(turn)
        except asyncio.CancelledError:
            stopped = True
            raise
        except Exception as error:  # noqa: BLE001 - a bug must not leave the user unanswered
            if fault_of(error) is not None:
                raise  # the database's fault: the turn is tried again (gateway/turn/retry.py)
            self._metrics.turns.inc(turn.first.platform, "error")
            log.error("turn.crashed", error=f"{type(error).__name__}: {error}", exc_info=error)
            return _Answer(TURN_FAILED_NOTICE.format(ref=short_turn_id(turn.turn_id)), outcome=Outcome.GIVEN_UP)
        finally:
            if turn.stream is not None:
                # Stopped before the commit: the update in flight is on record, so the commit takes it over.
                await (turn.stream.stopped(STOPPED_MARK) if stopped else turn.stream.stop())
            if turn.progress is not None:
                await turn.progress.stop()  # the progress message is out before the reply, never after
                if stopped:
                    await turn.progress.finish(stopped=True)  # not left saying "Working on it" for good

    async def _repair_interrupted_tools(self, turn: _Turn) -> None:
        """Tool calls a crash left without results get a stub result, so the model sees a valid history."""
        stubs = interrupted_tool_results(turn.history)
        if stubs:
            await self._store.append_messages((await turn.session.settled()).id, [to_new(m) for m in stubs])
            log.warning("turn.repaired", stub_results=len(stubs))
            turn.history.extend(stubs)

    async def _compact_if_needed(self, turn: _Turn) -> None:
        """Step 3: session hygiene (``gateway/turn/hygiene.py``); a failure is told to the chat once and the turn goes on."""
        session = turn.session
        verdict = hygiene.check(
            turn.history[1:],
            enabled=self._compression.enabled,
            context_length=self._context_length,
            hygiene_threshold=self._compression.hygiene_threshold,
            last_prompt_tokens=session.record.last_prompt_tokens or None,
            estimate=lambda messages: sum(map(estimate_message, messages)),
        )
        if not verdict.fire:
            return
        agent = self._conversations.agent_session(session.record, turn.conversation.records)
        first = turn.first
        # Summarising is a model call of its own, often the longest part of such a turn: show typing.
        async with typing(self._adapters[first.platform], first.chat_id, first.thread_id):
            result = await hygiene.compact(turn.history, agent, verdict)
        if result.compacted or result.summary_failed:  # counted for the alerts (a failing summary model)
            self._metrics.compaction_done(session.record.session_key, failed=result.summary_failed)
        if result.compacted:
            session.record = await self._conversations.split(await session.settled(), result.messages)
            turn.history = list(result.messages)
            return
        if result.summary_failed and session.record.id not in self._hygiene_warned:
            self._hygiene_warned[session.record.id] = None
            if len(self._hygiene_warned) > MAX_REMEMBERED_WARNINGS:
                self._hygiene_warned.popitem(last=False)
            await self._delivery.send_text(
                turn_id=f"notice:hygiene:{session.record.id}", platform=first.platform, chat_id=first.chat_id,
                thread_id=first.thread_id, text=HYGIENE_FAILED_NOTICE,
            )  # fmt: skip

    def _progress_for(self, turn: _Turn) -> ToolProgress | None:
        """The turn's tool progress message, when configured and the platform can edit messages."""
        first = turn.first
        if not self._tool_progress or not self._adapters[first.platform].capabilities.can_edit:
            return None
        return ToolProgress(self._delivery, turn_id=turn.turn_id, platform=first.platform, chat_id=first.chat_id,
                            thread_id=first.thread_id)  # fmt: skip

    def _stream_for(self, turn: _Turn) -> ReplyStream | None:
        """The turn's streamed reply, when streaming is on and the platform can show this chat one."""
        if not self._streaming:
            return None
        first = turn.first
        adapter = self._adapters[first.platform]
        modes = self._refusals.modes(adapter, first.chat_type, first.thread_id)
        if not modes:
            return None
        target = StreamTarget(turn.turn_id, first.platform, first.chat_id, first.chat_type, first.thread_id,
                              reply_to=turn.batch[-1].message_id, user_id=first.user_id)  # fmt: skip
        return ReplyStream(target, modes=modes, adapter=adapter, delivery=self._delivery, store=self._store,
                           refusals=self._refusals, metrics=self._metrics)  # fmt: skip

    def _held_answer(self, turn: _Turn) -> _Answer | None:
        """The answer an earlier try got from the model but could not store (no second model call for it)."""
        held = self._unsent.pop(turn.turn_id, None)
        if held is None or held.final is None or turn.history[-1].role != "user":
            return None
        return held if held.final.session_id == turn.session.record.id else None

    async def _run_agent(self, turn: _Turn) -> _Answer:
        """Step 4: the agent's turn, its messages stored as they come; the answer and its final message."""
        history = turn.history
        if history[-1].role == "assistant" and not history[-1].tool_calls:
            return _Answer(history[-1].content)  # a replay: the answer was stored before the crash
        session = turn.session
        first = turn.first
        agent = self._conversations.agent_session(session.record, turn.conversation.records)
        recorder = TurnRecorder(self._store, self._conversations, self._metrics, session, turn.progress, turn.stream,
                                fence=self._fence)  # fmt: skip
        self._metrics.turns_running.inc()
        try:
            async with typing(self._adapters[first.platform], first.chat_id, first.thread_id):
                with self._running.running(agent.session_id, TurnOrigin.of(turn.batch)):
                    result = await agent.run_turn(
                        history,
                        user_time=turn.batch[-1].timestamp,
                        observer=recorder,
                        ephemeral=overlay(turn.batch, turn.conversation, shared=turn.shared),
                        known_prompt_tokens=session.record.last_prompt_tokens or None,
                    )
        except ModelUnavailableError as error:
            self._metrics.turns.inc(first.platform, "model_unavailable")
            log.error("turn.failed", reason=str(error.causes[-1]) if error.causes else str(error))
            return _Answer(error.user_message)
        finally:
            self._metrics.turns_running.dec()
            await recorder.flush()
        elapsed = time.monotonic() - turn.started
        self._metrics.turns.inc(first.platform, result.outcome)
        self._metrics.turn_seconds.observe(elapsed)
        u = result.usage
        log.info(
            "turn.done",
            model=session.record.model,
            calls=result.model_calls,
            **{"in": u.input_tokens, "out": u.output_tokens},
            cache_read=u.cache_read_tokens,
            cache_write=u.cache_write_tokens,
            cost=round(result.cost_usd or 0.0, 6),
            compactions=result.compactions,
            ms=round(elapsed * 1000),
        )
        # A blank answer renders to nothing at all: the user would get no reply.
        return _Answer(result.reply if result.reply.strip() else NOTHING_TO_ADD, recorder.reply)

    async def _end_turn(self, turn: _Turn, answer: _Answer) -> None:
        """Steps 5 and 6, seen through: once committed, the reply goes out whole even if the turn is stopped."""
        # The commit marks the user's events done, so their message must be stored: if it could not
        # be, this raises, the events stay unfinished and the turn is tried again (or the next start runs it).
        try:
            await turn.session.settled()
        except Exception as error:
            self._hold(turn.turn_id, error, answer)
            raise
        ending = asyncio.ensure_future(self._commit_and_deliver(turn, answer))
        try:
            await asyncio.shield(ending)
        except asyncio.CancelledError:
            # Stopped (or interrupted) while the reply goes out: its events are answered by it, so it
            # is sent whole, in order, before the turn ends; a second cancellation (shutdown) leaves
            # the rest to the outbox, which sends it at shutdown or on the next start.
            await ending
            raise
        except Exception as error:
            self._hold(turn.turn_id, error, answer)
            raise
        if turn.progress is not None:
            await turn.progress.finish(failed=answer.outcome is Outcome.GIVEN_UP)

    async def _commit_and_deliver(self, turn: _Turn, answer: _Answer) -> None:
        await self._deliver_reply(await self._commit_turn(turn, answer))

    async def _commit_turn(self, turn: _Turn, answer: _Answer) -> list[OutboxRecord]:
        """Step 5: the answer, its final message and usage, the reply's chunks and the events done, in one commit."""
        reply = Reply.to(turn.batch, turn.turn_id, answer.text, answer.final)
        return await self._ledger.settle(turn.batch, answer.outcome, reply=reply)

    async def _deliver_reply(self, rows: list[OutboxRecord]) -> None:
        """Step 6: send the committed chunks (the outbox sends what is left after a crash)."""
        await self._delivery.deliver(rows)

    def _hold(self, turn_id: str, error: BaseException, answer: _Answer) -> None:
        """Keep a model's answer that the database refused, for the next try of the turn (not another model call)."""
        if answer.final is None or fault_of(error) is None:
            return
        self._unsent[turn_id] = answer
        while len(self._unsent) > MAX_HELD_REPLIES:
            self._unsent.popitem(last=False)


def _joined(batch: Sequence[InboundMessage]) -> dict[str, str]:
    """``joined=``: the ``turn=`` ids the later messages of a coalesced turn were accepted under."""
    if len(batch) < 2:
        return {}
    return {"joined": ",".join(short_turn_id(turn_id_for(m.platform, m.event_id)) for m in batch[1:])}

"""Storing what a turn produces as it produces it: the session it writes to and the agent's messages.

* :class:`SessionRef`: the session a turn writes to (a compaction moves it to a lineage child),
  and the user's message, queued but not awaited yet;
* :class:`TurnRecorder`: the agent's observer: every message is stored before the turn goes on
  (a tool runs only once its call is on record), with the usage of the call that produced it;
  the final answer is held for the turn's end (``Store.finish_turn``); the text as the model
  writes it and the tools it calls go to the turn's streamed reply (or its tool progress), each
  tool by its label (``github.search_issues``, not the ``github__search_issues`` the model calls);
* :func:`interrupted_tool_results`: stub results for tool calls a crash left without one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agent import ChatMessage, CompressionResult, ModelResponse
from gateway.turn.conversations import Conversations
from gateway.turn.convert import to_new
from gateway.operations.metrics import Metrics
from gateway.delivery.progress import ToolProgress
from gateway.delivery.streaming import ReplyStream
from storage import MessageAppend, SessionRecord, StorageEngine, Usage

INTERRUPTED_RESULT = "(not run: the gateway restarted before this tool finished)"


@dataclass
class SessionRef:
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


class TurnRecorder:
    """Stores what the agent produces as it produces it, and accounts usage.

    A model call's usage is written together with the message that call produced, in one write.
    The final answer (an assistant message without tool calls: nothing acts on it but the
    delivery) is held in :attr:`reply` and stored by the turn's end, in the commit that queues
    the reply and marks its events done. Every other message is stored before the turn goes on.
    """

    def __init__(
        self,
        store: StorageEngine,
        conversations: Conversations,
        metrics: Metrics,
        session: SessionRef,
        progress: ToolProgress | None = None,
        stream: ReplyStream | None = None,
        *,
        fence: Callable[[], None] | None = None,
    ) -> None:
        """``fence``: raises when this process may no longer work on the turn (cluster mode: its replica's
        incarnation expired, and another replica answers the turn's messages): checked before every write
        and after every model call, so an expired replica neither writes nor asks the model again."""
        self._store = store
        self._fence = fence if fence is not None else _unfenced
        self._progress = progress
        self._stream = stream
        self._conversations = conversations
        self._metrics = metrics
        self._session = session
        self._usage: Usage | None = None
        self.reply: MessageAppend | None = None
        """The final answer and its call's usage, not yet stored: the turn's end stores it."""

    def on_text(self, text: str) -> None:
        """The model's text so far: shown by the turn's streamed reply, if it has one."""
        if self._stream is not None:
            self._stream.text(text)

    async def on_message(self, message: ChatMessage) -> None:
        self._fence()
        await self._store_reply()  # never expected (the answer ends the turn), but never lost either
        if message.role == "assistant" and message.tool_calls:
            labels = [self._conversations.tool_label(call.name) for call in message.tool_calls]
            if self._progress is not None:
                self._progress.note(labels)
            if self._stream is not None:
                self._stream.tools(labels)
        usage, self._usage = self._usage, None  # the call that produced the message: one write for both
        if message.role == "assistant" and not message.tool_calls:
            self.reply = MessageAppend(self._session.record.id, [to_new(message)], usage)
            return
        await self._store.append_messages((await self._session.settled()).id, [to_new(message)], usage=usage)

    async def _store_reply(self) -> None:
        if self.reply is not None:
            reply, self.reply = self.reply, None
            self._fence()
            await self._session.settled()
            await self._store.append_messages(reply.session_id, reply.messages, usage=reply.usage)

    async def flush(self) -> None:
        """Write usage still held (a model call whose message never came). A held reply stays held."""
        if self._usage is not None:
            usage, self._usage = self._usage, None
            self._fence()
            await self._store.add_call_usage((await self._session.settled()).id, usage)

    async def on_compaction(self, result: CompressionResult) -> None:
        self._fence()
        self._metrics.compaction_done(self._session.record.session_key, failed=result.summary_failed)
        await self._store_reply()
        await self.flush()
        self._session.record = await self._conversations.split(await self._session.settled(), result.messages)

    async def on_model_call(self, response: ModelResponse, cost_usd: float | None) -> None:
        self._fence()
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


def _unfenced() -> None:
    """A gateway on its own (no cluster): nothing can take its turns away."""


def interrupted_tool_results(history: Sequence[ChatMessage]) -> list[ChatMessage]:
    """A stub result for each tool call a crash left without one, so the model sees a valid history.

    Only the messages since the second most recent user message are looked at: every turn
    repairs its history before it runs, so anything older was repaired then, and a turn that
    crashed left its calls after its own user message (the last one when the turn is resumed,
    the one before it when a new message came first). So the repair does not grow with the
    session's length.
    """
    tail = history[_recent_turns_start(history) :]
    answered = {m.tool_call_id for m in tail if m.role == "tool"}
    return [
        ChatMessage.tool(call.id, INTERRUPTED_RESULT, call.name)
        for m in tail
        if m.role == "assistant"
        for call in m.tool_calls
        if call.id not in answered
    ]


def _recent_turns_start(history: Sequence[ChatMessage]) -> int:
    """Where the second most recent user message is (the start of the history when there is none)."""
    seen = 0
    for index in range(len(history) - 1, -1, -1):
        if history[index].role == "user":
            seen += 1
            if seen == 2:
                return index
    return 0

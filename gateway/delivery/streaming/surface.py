"""Where a streamed reply is shown: the interface of the three ways, and the message on record they share.

* :class:`StreamTarget`: the turn and the chat a reply is streamed to;
* :class:`Surface`: one way of showing the growing text (``show``), the tool line while tools run
  (``show_tools``), ended when the turn's answer is ready (``end``) or without it (``close``);
* :class:`RecordedSurface`: a surface that shows a real message (edited in place, or the
  platform's own stream): the message is the turn's *live* outbox row from before its first send,
  each update is recorded after it is shown, and the turn's end (or ``close``) takes the row over.

A surface raises ``StreamingUnsupported`` when the platform refuses its way (the stream falls
back to the next) and the platform's delivery errors otherwise.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import ClassVar

from adapters.contract import Adapter, AdapterError, ChatType, DeliveryError, Markup, StreamMode
from gateway.delivery.outbox import Delivery
from gateway.delivery.streaming.marks import marked
from storage import OutboxChunk, OutboxRecord, StorageEngine


@dataclass(frozen=True, slots=True)
class StreamTarget:
    """The turn whose reply is streamed and the chat it goes to."""

    turn_id: str
    """The reply's outbox key: the live row is its chunk 0."""
    platform: str
    chat_id: str
    chat_type: ChatType
    thread_id: str | None = None
    reply_to: str | None = None
    """The message the reply answers (the streamed message replies to it, as the answer would)."""
    user_id: str | None = None
    """Who the reply answers (a platform that streams to one person in a channel needs it)."""


class Surface(abc.ABC):
    mode: ClassVar[StreamMode]

    def __init__(self, target: StreamTarget, adapter: Adapter, delivery: Delivery, store: StorageEngine) -> None:
        self._target = target
        self._adapter = adapter
        self._delivery = delivery
        self._store = store
        self.updates = 0
        """Sends, edits, drafts and appends made (for ``stream.finished`` and the metric)."""

    @property
    def markup(self) -> Markup:
        return self._adapter.capabilities.markup

    @abc.abstractmethod
    async def show(self, text: str) -> None:
        """Show ``text`` (the reply so far: masked model Markdown, not blank)."""

    @abc.abstractmethod
    async def show_tools(self, line: str) -> None:
        """Show that tools run (``line``: "Working on it: …")."""

    @property
    def ends_with_a_write(self) -> bool:
        """Whether :meth:`end` still writes to the chat (a native stream's stop): it then takes the chat's budget."""
        return False

    async def end(self) -> None:
        """The turn's answer is ready: nothing more is shown (the outbox delivers the answer)."""

    async def close(self, mark: str) -> None:
        """End what is shown with ``mark``: the turn's answer will not come (stopped, interrupted)."""


class RecordedSurface(Surface):
    """A surface showing a real message, on record as the turn's live outbox row."""

    def __init__(self, target: StreamTarget, adapter: Adapter, delivery: Delivery, store: StorageEngine) -> None:
        super().__init__(target, adapter, delivery, store)
        self._row: OutboxRecord | None = None
        self._message_id: str | None = None
        self._shown: tuple[str, str | None] | None = None
        """The rendered text (and its plain twin) the message shows now."""
        self._maybe_sent = False
        """The message's first send may have reached the platform without its id reaching us: the row was
        left by an earlier run (a crash), or a send's answer was lost. The next send asks first."""

    @property
    def row(self) -> OutboxRecord | None:
        return self._row

    def take_over(self, other: RecordedSurface) -> None:
        """Show the message ``other`` showed (a fallback from one way to the next keeps the message)."""
        self._row, self._message_id, self._shown, self._maybe_sent = other._row, other._message_id, other._shown, other._maybe_sent

    @property
    def message_id(self) -> str | None:
        return self._message_id

    async def _open(self) -> OutboxRecord | None:
        """The live row, opened before the first send; None when the turn's answer owns it already."""
        if self._row is None:
            t = self._target
            chunk = OutboxChunk(text="", markup=self.markup.value, reply_to=t.reply_to)
            row = await self._store.outbox_stream_open(t.turn_id, t.platform, t.chat_id, t.thread_id, chunk,
                                                       mode=self.mode.value)  # fmt: skip
            self._row = row
            self._message_id = row.platform_message_id
            self._maybe_sent = row.updated_at > row.created_at or row.platform_message_id is not None
            if self._message_id is not None:
                self._shown = (row.text, row.plain)
        return self._row if self._row.live else None

    async def _send_failed(self, error: AdapterError) -> None:
        """A send of the message failed. Where its request may have reached the platform (the answer was
        lost), the next send resolves that first (``maybe_sent``), and so does delivery once the turn's
        answer takes the row over: the attempt is counted on the row."""
        if isinstance(error, DeliveryError) and error.may_have_arrived and self._row is not None:
            self._maybe_sent = True
            await self._store.outbox_stream_attempted(self._row.id, str(error))

    async def _record(self, text: str, plain: str | None) -> None:
        assert self._row is not None
        self._shown = (text, plain)
        self.updates += 1
        await self._store.outbox_stream_shown(self._row.id, text, self._message_id, plain=plain, mode=self.mode.value)

    async def close(self, mark: str) -> None:
        t = self._target
        if self._row is None:
            # Nothing shown by this run; a crashed run's message may still be on record: end that.
            chunk = OutboxChunk(text="", markup=self.markup.value, reply_to=t.reply_to)
            self._row = await self._store.outbox_stream_open(t.turn_id, t.platform, t.chat_id, t.thread_id, chunk,
                                                             mode=self.mode.value)  # fmt: skip
        row = self._row
        if not row.live:
            return
        shown_text, shown_plain = self._shown or (row.text, row.plain)
        text, plain = marked(shown_text, shown_plain, mark, self._adapter.capabilities)
        closed = await self._store.outbox_stream_close(row.id, text, plain=plain)
        if closed is not None:
            await self._delivery.deliver([closed])

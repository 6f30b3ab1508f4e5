"""EDIT: a message sent once there is enough text, then edited in place as the text grows.

The message is the turn's live outbox row (:class:`RecordedSurface`): opened before the first
send (which carries the row's idempotency key, so a send repeated after a crash or a lost answer
is recognised where the platform can), recorded after every send and edit. A row a crashed run
left is adopted: its message is edited, never sent again (a natively streamed one is stopped
first). When the platform refuses the preview's markup, that update goes as plain text.
"""

from __future__ import annotations

from dataclasses import replace

from adapters.contract import AdapterError, Markup, MarkupRejected, OutboundMessage, StreamingUnsupported, StreamMode
from gateway.delivery.formatting import Chunk
from gateway.delivery.policy import chunk_nonce
from gateway.delivery.streaming.surface import RecordedSurface


class EditSurface(RecordedSurface):
    mode = StreamMode.EDIT

    async def show(self, text: str) -> None:
        await self._show(self._delivery.preview(self._target.platform, text))

    async def show_tools(self, line: str) -> None:
        chunks = self._delivery.chunks(self._target.platform, line)  # a finished text, not a partial one
        if chunks:
            await self._show(Chunk(text=chunks[0].text, plain=chunks[0].plain or chunks[0].text))

    async def _show(self, chunk: Chunk) -> None:
        if not chunk.text.strip():
            return
        row = await self._open()
        if row is None or (self._shown is not None and self._shown[0] in (chunk.text, chunk.plain)):
            return
        t = self._target
        if self._message_id is not None and row.stream == StreamMode.NATIVE.value and not self._stopped_native:
            await self._stop_native()
            self._delivery.budget.finished(t.platform, t.chat_id)  # the stop spent this update's turn: the edit waits
            await self._delivery.budget.take(t.platform, t.chat_id)
        text, markup = chunk.text, self.markup
        if self._message_id is None:
            message = OutboundMessage(chat_id=t.chat_id, text=text, thread_id=t.thread_id, reply_to=t.reply_to,
                                      markup=markup, nonce=chunk_nonce(row), maybe_sent=self._maybe_sent)  # fmt: skip
            try:
                try:
                    self._message_id = await self._adapter.send(message)
                except MarkupRejected:
                    text = chunk.plain
                    self._message_id = await self._adapter.send(replace(message, text=text, markup=Markup.PLAIN))
            except AdapterError as error:
                await self._send_failed(error)
                raise
        else:
            try:
                await self._adapter.edit(t.chat_id, self._message_id, text, markup=markup)
            except MarkupRejected:
                text = chunk.plain
                await self._adapter.edit(t.chat_id, self._message_id, text, markup=Markup.PLAIN)
        await self._record(text, chunk.plain)

    _stopped_native = False

    async def _stop_native(self) -> None:
        """The message was the platform's own stream (before a fallback, or a crashed run's): end it first."""
        assert self._message_id is not None
        try:
            await self._adapter.stop_stream(self._target.chat_id, self._message_id)
        except StreamingUnsupported:
            pass
        self._stopped_native = True  # only now: a stop refused (a 429) is tried again with the next update

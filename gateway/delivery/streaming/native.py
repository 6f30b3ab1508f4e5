"""NATIVE: the platform's own streaming API (Slack's ``chat.startStream`` / ``appendStream`` / ``stopStream``).

The stream starts with the first text and is appended the new part of each later text; the tool
line goes to the platform's status line where the app may set it. Like an edited message it is
the turn's live outbox row from before it starts (``stream = 'native'``, so a restart stops it
before editing it). When a later text does not extend what was appended (a retried model call,
a new model call after tools, a secret masked once it was complete), appending cannot show it:
:class:`NotExtending` tells the reply stream to stop this stream and go on editing the message.
"""

from __future__ import annotations

from adapters.contract import AdapterError, DeliveryError, OutboundMessage, StreamingUnsupported, StreamMode
from gateway.delivery.policy import chunk_nonce
from gateway.delivery.streaming.surface import RecordedSurface
from storage import OutboxRecord


class NotExtending(Exception):
    """The text no longer starts with what the native stream shows."""


class NativeSurface(RecordedSurface):
    mode = StreamMode.NATIVE

    _appended = ""
    _status_allowed = True
    _status_set = False
    _stopped = False

    async def show(self, text: str) -> None:
        row = await self._open()
        if row is None:
            return
        t = self._target
        if self._message_id is None:
            message = OutboundMessage(chat_id=t.chat_id, text=text, thread_id=t.thread_id, reply_to=t.reply_to,
                                      markup=self.markup, nonce=chunk_nonce(row), maybe_sent=self._maybe_sent)  # fmt: skip
            try:
                self._message_id = await self._adapter.start_stream(message, recipient_user_id=t.user_id)
            except AdapterError as error:
                await self._send_failed(error)
                raise
        elif not text.startswith(self._appended) or self._stopped:
            raise NotExtending()
        elif text == self._appended:
            return
        else:
            await self._adapter.append_stream(t.chat_id, self._message_id, text[len(self._appended):])
        self._appended = text
        await self._clear_status()
        chunk = self._delivery.preview(t.platform, text)
        await self._record(chunk.text, chunk.plain)

    async def _open(self) -> OutboxRecord | None:
        row = await super()._open()
        if row is not None and self._message_id is not None and not self._appended:
            raise NotExtending()  # a crashed run's message: what it appended is not known, edit it instead
        return row

    async def show_tools(self, line: str) -> None:
        if not self._status_allowed:
            return
        t = self._target
        try:
            await self._adapter.set_status(t.chat_id, t.thread_id, line)
        except StreamingUnsupported:
            self._status_allowed = False  # this app has no status line: the tools run unshown
            return
        self._status_set = True
        self.updates += 1

    async def _clear_status(self) -> None:
        if self._status_set:
            self._status_set = False
            try:
                await self._adapter.set_status(self._target.chat_id, self._target.thread_id, "")
            except (StreamingUnsupported, DeliveryError):
                pass  # best effort: the platform clears it with the next message anyway

    @property
    def ends_with_a_write(self) -> bool:
        return self._message_id is not None and not self._stopped

    async def end(self) -> None:
        await self._clear_status()
        if self._message_id is not None and not self._stopped:
            await self._adapter.stop_stream(self._target.chat_id, self._message_id)
            self._stopped = True  # only now: a stop refused (a 429) is tried again

    async def close(self, mark: str) -> None:
        await self.end()
        await super().close(mark)

"""DRAFT: an ephemeral preview that is not a message (Telegram's ``sendMessageDraft`` in private chats).

Nothing is recorded and nothing is left behind: the draft goes when the answer is sent as a
normal message through the outbox. While tools run the draft is empty, which shows the
platform's own "thinking" placeholder. A turn's drafts share one id, so each replaces the last.
"""

from __future__ import annotations

import hashlib

from adapters.contract import Markup, MarkupRejected, StreamMode
from gateway.delivery.streaming.surface import Surface


def draft_id_for(turn_id: str) -> int:
    """The turn's draft id: the same on every update and after a restart, a positive 31-bit number."""
    return int.from_bytes(hashlib.sha256(turn_id.encode()).digest()[:4], "big") % (2**31 - 1) + 1


class DraftSurface(Surface):
    mode = StreamMode.DRAFT

    async def show(self, text: str) -> None:
        chunk = self._delivery.preview(self._target.platform, text)
        await self._draft(chunk.text, chunk.plain)

    async def show_tools(self, line: str) -> None:
        await self._draft("", "")

    async def _draft(self, text: str, plain: str) -> None:
        t = self._target
        draft_id = draft_id_for(t.turn_id)
        try:
            await self._adapter.send_draft(t.chat_id, t.thread_id, draft_id, text, markup=self.markup)
        except MarkupRejected:
            await self._adapter.send_draft(t.chat_id, t.thread_id, draft_id, plain, markup=Markup.PLAIN)
        self.updates += 1

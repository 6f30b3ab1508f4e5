"""Which way a reply is streamed in a chat, and the refusals a platform gave, remembered per kind of chat.

A platform says what it offers for a chat (:meth:`Adapter.stream_modes`, best first). A way it
refused once (``StreamingUnsupported``: an older Bot API server without drafts, a Slack app
without the streaming scope) will not start working for that kind of chat on the next turn,
so it is skipped until the gateway restarts.
"""

from __future__ import annotations

from adapters.contract import Adapter, ChatType, StreamMode


class StreamRefusals:
    def __init__(self) -> None:
        self._refused: set[tuple[str, str, StreamMode]] = set()

    def modes(self, adapter: Adapter, chat_type: ChatType | str, thread_id: str | None) -> tuple[StreamMode, ...]:
        """The ways ``adapter`` offers for such a chat, best first, without those it refused before."""
        kind = str(chat_type)
        return tuple(
            mode for mode in adapter.stream_modes(ChatType(chat_type), thread_id)
            if (adapter.platform, kind, mode) not in self._refused
        )  # fmt: skip

    def refuse(self, platform: str, chat_type: ChatType | str, mode: StreamMode) -> None:
        self._refused.add((platform, str(chat_type), mode))

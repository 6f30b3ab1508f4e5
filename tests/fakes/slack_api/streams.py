"""The fake Slack's streamed messages (chat.startStream / appendStream / stopStream) and thread status lines.

A streamed message is a bot message in a thread whose text grows: startStream
opens it (with ``markdown_text``, possibly none yet), each appendStream adds to
it, stopStream ends it (adding its own ``markdown_text`` if any, and keeping
its ``metadata``; :meth:`Streams.expire` ends it as Slack's own timeout
does). After the end, appendStream and stopStream answer
``message_not_in_streaming_state``, as Slack does, and chat.update replaces the
text like any message's; while it streams, chat.update answers
``cant_update_message`` (stop it first). Outside a DM, startStream needs
``recipient_user_id`` and ``recipient_team_id`` (``missing_recipient_*``).

assistant.threads.setStatus records each status (:attr:`Streams.statuses`;
empty text clears).

Switches: :attr:`Streams.scope_granted` False makes the three stream methods
answer ``missing_scope``, :attr:`Streams.status_scope_granted` False does the
same for setStatus (an app installed without the scope).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .history import History

Shown = Callable[[str, str, str, str], Awaitable[None]]
"""What the server records when a message's text changes: (method, channel, ts, text now shown)."""


@dataclass
class Streamed:
    channel: str
    ts: str
    thread_ts: str
    text: str
    recipient_user_id: str | None = None
    recipient_team_id: str | None = None
    streaming: bool = True
    appends: int = 0
    metadata: Any = None


@dataclass(frozen=True)
class Status:
    channel: str
    thread_ts: str
    status: str


class Streams:
    def __init__(
        self, history: History, next_ts: Callable[[], str], shown: Shown, *, author: Mapping[str, str]
    ) -> None:
        self._history = history
        self._author = dict(author)
        """The bot's ``user`` and ``bot_id``, as its messages carry them."""
        self._next_ts = next_ts
        self._shown = shown
        self.scope_granted = True
        self.status_scope_granted = True
        self.messages: dict[tuple[str, str], Streamed] = {}
        """(channel, ts) -> every streamed message, in the order started."""
        self.statuses: list[Status] = []

    # --- reading ---------------------------------------------------------------------------
    def streaming(self, channel: str, ts: str) -> bool:
        message = self.messages.get((channel, ts))
        return message is not None and message.streaming

    def status_of(self, channel: str, thread_ts: str) -> str:
        """The status line the thread shows now ("" when none)."""
        shown = [s.status for s in self.statuses if (s.channel, s.thread_ts) == (channel, thread_ts)]
        return shown[-1] if shown else ""

    def expire(self, channel: str, ts: str) -> None:
        """End a stream as Slack's own timeout does (later appends and stops: ``message_not_in_streaming_state``)."""
        self.messages[(channel, ts)].streaming = False

    def updated(self, channel: str, ts: str, text: str) -> None:
        """chat.update replaced the text of a (stopped) streamed message."""
        message = self.messages.get((channel, ts))
        if message is not None:
            message.text = text

    # --- Web API ---------------------------------------------------------------------------
    async def start(self, args: Mapping[str, Any]) -> dict[str, Any]:
        if not self.scope_granted:
            return _missing_scope("chat:write")
        channel, thread_ts = str(args.get("channel") or ""), str(args.get("thread_ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not thread_ts:
            return {"ok": False, "error": "invalid_arguments", "detail": "thread_ts is required"}
        if not channel.startswith("D"):
            for field in ("recipient_user_id", "recipient_team_id"):
                if not args.get(field):
                    return {"ok": False, "error": f"missing_{field}"}
        ts = self._next_ts()
        message = Streamed(channel, ts, thread_ts, str(args.get("markdown_text") or ""),
                           args.get("recipient_user_id"), args.get("recipient_team_id"))  # fmt: skip
        self.messages[(channel, ts)] = message
        self._history.add(channel, {"type": "message", "text": message.text, **self._author, "ts": ts,
                                    "thread_ts": thread_ts})  # fmt: skip
        await self._shown("chat.startStream", channel, ts, message.text)
        return {"ok": True, "channel": channel, "ts": ts}

    async def append(self, args: Mapping[str, Any]) -> dict[str, Any]:
        found = self._streaming_message(args)
        if isinstance(found, dict):
            return found
        text = str(args.get("markdown_text") or "")
        if not text:
            return {"ok": False, "error": "no_text"}
        found.text += text
        found.appends += 1
        self._history.edit(found.channel, found.ts, text=found.text)
        await self._shown("chat.appendStream", found.channel, found.ts, found.text)
        return {"ok": True, "channel": found.channel, "ts": found.ts}

    async def stop(self, args: Mapping[str, Any]) -> dict[str, Any]:
        found = self._streaming_message(args)
        if isinstance(found, dict):
            return found
        found.streaming = False
        found.text += str(args.get("markdown_text") or "")
        found.metadata = args.get("metadata")
        self._history.edit(found.channel, found.ts, text=found.text,
                           **({"metadata": found.metadata} if found.metadata else {}))  # fmt: skip
        await self._shown("chat.stopStream", found.channel, found.ts, found.text)
        return {"ok": True, "channel": found.channel, "ts": found.ts,
                "message": {"type": "message", "subtype": "bot_message", "text": found.text, **self._author,
                            "ts": found.ts}}  # fmt: skip

    async def set_status(self, args: Mapping[str, Any]) -> dict[str, Any]:
        if not self.status_scope_granted:
            return _missing_scope("assistant:write")
        channel, thread_ts = str(args.get("channel_id") or ""), str(args.get("thread_ts") or "")
        if not channel:
            return {"ok": False, "error": "channel_not_found"}
        if not thread_ts:
            return {"ok": False, "error": "invalid_thread_ts"}
        if "status" not in args:
            return {"ok": False, "error": "invalid_arguments", "detail": "status is required"}
        self.statuses.append(Status(channel, thread_ts, str(args["status"])))
        return {"ok": True}

    def _streaming_message(self, args: Mapping[str, Any]) -> Streamed | dict[str, Any]:
        """The stream the call names, or Slack's error answer."""
        if not self.scope_granted:
            return _missing_scope("chat:write")
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        message = self.messages.get((channel, ts))
        if message is None:
            known = self._history.text_of(channel, ts) is not None  # a message, just not a stream
            return {"ok": False, "error": "message_not_in_streaming_state" if known else "message_not_found"}
        if not message.streaming:
            return {"ok": False, "error": "message_not_in_streaming_state"}
        return message


def _missing_scope(needed: str) -> dict[str, Any]:
    return {"ok": False, "error": "missing_scope", "needed": needed, "provided": "app_mentions:read,channels:history"}

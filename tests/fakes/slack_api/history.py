"""The fake workspace's message history, for ``conversations.replies`` and ``conversations.history``.

A message's ``metadata`` is only in the answer when the call sets
``include_all_metadata``, as on Slack.

The bot's posts land here by themselves (chat.postMessage); what users wrote
is only known to the fake when a test records it with
:meth:`FakeSlack.add_message` (an Events API payload built by
:mod:`.events` goes to the app, not through the fake).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


class History:
    def __init__(self) -> None:
        self._messages: dict[str, dict[str, dict[str, Any]]] = {}
        """channel -> ts -> message."""

    def add(self, channel: str, message: Mapping[str, Any]) -> None:
        self._messages.setdefault(channel, {})[str(message["ts"])] = dict(message)

    def edit(self, channel: str, ts: str, **fields: Any) -> None:
        """Change fields of a message (its ``text`` after an update or an append); unknown messages are left alone."""
        message = self._messages.get(channel, {}).get(ts)
        if message is not None:
            message.update(fields)

    def text_of(self, channel: str, ts: str) -> str | None:
        """What the message shows now; None for a message the workspace does not have."""
        message = self._messages.get(channel, {}).get(ts)
        return None if message is None else str(message.get("text") or "")

    def replies(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Slack's answer to conversations.replies: the parent, then its replies oldest first, paged."""
        channel, ts = str(args.get("channel") or ""), str(args.get("ts") or "")
        in_channel = self._messages.get(channel)
        if in_channel is None:
            return {"ok": False, "error": "channel_not_found"}
        thread = sorted(
            (m for m in in_channel.values() if m["ts"] == ts or m.get("thread_ts") == ts), key=lambda m: float(m["ts"])
        )
        if not thread or thread[0]["ts"] != ts:
            return {"ok": False, "error": "thread_not_found"}
        limit = max(1, min(int(args.get("limit") or 1000), 1000))
        start = int(args.get("cursor") or 0)
        page = [_shown(m, args) for m in thread[start : start + limit]]
        more = start + limit < len(thread)
        return {
            "ok": True, "messages": page, "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }  # fmt: skip

    def channel(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Slack's answer to conversations.history: top-level messages (thread replies left out), newest first."""
        channel = str(args.get("channel") or "")
        in_channel = self._messages.get(channel)
        if in_channel is None:
            return {"ok": False, "error": "channel_not_found"}
        top = sorted(
            (m for m in in_channel.values() if m.get("thread_ts") in (None, m["ts"])), key=lambda m: -float(m["ts"])
        )
        limit = max(1, min(int(args.get("limit") or 100), 1000))
        start = int(args.get("cursor") or 0)
        page = [_shown(m, args) for m in top[start : start + limit]]
        more = start + limit < len(top)
        return {
            "ok": True, "messages": page, "has_more": more,
            "response_metadata": {"next_cursor": str(start + limit) if more else ""},
        }  # fmt: skip


def _shown(message: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """The message as the call sees it: without ``metadata`` unless ``include_all_metadata`` is set."""
    if str(args.get("include_all_metadata") or "").lower() in ("1", "true"):
        return dict(message)
    return {key: value for key, value in message.items() if key != "metadata"}

"""The fake workspace's message history, for ``conversations.replies`` and ``conversations.history``.

A message's ``metadata`` is only in the answer when the call sets
``include_all_metadata``, as on Slack.

The bot's posts land here by themselves (chat.postMessage); what users wrote
is only known to the fake when a test records it with :meth:`FakeSlack.record`
or :meth:`FakeSlack.say` (an Events API payload built by :mod:`.events` goes to
the app, not through the fake).

Both calls take Slack's window and paging arguments: ``oldest`` and ``latest``
(exclusive unless ``inclusive`` is set), ``limit`` and ``cursor``. As on Slack,
the first page of ``conversations.replies`` starts with the thread's parent
whatever the window says; later pages leave it out.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
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

    def message(self, channel: str, ts: str) -> dict[str, Any]:
        """The message as the workspace has it now; raises ``KeyError`` for one it does not have."""
        return dict(self._messages[channel][ts])

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
        parent, replies = thread[0], [m for m in thread[1:] if _in_window(m, args)]
        limit = max(1, min(int(args.get("limit") or 1000), 1000))
        return _page([parent, *replies], int(args.get("cursor") or 0), limit, args)  # the parent heads page one

    def channel(self, args: Mapping[str, Any]) -> dict[str, Any]:
        """Slack's answer to conversations.history: top-level messages (thread replies left out), newest first."""
        channel = str(args.get("channel") or "")
        in_channel = self._messages.get(channel)
        if in_channel is None:
            return {"ok": False, "error": "channel_not_found"}
        top = sorted(
            (m for m in in_channel.values() if m.get("thread_ts") in (None, m["ts"]) and _in_window(m, args)),
            key=lambda m: -float(m["ts"]),
        )
        limit = max(1, min(int(args.get("limit") or 100), 1000))
        return _page(top, int(args.get("cursor") or 0), limit, args)


def _page(listed: list[dict[str, Any]], start: int, limit: int, args: Mapping[str, Any]) -> dict[str, Any]:
    """One page of ``listed`` from ``start``, with the cursor of the next one when there is more."""
    page = [_shown(m, args) for m in listed[start : start + limit]]
    more = start + limit < len(listed)
    return {
        "ok": True, "messages": page, "has_more": more,
        "response_metadata": {"next_cursor": str(start + limit) if more else ""},
    }  # fmt: skip


def _in_window(message: Mapping[str, Any], args: Mapping[str, Any]) -> bool:
    """Whether the message's ts lies between ``oldest`` and ``latest`` (each exclusive unless ``inclusive``)."""
    ts, inclusive = Decimal(str(message["ts"])), str(args.get("inclusive") or "").lower() in ("1", "true")
    oldest, latest = args.get("oldest"), args.get("latest")
    if oldest not in (None, "") and (ts < Decimal(str(oldest)) or (ts == Decimal(str(oldest)) and not inclusive)):
        return False
    return latest in (None, "") or ts < Decimal(str(latest)) or (ts == Decimal(str(latest)) and inclusive)


def _shown(message: Mapping[str, Any], args: Mapping[str, Any]) -> dict[str, Any]:
    """The message as the call sees it: without ``metadata`` unless ``include_all_metadata`` is set."""
    if str(args.get("include_all_metadata") or "").lower() in ("1", "true"):
        return dict(message)
    return {key: value for key, value in message.items() if key != "metadata"}

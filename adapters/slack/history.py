"""What Slack's history holds for the open conversations, read as if the events had come live.

Slack sends a Socket Mode session only the events that happen while it is up, and a deaf
session (open, pings answered, no events) none at all, yet every message stays in the
conversation's history. :class:`HistoryReader` reads it for one :class:`CatchUpPoint`:
``conversations.history`` for a DM (and a channel without a thread), ``conversations.replies``
for a thread, from ``oldest`` on (exclusive), paged with Slack's cursors. Each message is
turned into the event Slack would have sent (``message`` with the point's channel; in a
channel, a message that mentions the bot as its ``app_mention``) and converted by
:func:`~adapters.slack.convert.to_inbound`, so it gets the live ``event_id``
(``{channel}:{ts}``) and the inbox recognises what it already has. What a live event would
not have handed over is left out here too: the bot's own messages, other bots' (live, those
reach the gateway only to be counted and ignored), edits, joins and other subtypes,
top-level channel chatter without a mention, and people of other workspaces
(:class:`~adapters.slack.workspaces.Workspaces`). A reply in the point's thread needs no
mention: the open session is there. The sender's display name is filled in as for a live event.

Needs the scopes the manifest already asks for: ``im:history`` for DMs, ``channels:history``
and ``groups:history`` for threads in public and private channels.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Mapping, Sequence
from decimal import Decimal, InvalidOperation
from typing import Any, Final

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import (
    Attempt,
    CatchUpPoint,
    CatchUpWindow,
    ChatType,
    DeliveryError,
    InboundMessage,
    RateLimited,
    RecipientUnavailable,
    translated,
)
from adapters.slack.convert import Malformed, Skip, ThreadReply, mentions_bot, to_inbound
from adapters.slack.identity import BotIdentity
from adapters.slack.sending import delivery_error, error_code
from adapters.slack.users import UserNames
from adapters.slack.workspaces import Workspaces

log = structlog.get_logger(__name__)

PAGE: Final = 200
"""Messages asked for per history call (Slack's recommended most)."""
MAX_PAGES: Final = 10
"""Pages read from one conversation at most (a thread is read oldest first, so its newest may need several)."""
ATTEMPTS: Final = 3
"""Tries at one conversation when Slack answers "rate limited" (waiting its Retry-After between)."""
MAX_RATE_WAIT: Final = 30.0
"""Seconds of Retry-After a catch-up waits at most; a longer one fails it (the gateway tries after the next gap)."""
UNREADABLE: Final = frozenset({"missing_scope", "thread_not_found"})
"""Answers (besides a channel gone or closed to the bot) that skip one conversation in a catch-up."""
_SPOKEN: Final = frozenset({None, "file_share", "thread_broadcast"})
"""Subtypes of a message a person wrote; only those can be the ``app_mention`` of a mention."""


class HistoryReader:
    """Reads the messages of one workspace's conversations after a given ``ts``, converted as live events are."""

    def __init__(
        self, client: AsyncWebClient, bot: BotIdentity, names: UserNames, workspaces: Workspaces, *, every_message: bool
    ) -> None:
        self._client = client
        self._bot = bot
        self._names = names
        self._workspaces = workspaces
        self._every_message = every_message

    async def catch_up(self, points: Sequence[CatchUpPoint], window: CatchUpWindow) -> list[InboundMessage]:
        """What :meth:`Adapter.catch_up` returns: each point's newest ``window.per_chat`` messages after its
        ``after`` (and not before ``window.since``), the newest ``window.total`` of them in all, oldest first."""
        since = ts_of(window.since)
        found: list[InboundMessage] = []
        for point in points:
            found += await self._read(point, max(since, point.after or since, key=ts_value), window.per_chat)
        found.sort(key=lambda message: ts_value(message.message_id))
        found = found[-window.total :] if window.total > 0 else []
        log.debug("slack.catchup.read", points=len(points), found=len(found))
        return found

    async def _read(self, point: CatchUpPoint, oldest: str, keep: int) -> list[InboundMessage]:
        """One point's messages; a conversation the bot cannot read is logged and skipped, a short rate limit
        waited for."""
        for attempt in range(1, ATTEMPTS + 1):
            try:
                return await self.newer(point, oldest, keep=keep)
            except RateLimited as error:
                if attempt == ATTEMPTS or error.retry_after > MAX_RATE_WAIT:
                    raise
                await asyncio.sleep(error.retry_after)
            except DeliveryError as error:
                code = error_code(getattr(error.__cause__, "response", None))
                if not isinstance(error, RecipientUnavailable) and code not in UNREADABLE:
                    raise
                log.warning("slack.catchup.skipped", channel=point.chat_id, thread_ts=point.thread_id,
                            error=str(error), hint="needs im:history, channels:history or groups:history "
                            "and the bot in the channel")  # fmt: skip
                return []
        return []

    async def newer(
        self, point: CatchUpPoint, oldest: str, *, keep: int, page: int = PAGE, pages: int = MAX_PAGES,
        named: bool = True,
    ) -> list[InboundMessage]:
        """The newest ``keep`` messages at ``point`` sent after ``oldest`` (a ``ts``) that a live event would have
        handed over, oldest first (with their senders' names unless not ``named``). Raises the delivery errors
        of :mod:`.sending` for a failed call."""
        floor = ts_value(oldest)
        kept: deque[InboundMessage] = deque(maxlen=keep)
        newest_first = point.thread_id is None  # conversations.history answers newest first, replies oldest first
        async for item in self._items(point, oldest, page=page, pages=pages):
            message = self._as_live(point, item)
            if message is None or ts_value(message.message_id) <= floor:
                continue
            kept.append(message)
            if newest_first and len(kept) == keep:
                break
        found = sorted(kept, key=lambda m: ts_value(m.message_id))
        return [await self._names.named(message) for message in found] if named else found

    async def _items(
        self, point: CatchUpPoint, oldest: str, *, page: int, pages: int
    ) -> AsyncIterator[Mapping[str, Any]]:
        """The raw messages Slack lists for the point, page by page."""
        in_thread = point.thread_id is not None
        method = "conversations.replies" if in_thread else "conversations.history"
        call = self._client.conversations_replies if in_thread else self._client.conversations_history
        arguments: dict[str, Any] = {"channel": point.chat_id, "oldest": oldest, "limit": page}
        if in_thread:
            arguments["ts"] = point.thread_id
        for _ in range(pages):
            with translated(delivery_error, Attempt(method, point.chat_id)):
                response = await call(**arguments)
            for item in response.get("messages") or ():
                if isinstance(item, Mapping):
                    yield item
            cursor = (response.get("response_metadata") or {}).get("next_cursor")
            if not response.get("has_more") or not cursor:
                return
            arguments["cursor"] = cursor

    def _as_live(self, point: CatchUpPoint, item: Mapping[str, Any]) -> InboundMessage | None:
        """The message as the live event would have handed it over; None where that event hands over nothing."""
        event: dict[str, Any] = {**item, "type": "message", "channel": point.chat_id}
        if event.get("thread_ts") == event.get("ts"):
            del event["thread_ts"]  # a thread's parent: its live event came before the thread existed
        dm = point.chat_type is ChatType.DM
        event["channel_type"] = "im" if dm else "channel"
        if not dm and item.get("subtype") in _SPOKEN and not item.get("bot_id") and mentions_bot(item, self._bot):
            event["type"] = "app_mention"  # live, Slack sends it as app_mention too; that copy starts the turn
            event.pop("subtype", None)
        body = {"team_id": self._bot.team_id or self._bot.enterprise_id, "event": event}
        try:
            result = to_inbound(body, self._bot, every_message=self._every_message)
        except Malformed:
            return None  # live, it would have been rejected and acknowledged
        if isinstance(result, Skip) or self._workspaces.refusal(body) is not None:
            return None
        if isinstance(result, ThreadReply):
            # Live, the thread memory asks whether the bot takes part; the open session at this point says so.
            result = result.message if point.thread_id is not None else None
        if result is None or result.from_bot:
            return None
        self._workspaces.note_sender(body)
        return result


def ts_value(ts: str | None) -> Decimal:
    """A ``ts`` as a number that orders exactly (a float loses the last digits); 0 for none or nonsense."""
    try:
        return Decimal(ts) if ts else Decimal(0)
    except InvalidOperation:
        return Decimal(0)


def ts_of(seconds: float) -> str:
    """Wall-clock seconds as a ``ts`` bound for ``oldest``."""
    return f"{max(seconds, 0.0):.6f}"

"""Which channel threads the bot takes part in, so replies there need no new mention.

The bot takes part in a thread once it posted into it (its reply opened the
thread under a top-level mention) or was mentioned inside it. The adapter
tells :class:`ThreadMemory` both as they happen; the memory keeps the most
recent :data:`MAX_KNOWN` threads.

That memory is gone after a restart, so for a thread it does not know,
:meth:`ThreadMemory.takes_part` asks Slack (``conversations.replies``, a few
small pages, needing ``channels:history`` / ``groups:history``) whether the
bot's user or bot id posted there, and caches the answer: a yes like any
other known thread, a no for :data:`NEGATIVE_TTL` seconds (a later mention or
post turns it into a yes at once). A failed lookup counts as a no for
:data:`ERROR_TTL` seconds, so a busy thread does not hammer a failing or
rate-limited API. Concurrent questions about one thread share one lookup.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Final

import structlog
from slack_sdk.web.async_client import AsyncWebClient

from adapters.slack.identity import BotIdentity

log = structlog.get_logger(__name__)

MAX_KNOWN: Final = 10_000
"""Threads remembered as the bot's, least recently used forgotten first."""
MAX_NEGATIVE: Final = 10_000
NEGATIVE_TTL: Final = 600.0
"""Seconds a thread the bot did not post in stays known as not the bot's."""
ERROR_TTL: Final = 30.0
"""Seconds a thread whose lookup failed is treated as not the bot's before asking again."""
LOOKUP_PAGE: Final = 50
LOOKUP_PAGES: Final = 3
"""A lookup reads at most this many pages of the thread (parent first, oldest replies next)."""

Thread = tuple[str, str]
"""(channel id, thread_ts of the thread's parent message)."""


class ThreadMemory:
    def __init__(
        self, client: AsyncWebClient, bot: BotIdentity, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._client = client
        self._bot = bot
        self._clock = clock
        self._known: OrderedDict[Thread, None] = OrderedDict()
        self._not_ours: OrderedDict[Thread, float] = OrderedDict()
        """Thread -> clock time until which it counts as not the bot's."""
        self._lookups: dict[Thread, asyncio.Task[bool]] = {}

    def remember(self, channel: str, thread_ts: str) -> None:
        """The bot posted into, or was mentioned in, this thread."""
        key = (channel, thread_ts)
        self._not_ours.pop(key, None)
        self._known[key] = None
        self._known.move_to_end(key)
        while len(self._known) > MAX_KNOWN:
            self._known.popitem(last=False)

    def known(self, channel: str, thread_ts: str) -> bool:
        """Whether the thread is remembered as the bot's, without asking Slack."""
        key = (channel, thread_ts)
        if key in self._known:
            self._known.move_to_end(key)
            return True
        return False

    async def takes_part(self, channel: str, thread_ts: str) -> bool:
        """Whether the bot takes part in the thread; asks Slack when the memory cannot tell."""
        if self.known(channel, thread_ts):
            return True
        key = (channel, thread_ts)
        until = self._not_ours.get(key)
        if until is not None:
            if self._clock() < until:
                return False
            del self._not_ours[key]
        lookup = self._lookups.get(key)
        if lookup is None:
            lookup = asyncio.create_task(self._look_up(key), name=f"slack-thread-lookup:{channel}:{thread_ts}")
            self._lookups[key] = lookup
            lookup.add_done_callback(lambda _task: self._lookups.pop(key, None))
        # shield: one caller giving up (its ack budget, a shutdown) does not cancel the others' answer.
        return await asyncio.shield(lookup)

    async def _look_up(self, key: Thread) -> bool:
        channel, thread_ts = key
        try:
            ours = await self._bot_posted(channel, thread_ts)
        except Exception as error:  # noqa: BLE001 - any failure means "not known to be ours" for a while
            log.warning("slack.thread.lookup_failed", channel=channel, thread_ts=thread_ts, error=str(error),
                        hint="the reply is not answered; needs channels:history / groups:history")  # fmt: skip
            self._forget_for(key, ERROR_TTL)
            return False
        if key in self._known:  # a mention or a post arrived while Slack was being asked
            return True
        if ours:
            self.remember(channel, thread_ts)
        else:
            self._forget_for(key, NEGATIVE_TTL)
        log.debug("slack.thread.looked_up", channel=channel, thread_ts=thread_ts, ours=ours)
        return ours

    async def _bot_posted(self, channel: str, thread_ts: str) -> bool:
        cursor: str | None = None
        for _ in range(LOOKUP_PAGES):
            arguments: dict[str, Any] = {"channel": channel, "ts": thread_ts, "limit": LOOKUP_PAGE}
            if cursor:
                arguments["cursor"] = cursor
            response = await self._client.conversations_replies(**arguments)
            if any(self._is_bot(item) for item in response.get("messages") or ()):
                return True
            cursor = (response.get("response_metadata") or {}).get("next_cursor")
            if not response.get("has_more") or not cursor:
                return False
        return False

    def _is_bot(self, item: Any) -> bool:
        if not isinstance(item, dict):
            return False
        if item.get("user") == self._bot.user_id:
            return True
        return self._bot.bot_id is not None and item.get("bot_id") == self._bot.bot_id

    def _forget_for(self, key: Thread, seconds: float) -> None:
        self._not_ours[key] = self._clock() + seconds
        self._not_ours.move_to_end(key)
        while len(self._not_ours) > MAX_NEGATIVE:
            self._not_ours.popitem(last=False)

    async def close(self) -> None:
        """Cancel lookups still running (the adapter is stopping)."""
        lookups = list(self._lookups.values())
        for lookup in lookups:
            lookup.cancel()
        await asyncio.gather(*lookups, return_exceptions=True)

"""Finding a chunk Slack may already have: the stand-in for an idempotency key.

``chat.postMessage`` takes no idempotency key, so every post carries message
metadata (``event_type`` :data:`EVENT_TYPE`, the chunk's nonce in
``event_payload``). When the gateway says an earlier attempt at a chunk may
have reached Slack (``OutboundMessage.maybe_sent``: a retry after a lost
answer, or a send resumed after a restart), :class:`PostedLookup` first looks
for a message of our bot with that nonce: in the thread with
``conversations.replies``, else among the channel's latest messages with
``conversations.history``. Both need the ``*:history`` scope of the
conversation type. A lookup that fails (missing scope, rate limit, network)
does not stop the post: a duplicate is better than a lost reply; the reason is
logged once per kind of failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any, Final

import aiohttp
import structlog
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import OutboundMessage
from adapters.slack.identity import BotIdentity

log = structlog.get_logger(__name__)

EVENT_TYPE: Final = "switchboard_chunk"
CHANNEL_LOOKBACK: Final = 20
"""Latest top-level messages searched in a channel; a chunk cut off by a crash is among the newest."""
THREAD_PAGE: Final = 200
THREAD_PAGES: Final = 5
"""conversations.replies pages oldest first, so a thread is read to its end, up to this many pages."""


def metadata(nonce: str) -> dict[str, Any]:
    """The message metadata a chunk is posted with."""
    return {"event_type": EVENT_TYPE, "event_payload": {"nonce": nonce}}


class PostedLookup:
    def __init__(self, client: AsyncWebClient, bot: BotIdentity) -> None:
        self._client = client
        self._bot = bot
        self._reported: set[str] = set()

    async def find(self, message: OutboundMessage) -> str | None:
        """The ts of our post carrying ``message.nonce``; None if there is none or the lookup failed."""
        if not message.nonce:
            return None
        method = "conversations.replies" if message.thread_id else "conversations.history"
        try:
            for found in await self._candidates(message):
                if self._is_ours(found, message.nonce):
                    log.info("slack.resend.found", channel=message.chat_id, ts=found.get("ts"), nonce=message.nonce)
                    return str(found["ts"])
        except SlackApiError as error:
            data = getattr(error.response, "data", None)
            self._report(method, message.chat_id, str(data.get("error") if isinstance(data, dict) else "") or "error")
        except (aiohttp.ClientError, asyncio.TimeoutError, SlackClientError) as error:
            self._report(method, message.chat_id, f"network ({type(error).__name__})")
        return None

    async def _candidates(self, message: OutboundMessage) -> list[Mapping[str, Any]]:
        if not message.thread_id:
            response = await self._client.conversations_history(
                channel=message.chat_id, limit=CHANNEL_LOOKBACK, include_all_metadata=True
            )
            return list(response.get("messages") or [])
        messages: list[Mapping[str, Any]] = []
        cursor: str | None = None
        for _ in range(THREAD_PAGES):
            response = await self._client.conversations_replies(
                channel=message.chat_id, ts=message.thread_id, limit=THREAD_PAGE, include_all_metadata=True,
                cursor=cursor,
            )  # fmt: skip
            messages.extend(response.get("messages") or [])
            cursor = (response.get("response_metadata") or {}).get("next_cursor") or None
            if not response.get("has_more") or not cursor:
                break
        return messages

    def _is_ours(self, message: Mapping[str, Any], nonce: str) -> bool:
        if message.get("bot_id") != self._bot.bot_id and message.get("user") != self._bot.user_id:
            return False
        meta = message.get("metadata") or {}
        payload = meta.get("event_payload") or {}
        return meta.get("event_type") == EVENT_TYPE and payload.get("nonce") == nonce

    def _report(self, method: str, channel: str, reason: str) -> None:
        if reason in self._reported:
            return
        self._reported.add(reason)
        log.warning(
            "slack.resend.lookup_failed", method=method, channel=channel, reason=reason,
            effect="posting the chunk without checking; if Slack had it already, it shows twice",
            hint="the bot needs channels:history, groups:history and im:history to check"
            if reason == "missing_scope" else None,
        )  # fmt: skip

"""Sending, editing and typing through discord.py's REST client, with its errors translated.

discord.py waits out short rate limits by itself (and logs "We are being rate
limited" through the ``discord.http`` logger, which reaches our log). Waits
longer than :data:`MAX_LIBRARY_WAIT` surface as :class:`RateLimited` so the
gateway's delivery holds back only that chat instead of blocking a send task.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable

import aiohttp
import discord
import structlog

from adapters.contract import (
    Attempt,
    DeliveryError,
    Markup,
    MarkupRejected,
    OutboundMessage,
    RateLimited,
    RecipientUnavailable,
    TransientDeliveryError,
    translated,
)

log = structlog.get_logger(__name__)

MAX_LIBRARY_WAIT = 30.0
"""Longest rate-limit wait discord.py sits out itself (its minimum allowed setting)."""
DEFAULT_RETRY_AFTER = 5.0
SAFE_MENTIONS = discord.AllowedMentions(everyone=False, roles=False, users=True, replied_user=True)
"""The model's text never pings @everyone, @here or roles."""
CONTENT_ERRORS = frozenset({50006, 50035})
"""Discord's "empty message" and "invalid form body" codes: the text itself was refused."""
REMEMBERED_MESSAGES = 2048


class Sender:
    """Outbound calls on whichever client currently holds the connection."""

    def __init__(self, client: Callable[[], discord.Client | None], unavailable: Callable[[], str | None]) -> None:
        self._client = client
        self._unavailable = unavailable
        self._channel_of: OrderedDict[str, int] = OrderedDict()
        """Message id -> the channel (or thread) it was sent to, for edits of messages in threads."""

    async def send(self, message: OutboundMessage, *, view: discord.ui.View | None = None) -> str:
        """Send one chunk (with ``view``: a row of buttons under it); returns the message id."""
        channel = self._channel(int(message.thread_id or message.chat_id))
        reference = None
        if message.reply_to:
            reference = discord.MessageReference(
                message_id=int(message.reply_to), channel_id=channel.id, fail_if_not_exists=False
            )
        with translated(delivery_error, Attempt("send", str(channel.id), message.markup)):
            # discord.py sends enforce_nonce with every nonce: Discord then answers a repeat with the first message.
            sent = await channel.send(
                message.text, reference=reference, nonce=message.nonce, allowed_mentions=SAFE_MENTIONS, view=view
            )  # type: ignore[call-overload]
        self._remember(str(sent.id), channel.id)
        return str(sent.id)

    async def edit(self, chat_id: str, message_id: str, text: str, markup: Markup, *, drop_buttons: bool = False) -> None:
        """Replace the message's text; ``drop_buttons`` also removes every button under it."""
        channel = self._channel(self._channel_of.get(message_id) or int(chat_id))
        extra = {"view": None} if drop_buttons else {}  # view=None sends an empty component list
        with translated(delivery_error, Attempt("edit", str(channel.id), markup)):
            await channel.get_partial_message(int(message_id)).edit(content=text, allowed_mentions=SAFE_MENTIONS,
                                                                    **extra)  # fmt: skip

    async def typing(self, chat_id: str, thread_id: str | None) -> None:
        channel = self._channel(int(thread_id or chat_id))
        with translated(delivery_error, Attempt("typing", str(channel.id))):
            await channel.typing()  # one call shows "typing..." for about 10 s; the gateway refreshes it

    def _channel(self, channel_id: int) -> discord.PartialMessageable:
        stopped = self._unavailable()
        if stopped:
            raise DeliveryError(f"the Discord adapter has stopped: {stopped}")
        client = self._client()
        if client is None or client.is_closed() or client.user is None:
            raise TransientDeliveryError("the Discord connection is restarting; try again shortly", unsent=True)
        return client.get_partial_messageable(channel_id)

    def _remember(self, message_id: str, channel_id: int) -> None:
        self._channel_of[message_id] = channel_id
        while len(self._channel_of) > REMEMBERED_MESSAGES:
            self._channel_of.popitem(last=False)


def delivery_error(error: Exception, attempt: Attempt) -> DeliveryError | None:
    """The delivery error for one of discord.py's (or a network) exceptions, saying what to do; None for
    any other exception."""
    action, channel_id = attempt.action, attempt.chat_id
    if isinstance(error, discord.RateLimited):
        log.warning("discord.rate_limited", action=action, channel=channel_id, retry_after=error.retry_after)
        return RateLimited(error.retry_after)
    if isinstance(error, discord.Forbidden):
        return RecipientUnavailable(
            f"Discord refused to {action} in channel {channel_id} ({error.status}, code {error.code}: {error.text}); "
            "the bot may lack View Channel / Send Messages there, or the user does not accept DMs from it"
        )
    if isinstance(error, discord.NotFound):
        return RecipientUnavailable(
            f"Discord does not know the channel or message to {action} in {channel_id} "
            f"({error.status}, code {error.code}: {error.text}); it was deleted or the bot was removed"
        )
    if isinstance(error, discord.DiscordServerError):
        return TransientDeliveryError(f"Discord had a server error ({error.status}) on {action}")
    if isinstance(error, discord.HTTPException):
        return _classify(error, action, attempt.markup)
    if isinstance(error, aiohttp.ClientError | OSError | asyncio.TimeoutError):
        return TransientDeliveryError(f"network error talking to Discord on {action}: {error!r}",
                                      unsent=isinstance(error, aiohttp.ClientConnectorError))  # fmt: skip
    if isinstance(error, discord.DiscordException):
        return DeliveryError(f"discord.py could not {action} in channel {channel_id}: {error}")
    return None


def _classify(error: discord.HTTPException, action: str, markup: Markup) -> DeliveryError:
    if error.status == 429:
        retry_after = _retry_after(error)
        log.warning("discord.rate_limited", action=action, retry_after=retry_after, note="discord.py used up its retries")
        return RateLimited(retry_after)
    if error.status >= 500:
        return TransientDeliveryError(f"Discord had a server error ({error.status}) on {action}")
    detail = f"Discord refused the {action} ({error.status}, code {error.code}): {error.text}"
    if error.status == 400 and error.code in CONTENT_ERRORS and markup is not Markup.PLAIN:
        return MarkupRejected(detail)
    return DeliveryError(detail)


def _retry_after(error: discord.HTTPException) -> float:
    header = error.response.headers.get("Retry-After") if error.response is not None else None
    try:
        return float(header) if header else DEFAULT_RETRY_AFTER
    except ValueError:
        return DEFAULT_RETRY_AFTER

"""Talking to Slack's Web API: the client, chat.postMessage / chat.update, and error translation.

The client never retries ``chat.postMessage`` (nor ``chat.startStream`` and
``chat.appendStream``, see :mod:`.streaming`) on its own. A connection that
breaks after Slack accepted a post would otherwise post the chunk twice; the
gateway's outbox retries instead, with the chunk it recorded. Rate limits are
not retried here either: a 429 becomes :class:`RateLimited` so the outbox holds
back that chat for ``Retry-After`` seconds.
"""

from __future__ import annotations

import asyncio
from typing import Any, Final

import aiohttp
from slack_sdk.errors import SlackApiError, SlackClientError
from slack_sdk.http_retry.async_handler import AsyncRetryHandler
from slack_sdk.http_retry.builtin_async_handlers import AsyncConnectionErrorRetryHandler
from slack_sdk.http_retry.request import HttpRequest
from slack_sdk.http_retry.response import HttpResponse
from slack_sdk.http_retry.state import RetryState
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import (
    AdapterError,
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
from adapters.slack.resend import metadata

NOT_RETRIED_BY_CLIENT: Final = frozenset({"chat.postMessage", "chat.startStream", "chat.appendStream"})
"""Methods whose repetition shows users a duplicate (a second message, the same text appended twice);
only the gateway retries them, knowing what it recorded."""

DEFAULT_RETRY_AFTER: Final = 1.0
"""Seconds to wait after a 429 that came without a usable Retry-After header."""

_RECIPIENT_GONE: Final = frozenset({
    "channel_not_found", "not_in_channel", "is_archived", "user_not_found", "user_disabled",
    "cannot_dm_bot", "restricted_action", "restricted_action_read_only_channel",
    "restricted_action_thread_only_channel", "restricted_action_non_threadable_channel",
    "team_access_not_granted", "ekm_access_denied", "message_not_found", "cant_update_message",
})  # fmt: skip
_MARKUP: Final = frozenset({"invalid_blocks", "invalid_blocks_format", "invalid_attachments", "invalid_metadata_format"})
_TRANSIENT: Final = frozenset({"internal_error", "fatal_error", "service_unavailable", "request_timeout", "ratelimited"})
_BAD_TOKEN: Final = frozenset({"invalid_auth", "not_authed", "token_revoked", "token_expired", "account_inactive"})
_TEXT_ESCAPES: Final = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})


class _ConnectionRetryExceptPosts(AsyncConnectionErrorRetryHandler):
    """Retry a dropped connection once, except for methods that would post twice."""

    async def _can_retry_async(
        self,
        *,
        state: RetryState,
        request: HttpRequest,
        response: HttpResponse | None = None,
        error: Exception | None = None,
    ) -> bool:
        method = request.url.rstrip("/").rsplit("/", 1)[-1]
        if method in NOT_RETRIED_BY_CLIENT:
            return False
        return await super()._can_retry_async(state=state, request=request, response=response, error=error)


def build_client(token: str, base_url: str | None, *, timeout: int = 30) -> AsyncWebClient:
    """The Web API client shared by Bolt, Socket Mode and sending."""
    retry_handlers: list[AsyncRetryHandler] = [_ConnectionRetryExceptPosts()]
    kwargs: dict[str, Any] = {"token": token, "timeout": timeout, "retry_handlers": retry_handlers}
    if base_url:
        kwargs["base_url"] = base_url if base_url.endswith("/") else base_url + "/"
    return AsyncWebClient(**kwargs)


async def post(client: AsyncWebClient, message: OutboundMessage, *, blocks: list[dict[str, Any]] | None = None) -> str:
    """Post one chunk (``blocks``: shown instead of its text, which then serves notifications); returns its
    ``ts`` (Slack's message id)."""
    formatted = message.markup is Markup.SLACK_MRKDWN
    text = message.text if formatted else message.text.translate(_TEXT_ESCAPES)
    arguments: dict[str, Any] = {"channel": message.chat_id, "text": text, "mrkdwn": formatted}
    if blocks is not None:
        arguments["blocks"] = blocks
    if message.thread_id:
        arguments["thread_ts"] = message.thread_id
    if message.nonce:
        arguments["metadata"] = metadata(message.nonce)  # how a resend finds it (adapters.slack.resend)
    with translated(delivery_error, Attempt("chat.postMessage", message.chat_id)):
        response = await client.chat_postMessage(**arguments)
    return str(response["ts"])


async def update(
    client: AsyncWebClient, chat_id: str, message_id: str, text: str, markup: Markup, *,
    blocks: list[dict[str, Any]] | None = None,
) -> None:
    """Replace a message's text (``blocks``: and its blocks; without them Slack keeps the ones it has)."""
    formatted = markup is Markup.SLACK_MRKDWN
    arguments: dict[str, Any] = {"channel": chat_id, "ts": message_id,
                                 "text": text if formatted else text.translate(_TEXT_ESCAPES)}  # fmt: skip
    if blocks is not None:
        arguments["blocks"] = blocks
    with translated(delivery_error, Attempt("chat.update", chat_id)):
        await client.chat_update(**arguments)


def delivery_error(error: Exception, attempt: Attempt) -> DeliveryError | None:
    """The delivery error for one of slack_sdk's (or a network) exceptions; None for any other exception."""
    method, channel = attempt.action, attempt.chat_id
    if isinstance(error, SlackApiError):
        return _api_error(method, channel, error)
    if isinstance(error, aiohttp.ClientError | asyncio.TimeoutError | SlackClientError):
        return TransientDeliveryError(
            f"Slack {method} to {channel} failed on the network ({type(error).__name__}: {error}); "
            "the outbox sends it again",
            unsent=isinstance(error, aiohttp.ClientConnectorError),  # no connection made: the request never left
        )
    return None


def _api_error(method: str, channel: str, error: SlackApiError) -> DeliveryError:
    response = error.response
    status = int(getattr(response, "status_code", 0) or 0)
    code = error_code(response)
    where = f"Slack {method} to {channel}"
    if status == 429 or code == "ratelimited":
        return RateLimited(_retry_after(response), f"{where} was rate limited")
    if code in _RECIPIENT_GONE:
        return RecipientUnavailable(
            f"{where} failed: {code}; invite the bot to the channel (/invite @bot) or check the channel id"
        )
    if code in _MARKUP:
        return MarkupRejected(f"{where} rejected the formatting: {code}")
    if status >= 500 or code in _TRANSIENT:
        return TransientDeliveryError(f"{where} failed with HTTP {status} {code or ''}".rstrip())
    if code in _BAD_TOKEN:
        return DeliveryError(f"{where} failed: {code}; check platforms.slack.bot_token (xoxb-…)")
    if code == "missing_scope":
        return DeliveryError(f"{where} failed: missing_scope; add chat:write to the app's bot scopes and reinstall it")
    return DeliveryError(f"{where} failed: {code or f'HTTP {status}'}")


def startup_error(what: str, setting: str, error: Exception) -> AdapterError:
    """An error for a failed call at start, naming the setting to check."""
    if isinstance(error, SlackApiError):
        code = error_code(error.response) or f"HTTP {getattr(error.response, 'status_code', '?')}"
        return AdapterError(f"Slack {what} failed: {code}; check {setting}")
    return AdapterError(
        f"Slack {what} failed: cannot reach the Web API ({type(error).__name__}: {error}); "
        "check the network and platforms.slack.api_base_url"
    )


def error_code(response: Any) -> str:
    data = getattr(response, "data", None)
    if isinstance(data, dict):
        return str(data.get("error") or "")
    return ""


def _retry_after(response: Any) -> float:
    headers = getattr(response, "headers", None) or {}
    value = None
    for name in ("Retry-After", "retry-after"):
        value = headers.get(name) if hasattr(headers, "get") else None
        if value is not None:
            break
    try:
        seconds = float(value) if value is not None else DEFAULT_RETRY_AFTER
    except (TypeError, ValueError):
        return DEFAULT_RETRY_AFTER
    return max(seconds, 0.0)

"""Slack's own way of showing a reply as it is written: ``chat.*Stream`` and the thread's status line.

A streamed reply is one message in a thread: ``chat.startStream`` opens it (with
the first text, model Markdown in ``markdown_text``), ``chat.appendStream`` adds
to it and ``chat.stopStream`` ends it; after that ``chat.update`` edits it like
any other message. ``assistant.threads.setStatus`` shows "is searching…" under
the thread while tools run (empty text clears it; Slack also clears it when the
bot posts there, and after two minutes).

Where Slack refuses these for the app (a scope missing, a method the workspace
does not offer, a kind of conversation they do not apply to), the call raises
:class:`StreamingUnsupported`, so the gateway falls back to post-then-update;
every other failure is translated like a post (:func:`sending.delivery_error`).

Neither ``chat.startStream`` nor ``chat.appendStream`` is ever repeated by the
client (:data:`sending.NOT_RETRIED_BY_CLIENT`): a repeated start shows two
messages, a repeated append the same text twice. ``chat.stopStream`` of a stream
that has already ended (stopped before, or closed by Slack's own timeout:
``message_not_in_streaming_state``) is no error.

``chat.startStream`` takes no message metadata, so a stream cannot carry the
chunk's nonce while it runs; ``chat.stopStream`` does, and the stream is stopped
with it, so once stopped the message is found by :mod:`.resend` like a post.

A stream left running (the process stopped before it could end it, and the
outbox finishes the reply after the restart) cannot be edited until it ends:
the adapter's ``edit`` stops it and edits again when chat.update refuses with
``cant_update_message`` (:func:`edit_refused`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any, Final

import structlog
from slack_sdk.errors import SlackApiError
from slack_sdk.web.async_client import AsyncWebClient

from adapters.contract import Attempt, DeliveryError, OutboundMessage, StreamingUnsupported, translated
from adapters.slack.resend import metadata
from adapters.slack.sending import delivery_error, error_code

log = structlog.get_logger(__name__)

REFUSALS: Final = frozenset({
    "missing_scope", "not_allowed_token_type", "unknown_method", "channel_type_not_supported",
    "method_not_supported_for_channel_type", "is_bot", "missing_recipient_user_id", "missing_recipient_team_id",
})  # fmt: skip
"""Answers no retry changes: this app (its scopes, its token, its workspace) cannot stream or show a status here."""
STREAM_ENDED: Final = "message_not_in_streaming_state"
EDIT_REFUSED: Final = "cant_update_message"
"""chat.update's answer for a message it cannot edit, a stream still running among them."""

_FIX: Final = {
    "missing_scope": "add the {needed} bot scope in the app's settings and reinstall it",
    "not_allowed_token_type": "platforms.slack.bot_token must be the bot token (xoxb-…)",
    "unknown_method": "the workspace does not offer this method; see Slack in the README",
    "missing_recipient_user_id": "the gateway did not say whom the reply answers",
    "missing_recipient_team_id": "the gateway did not say whom the reply answers",
}


def edit_refused(error: BaseException) -> bool:
    """Whether a failed chat.update was refused as a message that cannot be edited (it may still stream)."""
    cause = error.__cause__
    return isinstance(cause, SlackApiError) and error_code(cause.response) == EDIT_REFUSED


def refusal(error: Exception, attempt: Attempt) -> StreamingUnsupported | None:
    """:class:`StreamingUnsupported` when Slack refused the method for this app or conversation; else None."""
    if not isinstance(error, SlackApiError):
        return None
    code = error_code(error.response)
    if code not in REFUSALS:
        return None
    data = getattr(error.response, "data", None)
    needed = (data.get("needed") if isinstance(data, dict) else None) or "chat:write"
    fix = _FIX.get(code, "this kind of conversation does not take it").format(needed=needed)
    return StreamingUnsupported(f"Slack refused {attempt.action} in {attempt.chat_id}: {code}; {fix}")


@contextlib.contextmanager
def _translated(action: str, chat_id: str) -> Iterator[None]:
    """A refusal becomes :class:`StreamingUnsupported`, any other Slack failure a delivery error."""
    attempt = Attempt(action, chat_id)
    with translated(delivery_error, attempt):
        try:
            yield
        except SlackApiError as error:
            refused = refusal(error, attempt)
            if refused is None:
                raise
            raise refused from error


async def start(
    client: AsyncWebClient, message: OutboundMessage, *, recipient_user_id: str | None, recipient_team_id: str | None
) -> str:
    """Open a streamed reply in ``message.thread_id`` with ``message.text``; returns its ``ts``."""
    if not message.thread_id:
        raise StreamingUnsupported("Slack streams a reply only in a thread; this message has none")
    arguments: dict[str, Any] = {"channel": message.chat_id, "thread_ts": message.thread_id}
    if message.text:
        arguments["markdown_text"] = message.text  # omitted when empty: the stream opens with no text yet
    if not message.chat_id.startswith("D"):  # outside a DM Slack needs to know whom the stream answers
        arguments["recipient_user_id"] = recipient_user_id
        arguments["recipient_team_id"] = recipient_team_id
    with _translated("chat.startStream", message.chat_id):
        response = await client.chat_startStream(**arguments)
    return str(response["ts"])


async def append(client: AsyncWebClient, chat_id: str, ts: str, text: str) -> None:
    """Add ``text`` to the end of the streamed message ``ts``."""
    if not text:
        return  # Slack requires text; nothing to add is nothing to do
    with _translated("chat.appendStream", chat_id):
        try:
            await client.chat_appendStream(channel=chat_id, ts=ts, markdown_text=text)
        except SlackApiError as error:
            if error_code(error.response) != STREAM_ENDED:
                raise
            raise DeliveryError(
                f"Slack chat.appendStream to {chat_id} failed: the stream of message {ts} has ended "
                f"({STREAM_ENDED}); edit the message with chat.update instead"
            ) from error


async def stop(client: AsyncWebClient, chat_id: str, ts: str, *, nonce: str | None = None) -> None:
    """End the streamed message ``ts`` (with the chunk's nonce as metadata when known). Idempotent."""
    arguments: dict[str, Any] = {"channel": chat_id, "ts": ts}
    if nonce:
        arguments["metadata"] = metadata(nonce)
    with _translated("chat.stopStream", chat_id):
        try:
            await client.chat_stopStream(**arguments)
        except SlackApiError as error:
            if error_code(error.response) != STREAM_ENDED:
                raise
            log.debug("slack.stream.already_ended", channel=chat_id, ts=ts)


async def set_status(client: AsyncWebClient, chat_id: str, thread_ts: str | None, status: str) -> None:
    """Show ``status`` under the thread (empty: clear it)."""
    if not thread_ts:
        raise StreamingUnsupported("Slack shows a status line only in a thread; this message has none")
    with _translated("assistant.threads.setStatus", chat_id):
        await client.assistant_threads_setStatus(channel_id=chat_id, thread_ts=thread_ts, status=status)

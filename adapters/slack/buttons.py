"""Buttons under a Slack message (Block Kit), and the ``block_actions`` presses that come back.

A choice is posted with two blocks: a section with the text (``plain_text``, shown as written) and an
actions block with one button per :class:`Button` (``action_id`` and ``value`` = its id, ``primary`` or
``danger`` style where it has one). The message's ``text`` carries the same words for notifications and
clients that show no blocks. Closing it (``chat.update``) keeps the section with the new text and drops
the actions block, so nothing is left to press.

A press arrives as a ``block_actions`` payload: on the Socket Mode connection (an ``interactive``
envelope) or as a signed form POST to the HTTP endpoint (the app's Interactivity Request URL, which is
the events URL). :class:`PressSink` acknowledges it at once, then hands it to ``on_button`` in a task of
its own: Bolt runs with ``process_before_response``, so Slack gets the ack only once the listener
returns, and it waits 3 seconds at most. A press in a channel the bot does not answer in
(``allowed_channels``; a DM always counts) is acknowledged and logged, not handed over.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final

import structlog

from adapters.contract import Button, ButtonListener, ButtonPress, log_rejected
from adapters.slack.convert import PLATFORM

log = structlog.get_logger(__name__)

ACTIONS_BLOCK: Final = "switchboard-choice"
"""The ``block_id`` of the actions block a choice carries."""
MAX_SECTION_TEXT: Final = 3000
"""The most characters a section's text holds."""
MAX_LABEL: Final = 75
"""The most characters a button's label holds."""
MAX_BUTTONS: Final = 25
"""The most elements an actions block holds."""


def choice_blocks(text: str, buttons: Sequence[Button]) -> list[dict[str, Any]]:
    """The blocks of a message asking to choose: the text, and a row of ``buttons`` under it."""
    if not 1 <= len(buttons) <= MAX_BUTTONS:
        raise ValueError(f"a Slack actions block holds 1 to {MAX_BUTTONS} buttons, not {len(buttons)}")
    return [*closed_blocks(text), {"type": "actions", "block_id": ACTIONS_BLOCK,
                                   "elements": [_button(button) for button in buttons]}]  # fmt: skip


def closed_blocks(text: str) -> list[dict[str, Any]]:
    """The blocks of an answered choice: its text alone."""
    return [{"type": "section", "text": {"type": "plain_text", "text": _cut(text, MAX_SECTION_TEXT), "emoji": True}}]


def _button(button: Button) -> dict[str, Any]:
    element: dict[str, Any] = {
        "type": "button", "action_id": button.id, "value": button.id,
        "text": {"type": "plain_text", "text": _cut(button.label, MAX_LABEL), "emoji": True},
    }  # fmt: skip
    if button.style != "plain":
        element["style"] = button.style
    return element


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_press(body: Mapping[str, Any]) -> ButtonPress:
    """The press in a ``block_actions`` payload; raises ``ValueError`` for one that names no button, user or channel."""
    actions = body.get("actions")
    action = actions[0] if isinstance(actions, list) and actions and isinstance(actions[0], dict) else {}
    user, channel = _object(body, "user"), _object(body, "channel")
    container, message = _object(body, "container"), _object(body, "message")
    button_id, user_id = action.get("action_id"), user.get("id")
    chat_id = channel.get("id") or container.get("channel_id")
    if not isinstance(button_id, str) or not button_id:
        raise ValueError("the press names no button")
    if not isinstance(user_id, str) or not user_id:
        raise ValueError("the press names no user")
    if not isinstance(chat_id, str) or not chat_id:
        raise ValueError("the press names no channel")
    message_id = container.get("message_ts") or message.get("ts")
    thread_id = message.get("thread_ts") or container.get("thread_ts")
    return ButtonPress(
        platform=PLATFORM, chat_id=chat_id, user_id=user_id, button_id=button_id,
        message_id=str(message_id) if message_id else None, thread_id=str(thread_id) if thread_id else None,
        user_name=str(user.get("name") or user.get("username") or ""),
    )  # fmt: skip


def _object(body: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = body.get(key)
    return value if isinstance(value, Mapping) else {}


class PressSink:
    """Bolt's listener for ``block_actions``: ack, convert, check the channel, hand over in a tracked task."""

    def __init__(self, listener: Callable[[], ButtonListener | None], *, channels: Sequence[str] = ()) -> None:
        self._listener = listener
        self._channels = frozenset(channels)
        self._running: set[asyncio.Task[None]] = set()

    async def __call__(self, ack: Callable[[], Awaitable[None]], body: dict[str, Any]) -> None:
        await ack()
        fields = _fields(body)
        try:
            press = to_press(body)
        except Exception as error:  # noqa: BLE001 - acknowledged: the same payload would fail again
            log_rejected(log, "slack.button.rejected", error, **fields)
            return
        listener = self._listener()
        why = "nobody listens for presses" if listener is None else self.refusal(press)
        if listener is None or why is not None:
            log.info("slack.button.ignored", reason=why, button=press.button_id, **fields)
            return
        task = asyncio.create_task(self._hand_over(listener, press, fields), name=f"slack-press:{press.button_id}")
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def refusal(self, press: ButtonPress) -> str | None:
        """Why presses are not taken where this one came from; None where they are (a DM always)."""
        if self._channels and not press.chat_id.startswith("D") and press.chat_id not in self._channels:
            return f"channel {press.chat_id} is not in allowed_channels"
        return None

    async def drain(self) -> None:
        """Wait for the presses being handed over."""
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)

    @staticmethod
    async def _hand_over(listener: ButtonListener, press: ButtonPress, fields: dict[str, str]) -> None:
        try:
            await listener(press)
        except Exception:  # noqa: BLE001 - the listener's failure is logged; later presses still come
            log.exception("slack.button.failed", button=press.button_id, **fields)


def _fields(body: Mapping[str, Any]) -> dict[str, str]:
    """The ids that say which press it was, for the log."""
    return {"channel": str(_object(body, "channel").get("id") or _object(body, "container").get("channel_id") or ""),
            "user": str(_object(body, "user").get("id") or ""),
            "message_ts": str(_object(body, "container").get("message_ts") or "")}  # fmt: skip

"""Buttons under a message, and the press of one (part of :mod:`adapters.contract`).

The gateway asks the person in a chat to choose (allow a tool call, or not) with a message that
carries a row of :class:`Button` values: an inline keyboard on Telegram, a row of buttons on Discord,
an actions block on Slack. A press comes back as a :class:`ButtonPress`, handed to the adapter's
``on_button`` listener (set by the gateway before start), never to the message intake: a press is
an answer to a question the gateway asked, not a message for the agent.

An adapter acknowledges the press to its platform at once (Telegram's ``answerCallbackQuery``,
Discord's deferred update, Slack's ``ack``), so the person's client stops its spinner whatever the
gateway then does, and hands it over. The gateway decides whether the press counts (who pressed,
whether the question is still open) and closes the question by editing its message
(:meth:`adapters.contract.Adapter.close_choice`), which removes the buttons.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Literal

BUTTON_ID: Final = re.compile(r"^[A-Za-z0-9:_-]{1,60}$")
"""What a button id may be: short ASCII, so it fits every platform's field (Telegram's
``callback_data`` takes 64 bytes, Discord's ``custom_id`` 100 characters)."""


@dataclass(frozen=True, slots=True)
class Button:
    """One button under a message."""

    id: str
    """Comes back in :attr:`ButtonPress.button_id`; must match :data:`BUTTON_ID`."""
    label: str
    """What the button says (a few words)."""
    style: Literal["primary", "danger", "plain"] = "plain"
    """A hint the platform may show (Discord and Slack colour buttons; Telegram shows none)."""

    def __post_init__(self) -> None:
        if not BUTTON_ID.match(self.id):
            raise ValueError(f"button id {self.id!r} must be 1-60 letters, digits, ':', '_' or '-'")


@dataclass(frozen=True, slots=True, kw_only=True)
class ButtonPress:
    """Someone pressed a button of a message the bot sent."""

    platform: str
    chat_id: str
    user_id: str
    """Who pressed it (the platform's user id, as in :class:`adapters.contract.InboundMessage`)."""
    button_id: str
    message_id: str | None = None
    """The message that carries the button."""
    thread_id: str | None = None
    user_name: str = ""


ButtonListener = Callable[[ButtonPress], Awaitable[None]]
"""Takes one press (set on an adapter as ``on_button``); what it raises is logged by the adapter, not raised."""

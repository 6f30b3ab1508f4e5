"""Buttons under a Discord message, and the presses that come back as component interactions.

A choice is sent as a message with one action row of buttons (``custom_id`` = :attr:`Button.id`,
colour from :attr:`Button.style`). discord.py's ``View`` only serialises the row here: it is
stopped before it is sent, so discord.py's own view store never dispatches its presses. Every
component interaction comes to the adapter instead (``on_interaction``), also one for a message sent
before a restart, when no view would be stored any more.

A press is acknowledged at once with a deferred update (interaction callback type 6, "the bot
will edit the message, if at all"), so the person's client stops its spinner and shows no
"This interaction failed"; only then is it converted and handed over. A thread's press belongs to
its parent channel, as a message there does (see :mod:`adapters.discord.convert`).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import discord
import structlog

from adapters.contract import Button, ButtonPress

log = structlog.get_logger(__name__)

MAX_LABEL: Final = 80
"""The longest button label Discord takes."""
MAX_ROW: Final = 5
"""The most buttons one action row holds."""
STYLES: Final = {"primary": discord.ButtonStyle.primary, "danger": discord.ButtonStyle.danger,
                 "plain": discord.ButtonStyle.secondary}  # fmt: skip


def row_of(buttons: Sequence[Button]) -> discord.ui.View:
    """One action row with ``buttons`` (at most :data:`MAX_ROW`), as a view discord.py sends but never dispatches."""
    if not 1 <= len(buttons) <= MAX_ROW:
        raise ValueError(f"a Discord message holds 1 to {MAX_ROW} buttons in one row, not {len(buttons)}")
    view = discord.ui.View(timeout=None)
    for button in buttons:
        label = button.label if len(button.label) <= MAX_LABEL else button.label[: MAX_LABEL - 1] + "…"
        view.add_item(discord.ui.Button(label=label, custom_id=button.id, style=STYLES[button.style], row=0))
    view.stop()  # finished views are not stored: presses reach on_interaction, never a view callback
    return view


def is_press(interaction: discord.Interaction) -> bool:
    """A click of a button (not a slash command, a select menu or a modal)."""
    data = interaction.data or {}
    return interaction.type is discord.InteractionType.component and data.get("component_type") == 2


async def acknowledge(interaction: discord.Interaction) -> bool:
    """Tell Discord the press was taken (deferred update); False (logged) when Discord refused or was not reached."""
    try:
        await interaction.response.defer()
    except Exception as error:  # noqa: BLE001 - the press still counts; only the person's spinner runs on
        log.warning("discord.button.ack_failed", interaction=str(interaction.id), error=str(error),
                    hint="the person sees 'This interaction failed'; the press is still handed over")  # fmt: skip
        return False
    return True


def to_press(interaction: discord.Interaction) -> ButtonPress:
    """The press as the gateway gets it; raises ``ValueError`` for one without a button id or a presser."""
    data = interaction.data or {}
    custom_id = data.get("custom_id")
    user = interaction.user
    if not isinstance(custom_id, str) or not custom_id:
        raise ValueError("the interaction names no button")
    if user is None or getattr(user, "id", None) is None:
        raise ValueError("the interaction names no user")
    chat_id, thread_id = _place(interaction)
    return ButtonPress(
        platform="discord", chat_id=chat_id, user_id=str(user.id), button_id=custom_id,
        message_id=str(interaction.message.id) if interaction.message is not None else None, thread_id=thread_id,
        user_name=user.display_name,
    )  # fmt: skip


def refusal(interaction: discord.Interaction, press: ButtonPress, *, guilds: Iterable[str],
            channels: Iterable[str]) -> str | None:  # fmt: skip
    """Why the bot does not take presses where this one came from (the servers and channels it answers in,
    ``allowed_guilds`` / ``allowed_channels``); None where it does (a DM always)."""
    guild_id = interaction.guild_id
    if guild_id is None:
        return None
    allowed_guilds, allowed_channels = frozenset(guilds), frozenset(channels)
    if allowed_guilds and str(guild_id) not in allowed_guilds:
        return f"server {guild_id} is not in allowed_guilds"
    if allowed_channels and press.chat_id not in allowed_channels:
        return f"channel {press.chat_id} is not in allowed_channels"
    return None


def _place(interaction: discord.Interaction) -> tuple[str, str | None]:
    channel = interaction.channel
    if isinstance(channel, discord.Thread):
        return str(channel.parent_id or channel.id), str(channel.id)
    channel_id = interaction.channel_id if channel is None else channel.id
    if channel_id is None:
        raise ValueError("the interaction names no channel")
    return str(channel_id), None

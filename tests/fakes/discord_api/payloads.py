"""JSON shapes the emulator sends: users, channels, guilds, messages, as Discord's API v10 spells them.

Only the fields discord.py reads without a default are filled in, plus the
ones a test sets. Snowflakes are strings on the wire, as on Discord.
"""

from __future__ import annotations

import itertools
import time
from datetime import UTC, datetime
from typing import Any

CHANNEL_TEXT = 0
CHANNEL_DM = 1
CHANNEL_PUBLIC_THREAD = 11
MESSAGE_DEFAULT = 0
MESSAGE_REPLY = 19
VOICE_MESSAGE = 1 << 13
"""The message flag of a voice message (IS_VOICE_MESSAGE)."""

DISCORD_EPOCH_MS = 1_420_070_400_000
_increments = itertools.count()
_last_id = 0


def snowflake(at: float | None = None) -> str:
    """A fresh id that, like Discord's, holds its creation time (milliseconds since 2015 in the bits above the
    22nd, which discord.py reads as ``created_at``). Ids made now increase within one test session; ``at`` (a
    wall-clock time) makes one as of an earlier moment, for a message sent back then."""
    global _last_id
    stamp = int((time.time() if at is None else at) * 1000) - DISCORD_EPOCH_MS
    made = (stamp << 22) | (next(_increments) & 0x3FFFFF)
    if at is None:
        made = _last_id = max(made, _last_id + 1)
    return str(made)


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


def created_at(snowflake_id: str) -> datetime:
    """When the message (or anything else) with this id was made, as its id says."""
    return datetime.fromtimestamp(((int(snowflake_id) >> 22) + DISCORD_EPOCH_MS) / 1000, UTC)


def user(user_id: str, name: str, *, bot: bool = False) -> dict[str, Any]:
    return {
        "id": user_id, "username": name, "global_name": name, "discriminator": "0", "avatar": None,
        "bot": bot, "system": False, "public_flags": 0, "flags": 0,
    }  # fmt: skip


def application(app_id: str, owner: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": app_id, "name": owner["username"], "description": "", "icon": None, "bot_public": False,
        "bot_require_code_grant": False, "owner": owner, "verify_key": "0" * 64, "flags": 0, "team": None,
        "rpc_origins": [], "tags": [],
    }  # fmt: skip


def text_channel(channel_id: str, guild_id: str, name: str, position: int = 0) -> dict[str, Any]:
    return {
        "id": channel_id, "type": CHANNEL_TEXT, "guild_id": guild_id, "name": name, "position": position,
        "permission_overwrites": [], "nsfw": False, "parent_id": None, "topic": None, "last_message_id": None,
        "rate_limit_per_user": 0, "flags": 0,
    }  # fmt: skip


def thread(thread_id: str, guild_id: str, parent_id: str, owner_id: str, name: str) -> dict[str, Any]:
    return {
        "id": thread_id, "type": CHANNEL_PUBLIC_THREAD, "guild_id": guild_id, "parent_id": parent_id,
        "owner_id": owner_id, "name": name, "last_message_id": None, "rate_limit_per_user": 0,
        "message_count": 0, "member_count": 1, "flags": 0,
        "thread_metadata": {"archived": False, "auto_archive_duration": 1440, "archive_timestamp": now_iso(),
                            "locked": False},
    }  # fmt: skip


def dm_channel(channel_id: str, recipient: dict[str, Any]) -> dict[str, Any]:
    return {"id": channel_id, "type": CHANNEL_DM, "last_message_id": None, "recipients": [recipient], "flags": 0}


def guild(guild_id: str, name: str, owner_id: str, channels: list[dict[str, Any]],
          threads: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    everyone = {
        "id": guild_id, "name": "@everyone", "permissions": "1071698660929", "position": 0, "color": 0,
        "hoist": False, "managed": False, "mentionable": False, "flags": 0,
    }  # fmt: skip
    return {
        "id": guild_id, "name": name, "icon": None, "owner_id": owner_id, "roles": [everyone], "emojis": [],
        "stickers": [], "features": [], "channels": channels, "threads": threads, "members": [],
        "member_count": 2, "unavailable": False, "large": False, "joined_at": now_iso(), "voice_states": [],
        "presences": [], "stage_instances": [], "guild_scheduled_events": [], "soundboard_sounds": [],
        "verification_level": 0, "default_message_notifications": 0, "explicit_content_filter": 0,
        "mfa_level": 0, "premium_tier": 0, "preferred_locale": "en-US", "nsfw_level": 0,
        "system_channel_flags": 0,
    }  # fmt: skip


def attachment(
    name: str,
    *,
    size: int = 1024,
    content_type: str | None = None,
    attachment_id: str | None = None,
    url: str | None = None,
    width: int | None = None,
    height: int | None = None,
    duration: float | None = None,
) -> dict[str, Any]:
    """An attachment as MESSAGE_CREATE carries it; ``duration`` makes it a voice message's recording (with the
    waveform Discord sends along). Without ``url`` it points at a CDN that does not exist."""
    attachment_id = attachment_id or snowflake()
    url = url or f"https://cdn.example.invalid/attachments/{attachment_id}/{name}"
    item: dict[str, Any] = {"id": attachment_id, "filename": name, "size": size, "url": url, "proxy_url": url}
    if content_type:
        item["content_type"] = content_type
    if width is not None and height is not None:
        item.update(width=width, height=height)
    if duration is not None:
        item.update(duration_secs=duration, waveform="AAAAAAAAAAAA", flags=0)
    return item


def message(
    *,
    message_id: str,
    channel_id: str,
    author: dict[str, Any],
    content: str,
    guild_id: str | None = None,
    mentions: list[dict[str, Any]] | None = None,
    attachments: list[dict[str, Any]] | None = None,
    referenced: dict[str, Any] | None = None,
    nonce: str | None = None,
    flags: int = 0,
    components: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": message_id, "channel_id": channel_id, "author": author, "content": content,
        "timestamp": created_at(message_id).isoformat(),
        "edited_timestamp": None, "tts": False, "mention_everyone": False, "mentions": mentions or [],
        "mention_roles": [], "attachments": attachments or [], "embeds": [], "pinned": False,
        "type": MESSAGE_REPLY if referenced else MESSAGE_DEFAULT, "flags": flags, "components": components or [],
    }  # fmt: skip
    if guild_id is not None:
        data["guild_id"] = guild_id
    if referenced is not None:
        data["referenced_message"] = referenced
        data["message_reference"] = {"message_id": referenced["id"], "channel_id": referenced["channel_id"], "type": 0}
        if guild_id is not None:
            data["message_reference"]["guild_id"] = guild_id
    if nonce is not None:
        data["nonce"] = nonce
    return data


COMPONENT_ACTION_ROW = 1
COMPONENT_BUTTON = 2
BUTTON_STYLES = frozenset({1, 2, 3, 4})
"""Primary, secondary, success, danger: the styles a button with a ``custom_id`` may have (5 is a link)."""
INTERACTION_COMPONENT = 3


def components_problem(components: Any) -> str | None:
    """What Discord would refuse in a message's ``components`` (action rows of buttons), or None."""
    if not isinstance(components, list) or len(components) > 5:
        return "components must be a list of at most 5 action rows"
    seen: set[str] = set()
    for row in components:
        items = row.get("components") if isinstance(row, dict) else None
        if not isinstance(items, list) or row.get("type") != COMPONENT_ACTION_ROW or not 1 <= len(items) <= 5:
            return "each action row holds 1 to 5 components"
        for item in items:
            kind = (item.get("type"), item.get("style")) if isinstance(item, dict) else None
            if kind is None or kind[0] != COMPONENT_BUTTON or kind[1] not in BUTTON_STYLES:
                return "only buttons with a custom_id are emulated"
            custom_id, label = item.get("custom_id"), item.get("label")
            if not isinstance(custom_id, str) or not 1 <= len(custom_id) <= 100 or custom_id in seen:
                return "a button's custom_id must be 1-100 characters and unique in the message"
            if not isinstance(label, str) or len(label) > 80:
                return "a button's label must be at most 80 characters"
            seen.add(custom_id)
    return None


def custom_ids(message: dict[str, Any]) -> list[str]:
    """The ``custom_id`` of every button under a message."""
    return [item["custom_id"] for row in message.get("components") or () for item in row.get("components") or ()]


def member(user: dict[str, Any]) -> dict[str, Any]:
    """A server member as an interaction carries it."""
    return {
        "user": user, "roles": [], "joined_at": now_iso(), "deaf": False, "mute": False, "flags": 0,
        "pending": False, "permissions": "1071698660929", "nick": None, "avatar": None,
    }  # fmt: skip


def interaction(
    *,
    interaction_id: str,
    token: str,
    app_id: str,
    custom_id: str,
    message: dict[str, Any],
    channel: dict[str, Any],
    user: dict[str, Any],
    guild_id: str | None,
) -> dict[str, Any]:
    """INTERACTION_CREATE for a press of the button ``custom_id`` under ``message``: a server member's in a
    server channel or thread, a user's in a DM."""
    data: dict[str, Any] = {
        "id": interaction_id, "application_id": app_id, "type": INTERACTION_COMPONENT, "token": token, "version": 1,
        "data": {"custom_id": custom_id, "component_type": COMPONENT_BUTTON}, "channel": channel,
        "channel_id": channel["id"], "message": message, "app_permissions": "1071698660929", "locale": "en-US",
        "entitlements": [], "authorizing_integration_owners": {}, "attachment_size_limit": 10 * 1024 * 1024,
        "context": 0 if guild_id is not None else 1,
    }  # fmt: skip
    if guild_id is not None:
        data.update(guild_id=guild_id, guild_locale="en-US", member=member(user))
    else:
        data["user"] = user
    return data

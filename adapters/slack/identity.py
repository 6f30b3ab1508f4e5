"""Who the bot is in its workspace, learned once from ``auth.test``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class BotIdentity:
    user_id: str
    """The bot user's id (``U…``): what ``<@…>`` mentions of the bot carry."""
    bot_id: str | None
    """The bot's id (``B…``): what its own messages carry in ``bot_id``."""
    name: str
    team_id: str | None
    enterprise_id: str | None = None

    @classmethod
    def from_auth_test(cls, data: Mapping[str, Any]) -> BotIdentity:
        return cls(
            user_id=str(data["user_id"]),
            bot_id=data.get("bot_id"),
            name=str(data.get("user") or ""),
            team_id=data.get("team_id"),
            enterprise_id=data.get("enterprise_id"),
        )

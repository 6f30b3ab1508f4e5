"""Where discord.py connects: Discord itself, or a local emulator in tests.

discord.py keeps its REST base (``Route.BASE``) and gateway URL
(``DiscordWebSocket.DEFAULT_GATEWAY``) as class attributes, so they apply to the
whole process. That is acceptable because a process runs at most one Discord
adapter; the last adapter configured wins.
"""

from __future__ import annotations

import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

DISCORD_API = Route.BASE
DISCORD_GATEWAY = DiscordWebSocket.DEFAULT_GATEWAY


def point_at(api_base_url: str | None, gateway_url: str | None) -> None:
    """Use these endpoints (None: Discord's own) for every discord.py client in this process."""
    Route.BASE = (api_base_url or DISCORD_API).rstrip("/")
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway_url) if gateway_url else DISCORD_GATEWAY


"""Discord through discord.py 2: DMs, server channels and threads. See :mod:`adapters.discord.adapter`.

Importing this package imports discord.py, so the gateway loads it lazily
(``gateway.adapter_loader``) and commands that do not run the gateway never do.
"""

from adapters.discord.adapter import DiscordAdapter

__all__ = ("DiscordAdapter",)

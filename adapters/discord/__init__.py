"""Discord through discord.py 2: DMs, server channels and threads. See :mod:`adapters.discord.adapter`.

The adapter (and with it discord.py) is imported on first use of ``DiscordAdapter``:
the gateway loads it only when Discord is enabled, and the doctor's token check
(:mod:`.probe`) never does.
"""

__all__ = ("DiscordAdapter",)


def __getattr__(name: str) -> object:
    # Imported on first use, so the doctor's token check (``probe.py``) does not load discord.py.
    if name in __all__:
        from adapters.discord import adapter

        return getattr(adapter, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

"""Building the platform adapters a configuration enables.

Adapters are imported by name only when they are started, so commands that do
not run the gateway never pay for importing aiogram, discord.py or slack-bolt.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from adapters.base import Adapter, AdapterError
from config.loader import LoadedConfig
from gateway.commands import COMMAND_MENU

ADAPTER_CLASSES: dict[str, str] = {
    "telegram": "adapters.telegram:TelegramAdapter",
    "discord": "adapters.discord:DiscordAdapter",
    "slack": "adapters.slack:SlackAdapter",
}


def load_adapter(platform: str, loaded: LoadedConfig) -> Adapter:
    """Import and construct the adapter for ``platform`` from its config section, with the gateway's commands."""
    module_name, _, class_name = ADAPTER_CLASSES[platform].partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name != module_name:
            raise AdapterError(
                f"the {platform} adapter cannot load because {error.name!r} is not installed; "
                "reinstall Switchboard (make run does it)"
            ) from error
        raise AdapterError(
            f"this build of Switchboard has no {platform} adapter yet; "
            f"turn it off with platforms.{platform}.enabled: false"
        ) from error
    adapter_class = getattr(module, class_name)
    section = getattr(loaded.settings.platforms, platform)
    adapter: Adapter = adapter_class.from_config(section)
    adapter.commands = COMMAND_MENU
    return adapter


def load_adapters(platforms: Iterable[str], loaded: LoadedConfig) -> list[Adapter]:
    return [load_adapter(platform, loaded) for platform in platforms]

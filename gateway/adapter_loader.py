"""Building the platform adapters a configuration enables.

The adapter of platform ``name`` is the :class:`~adapters.contract.Adapter` subclass
that the package ``adapters.<name>`` exports in ``__all__``, built from the config
section ``platforms.<name>`` (what a platform's package must provide is said in
:mod:`adapters.contract.adapter`). Adapters are imported by name only when they are
needed, so commands that do not run the gateway never pay for importing aiogram,
discord.py or slack-bolt.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

from adapters.contract import Adapter, AdapterError
from config.loader import LoadedConfig
from gateway.commands.parsing import COMMAND_MENU


def adapter_class(platform: str) -> type[Adapter]:
    """Import ``adapters.<platform>`` and return the adapter class it exports for ``platform``."""
    module_name = f"adapters.{platform}"
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
    exported = (getattr(module, name, None) for name in getattr(module, "__all__", ()))
    found = [item for item in exported if isinstance(item, type) and issubclass(item, Adapter)
             and getattr(item, "platform", None) == platform]  # fmt: skip
    if len(found) != 1:
        raise AdapterError(f"{module_name} must export one Adapter subclass for {platform!r} in __all__, "
                           f"found {len(found)}")  # fmt: skip
    return found[0]


def load_adapter(platform: str, loaded: LoadedConfig) -> Adapter:
    """Import and construct the adapter for ``platform`` from its config section, with the gateway's commands."""
    section = loaded.settings.platforms.section(platform)
    if section is None:
        raise AdapterError(f"the configuration has no platforms.{platform} section for the {platform} adapter")
    adapter = adapter_class(platform).from_config(section)
    adapter.commands = COMMAND_MENU
    return adapter


def load_adapters(platforms: Iterable[str], loaded: LoadedConfig) -> list[Adapter]:
    return [load_adapter(platform, loaded) for platform in platforms]

"""Configuration: the home directory, ``config.yaml`` and the environment.

A leaf package: it imports nothing else from Switchboard.
"""

from config.errors import ConfigError
from config.loader import LoadedConfig, load_config
from config.models import Settings

__all__ = ["ConfigError", "LoadedConfig", "Settings", "load_config"]

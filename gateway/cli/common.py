"""What the CLI commands share: the --config option and loading the configuration."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from config import ConfigError, LoadedConfig, load_config

EXIT_CONFIG = 2


def add_config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="PATH",
        type=Path,
        default=None,
        help="the config file (default: config.yaml in $SWITCHBOARD_HOME, ~/.switchboard)",
    )


def load_config_or_exit(args: argparse.Namespace, *, create_home: bool = False) -> LoadedConfig:
    """Load the configuration; on a problem print every error and exit with status 2."""
    try:
        return load_config(getattr(args, "config", None), create_home=create_home)
    except ConfigError as error:
        print(error.render(), file=sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None

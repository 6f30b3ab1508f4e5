"""What the CLI commands share: the --config option, loading the configuration, printing what may hold secrets.

Loading the configuration gives its secrets to the process-wide redactor, and :func:`show` prints through
it: the commands' output (``check``, ``doctor``, ``backup``, ``restore``, configuration errors) is masked
like gateway.log.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

import structlog

from config import ConfigError, LoadedConfig
from gateway.operations.redaction import load_config_masked, redactor
from gateway.store_setup import open_configured_store
from storage import StorageEngine, StorageError

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
    """Load the configuration (its secrets go to the redactor); on a problem print every error and exit with status 2."""
    try:
        return load_config_masked(getattr(args, "config", None), create_home=create_home)
    except ConfigError as error:
        show(error.render(), sys.stderr)
        raise SystemExit(EXIT_CONFIG) from None


def show(text: str, stream: TextIO | None = None) -> None:
    """Print ``text`` (to stdout by default) with every secret masked."""
    print(redactor(text), file=stream or sys.stdout)


def run_with_store(args: argparse.Namespace, command: Callable[[StorageEngine], Awaitable[int]], *, name: str) -> int:
    """Open the configured database (creating it if needed), run ``command``, close it.

    Safe while the gateway runs: the database is in WAL mode and writes retry on contention.
    """
    loaded = load_config_or_exit(args)
    log_warnings_to_stderr()

    async def main() -> int:
        store = await open_configured_store(loaded)
        try:
            return await command(store)
        finally:
            await store.close()

    try:
        return asyncio.run(main())
    except StorageError as error:
        print(f"switchboard {name}: {error}", file=sys.stderr)
        return 1


def log_warnings_to_stderr() -> None:
    """Stdout carries the command's output (``--json`` must parse); log lines go to stderr, warnings up."""
    structlog.configure(
        processors=[structlog.processors.add_log_level, structlog.dev.ConsoleRenderer(colors=False)],
        logger_factory=lambda *_: structlog.PrintLogger(sys.stderr),  # today's sys.stderr, not the one at configure time
        wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING),
        cache_logger_on_first_use=False,
    )

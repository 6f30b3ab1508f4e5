"""``switchboard run``: start the gateway and serve until SIGINT/SIGTERM."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping, Sequence

from adapters.contract import AccessPolicy, Adapter
from config.loader import LoadedConfig
from gateway.operations.cli.common import add_config_option, load_config_or_exit
from gateway.operations.logs import configure_logging, shutdown_logging


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser("run", help="start the gateway", description="Start the gateway in the foreground.")
    add_config_option(parser)
    parser.set_defaults(handler=run_command)


def run_command(
    args: argparse.Namespace,
    extra_adapters: Sequence[Adapter] = (),
    extra_access: Mapping[str, AccessPolicy] | None = None,
) -> int:
    """The whole process: home, config, logging, the gateway, a clean exit status."""
    loaded = load_config_or_exit(args, create_home=True)
    from gateway import event_loop

    try:
        new_loop = event_loop.loop_factory(loaded.settings.gateway.event_loop)
    except RuntimeError as error:
        print(f"switchboard: {error}", file=sys.stderr)
        return 2
    setup_logging(loaded)
    # Imported here, not at the top: the runner pulls in storage and aiohttp, which
    # `switchboard --version` and `check` should not pay for.
    from gateway.runner import run_gateway

    try:
        return event_loop.run(run_gateway(loaded, extra_adapters, extra_access), new_loop)
    finally:
        shutdown_logging()


def setup_logging(loaded: LoadedConfig) -> None:
    cfg = loaded.settings.logging
    configure_logging(
        level=cfg.level,
        fmt=cfg.format,
        file=loaded.log_path,
        max_bytes=int(cfg.max_size_mb * 1024 * 1024),
        backups=cfg.backups,
        console=cfg.console,
        secrets=loaded.secrets(),
        libraries=cfg.libraries,
    )

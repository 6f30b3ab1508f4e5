"""The ``switchboard`` command line.

Each command lives in its own module with ``add_parser(subparsers)``. Command
modules are imported at start-up to build the parser, so they must keep their
imports light: platform libraries and model SDKs are imported only by what
actually runs the gateway (aiogram alone takes seconds to import here).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from gateway.cli import backup, check, doctor, pairing, run, sessions
from gateway.version import version

COMMAND_MODULES = (run, check, doctor, sessions, pairing, backup)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="switchboard",
        description="Switchboard: one LLM agent on Telegram, Discord and Slack.",
    )
    parser.add_argument("--version", action="version", version=f"switchboard {version()}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.add_parser(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return int(args.handler(args))

"""``switchboard doctor``: check everything the gateway needs, one line per check.

    switchboard doctor              config, home, database, disk, then each platform token, the model, the
                                    transcription endpoint (its model list only: no audio is sent) and each
                                    tool server (started, its tools listed, none called, stopped)
    switchboard doctor --offline    the local checks only

Each line reads ``ok``, ``FAIL`` or ``skip``, what was checked and, after a
failure, what to do. Exit status: 0 when nothing failed (skips are fine), 1
when a check failed. Secrets never appear in the output. Safe while the
gateway runs: the database is only read.
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from gateway.operations.cli.common import add_config_option, show

EXIT_FAILED = 1


def add_parser(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = subparsers.add_parser(
        "doctor",
        help="check config, permissions, database, disk, tokens and the model",
        description="Run every check an operator would do by hand and say how to fix what fails.",
    )
    parser.add_argument("--offline", action="store_true",
                        help="skip the platform, model, transcription and tool server checks (no network)")  # fmt: skip
    add_config_option(parser)
    parser.set_defaults(handler=doctor_command)


def doctor_command(args: argparse.Namespace) -> int:
    # Imported here, not at the top: aiohttp and the agent modules are not needed to build the parser.
    from gateway.operations.doctor.results import Status, render
    from gateway.operations.doctor.runner import run_checks

    checks = asyncio.run(run_checks(args.config, offline=args.offline))
    show(render(checks))
    sys.stdout.flush()
    return EXIT_FAILED if any(check.status is Status.FAIL for check in checks) else 0

"""The ``switchboard`` command line.

Each command lives in its own module with ``add_parser(subparsers)``. Command
modules are imported at start-up to build the parser, so they must keep their
imports light: platform libraries and model SDKs are imported only by what
actually runs the gateway (aiogram alone takes seconds to import here).
"""

from __future__ import annotations

import argparse
import os
import select
import sys
from collections.abc import Sequence

from gateway.operations.cli import backup, check, cluster, doctor, pairing, run, sessions, storage
from gateway.operations.version import version

COMMAND_MODULES = (run, check, doctor, sessions, pairing, backup, storage, cluster)

# The status when the reader of stdout went away (``switchboard sessions export ID | head -1``): 128 + SIGPIPE,
# what a shell reports for ``cat``, ``yes`` and other tools the signal ends. Not 0, because the output was cut
# short and a script with ``set -o pipefail`` should be able to tell; not 1, which means "the command failed".
EXIT_BROKEN_PIPE = 141


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
    try:
        status = int(args.handler(args))
        sys.stdout.flush()  # here, not at interpreter exit, so a closed pipe is caught below
    except BrokenPipeError:
        if not _stdout_reader_gone():
            raise  # some other pipe or socket broke: a real error, keep its traceback
        _stdout_to_devnull()
        return EXIT_BROKEN_PIPE
    return status


def _stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader has closed it (poll reports an error on it)."""
    try:
        poller = select.poll()
        poller.register(sys.stdout.fileno(), select.POLLOUT)
        events = poller.poll(0)
    except (AttributeError, OSError, ValueError):  # no descriptor, or no poll() here: stdout is the likely cause
        return True
    return any(mask & (select.POLLERR | select.POLLHUP) for _, mask in events)


def _stdout_to_devnull() -> None:
    """After a broken pipe: quietly drop whatever output is still buffered.

    Python flushes stdout once more on exit, which would raise the error again (and print
    "Exception ignored ... BrokenPipeError"); pointing the file descriptor at os.devnull lets
    that last flush succeed. This is the recipe from the Python docs (signal module, "Note on SIGPIPE").
    """
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by something without a descriptor (tests)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)

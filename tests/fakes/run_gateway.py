"""The real ``switchboard run``, with the in-process loopback adapter added.

Lifecycle tests start this as a subprocess (``python -m tests.fakes.run_gateway
--config PATH``) so signals, exit statuses and files are the real ones.
"""

from __future__ import annotations

import sys

from gateway.access import AccessPolicy
from gateway.cli import build_parser
from gateway.cli.run import run_command
from tests.fakes.adapter import BrokenAdapter, LoopbackAdapter


def main(argv: list[str]) -> int:
    broken = "--with-broken" in argv
    argv = [arg for arg in argv if arg != "--with-broken"]
    args = build_parser().parse_args(["run", *argv])
    extra = [LoopbackAdapter(), *([BrokenAdapter()] if broken else [])]
    return run_command(args, extra_adapters=extra, extra_access={"loopback": AccessPolicy(allow_all=True)})


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""The real ``switchboard run``, with test adapters added.

Tests start this as a subprocess (``python -m tests.fakes.run_gateway
--config PATH``) so signals, exit statuses and files are the real ones.
Options beside those of ``switchboard run``:

``--with-broken``
    also add an adapter that fails to start;
``--relay URL``
    add the relay adapter for the out-of-process platform at URL
    (:mod:`tests.fakes.relay_platform`) instead of the in-process loopback one;
``--relay-edits``
    with ``--relay``: the platform's messages can be edited, so replies are streamed.
"""

from __future__ import annotations

import sys

from adapters.contract import AccessPolicy, Adapter
from gateway.operations.cli import build_parser
from gateway.operations.cli.run import run_command
from tests.fakes.adapter import BrokenAdapter, LoopbackAdapter
from tests.fakes.relay_adapter import EditingRelayAdapter, RelayAdapter


def take_option(argv: list[str], name: str) -> tuple[str | None, list[str]]:
    """The value of ``name VALUE`` (or ``name=VALUE``) in ``argv``, and ``argv`` without it."""
    rest: list[str] = []
    value: str | None = None
    args = iter(argv)
    for arg in args:
        if arg == name:
            value = next(args, None)
        elif arg.startswith(name + "="):
            value = arg.split("=", 1)[1]
        else:
            rest.append(arg)
    return value, rest


def main(argv: list[str]) -> int:
    broken = "--with-broken" in argv
    edits = "--relay-edits" in argv
    argv = [arg for arg in argv if arg not in ("--with-broken", "--relay-edits")]
    relay_url, argv = take_option(argv, "--relay")
    args = build_parser().parse_args(["run", *argv])
    relay = EditingRelayAdapter if edits else RelayAdapter
    extra: list[Adapter] = [relay(relay_url)] if relay_url else [LoopbackAdapter()]
    if broken:
        extra.append(BrokenAdapter())
    access = {adapter.platform: AccessPolicy(allow_all=True) for adapter in extra}
    return run_command(args, extra_adapters=extra, extra_access=access)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

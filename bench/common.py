"""What every benchmark shares: the command line and the way results are printed.

Each benchmark prints human-readable figures as it goes and, with ``--json``,
one JSON object as the very last line of its output so scripts can read it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def parse_args(description: str, argv: Sequence[str] | None = None, *, loop: bool = False) -> argparse.Namespace:
    """``--quick`` and ``--json``; with ``loop``, ``--loop`` too (see :func:`add_loop_option`)."""
    parser = bench_parser(description)
    if loop:
        add_loop_option(parser)
    return known_args(parser, argv)


def bench_parser(description: str) -> argparse.ArgumentParser:
    """A benchmark's argument parser with the options every benchmark takes: ``--quick`` and ``--json``."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--quick", action="store_true", help="a smaller run that finishes within a minute")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    return parser


def known_args(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> argparse.Namespace:
    """The options ``parser`` knows; the others are left alone."""
    return parser.parse_known_args(argv)[0]  # `python -m bench` passes every benchmark the same arguments


def add_loop_option(parser: argparse.ArgumentParser) -> None:
    """``--loop auto|uvloop|asyncio``: the event loop to measure on, as ``gateway.event_loop``.

    The default is what ``switchboard run`` uses (uvloop where installed): a benchmark of the
    gateway or the store measures them on the loop they run on in production.
    """
    parser.add_argument(
        "--loop", default="auto", choices=("auto", "uvloop", "asyncio"),
        help="the event loop, as gateway.event_loop (default: auto, what `switchboard run` uses)",
    )  # fmt: skip


def loop_name() -> str:
    """The running event loop's library: ``uvloop`` or ``asyncio``."""
    return type(asyncio.get_running_loop()).__module__.split(".")[0]


def say(text: str) -> None:
    """A human-readable line (to stderr when --json keeps stdout for the result)."""
    print(text, flush=True)


def percentile(samples: Sequence[float], pct: float) -> float:
    """The pct-th percentile (0-100) by nearest rank; 0.0 for no samples."""
    if not samples:
        return 0.0
    ordered = sorted(samples)
    rank = max(0, min(len(ordered) - 1, round(pct / 100 * (len(ordered) - 1))))
    return ordered[rank]


class CpuSteal:
    """The share of CPU time the hypervisor gave to other machines while the benchmark ran (Linux).

    On a shared virtual machine this is what makes the same code measure 30 - 50% slower from one
    hour to the next; a figure taken while it was high says more about the host than the code.
    ``percent()`` is None where ``/proc/stat`` cannot be read.
    """

    def __init__(self, stat: Path = Path("/proc/stat")) -> None:
        self._stat = stat
        self._start = self._read()

    def _read(self) -> tuple[int, int] | None:
        """(steal, total) jiffies over all CPUs so far."""
        try:
            fields = self._stat.read_text(encoding="ascii").split("\n", 1)[0].split()
        except OSError:
            return None
        if not fields or fields[0] != "cpu" or len(fields) < 9:
            return None
        ticks = [int(value) for value in fields[1:9]]  # user nice system idle iowait irq softirq steal
        return ticks[7], sum(ticks)

    def percent(self) -> float | None:
        end = self._read()
        if self._start is None or end is None or end[1] <= self._start[1]:
            return None
        return 100 * (end[0] - self._start[0]) / (end[1] - self._start[1])


def emit(results: dict[str, Any], *, as_json: bool, targets: dict[str, str] | None = None) -> None:
    """Print the figures as a table, then (with --json) the JSON object last."""
    width = max((len(k) for k in results), default=0)
    for key, value in results.items():
        shown = f"{value:,.3f}" if isinstance(value, float) else str(value)
        note = f"   (target {targets[key]})" if targets and key in targets else ""
        print(f"  {key.ljust(width)}  {shown}{note}")
    if as_json:
        print(json.dumps(results, sort_keys=True))
    sys.stdout.flush()

"""Run every benchmark in turn: ``python -m bench [--quick] [--json]``.

Each benchmark module in this package that has a ``main(argv)`` is run with
the same arguments; the exit status is non-zero if any of them failed.
"""

from __future__ import annotations

import importlib
import pkgutil
import sys
import traceback
from pathlib import Path

SKIP = {"common", "__main__"}


def main(argv: list[str]) -> int:
    names = sorted(m.name for m in pkgutil.iter_modules([str(Path(__file__).parent)]) if m.name not in SKIP)
    failed = []
    for name in names:
        module = importlib.import_module(f"bench.{name}")
        runner = getattr(module, "main", None)
        if runner is None:
            continue
        print(f"== bench.{name}", flush=True)
        try:
            status = runner(argv) or 0
        except Exception:  # noqa: BLE001 - one broken benchmark must not hide the others' figures
            traceback.print_exc()
            status = 1
        if status:
            failed.append(name)
    if failed:
        print(f"benchmarks failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

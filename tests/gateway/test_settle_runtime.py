"""``settle_runtime``: the interpreter set up for a long-running gateway (in a child process, so
this test process keeps its own settings)."""

from __future__ import annotations

import json
import subprocess
import sys

from gateway.runner import GC_THRESHOLDS, SWITCH_INTERVAL


def test_start_up_objects_are_frozen_thresholds_raised_and_the_switch_interval_shortened() -> None:
    script = (
        "import gc, json, sys\n"
        "before = gc.get_threshold(), sys.getswitchinterval()\n"
        "from gateway.runner import settle_runtime\n"
        "settle_runtime()\n"
        "print(json.dumps({'before': before, 'after': (gc.get_threshold(), sys.getswitchinterval()),\n"
        "                  'frozen': gc.get_freeze_count()}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    figures = json.loads(done.stdout)
    (thresholds_before, interval_before), (thresholds, interval) = figures["before"], figures["after"]
    assert tuple(thresholds) == GC_THRESHOLDS != tuple(thresholds_before)
    assert interval == SWITCH_INTERVAL < interval_before
    assert figures["frozen"] > 10_000  # the modules and objects of a started process, at least

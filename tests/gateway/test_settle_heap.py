"""``settle_heap``: the garbage collector set up for a long-running gateway (in a child process, so
this test process keeps its own collector settings)."""

from __future__ import annotations

import json
import subprocess
import sys

from gateway.runner import GC_THRESHOLDS


def test_start_up_objects_are_frozen_and_thresholds_raised() -> None:
    script = (
        "import gc, json\n"
        "before = gc.get_threshold()\n"
        "from gateway.runner import settle_heap\n"
        "settle_heap()\n"
        "print(json.dumps({'before': before, 'after': gc.get_threshold(), 'frozen': gc.get_freeze_count()}))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60)
    figures = json.loads(done.stdout)
    assert tuple(figures["after"]) == GC_THRESHOLDS != tuple(figures["before"])
    assert figures["frozen"] > 10_000  # the modules and objects of a started process, at least

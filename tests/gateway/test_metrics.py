"""/metrics text: the gateway's lock-free figures expose exactly what prometheus-client's own metric objects would."""

from __future__ import annotations

import random

import pytest
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from gateway.operations.metrics import Count, Metrics


def exposed(text: bytes) -> list[str]:
    """The sample lines, without the ``_created`` timestamps only prometheus-client's objects add."""
    return [line for line in text.decode().splitlines() if "_created" not in line]


def test_counters_gauges_and_histograms_read_as_prometheus_client_writes_them() -> None:
    ours = Metrics()
    registry = CollectorRegistry()
    theirs_turns = Counter("switchboard_turns_total", "Agent turns, by outcome", ["platform", "outcome"], registry=registry)
    theirs_wait = Histogram(
        "switchboard_lane_wait_seconds", "Time a turn waited for a free slot",
        buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30), registry=registry,
    )  # fmt: skip
    theirs_running = Gauge("switchboard_turns_running", "Agent turns running now", registry=registry)
    rng = random.Random(7)
    waits = [0.001, 0.005, 30.0, 31.0, 0.0] + [rng.expovariate(20) for _ in range(200)]  # bounds themselves included
    for wait in waits:
        ours.lane_wait.observe(wait)
        theirs_wait.observe(wait)
    for platform, outcome in [("telegram", "answered")] * 3 + [("slack", "budget_exhausted")]:
        ours.turns.inc(platform, outcome)
        theirs_turns.labels(platform, outcome).inc()
    for _ in range(3):
        ours.turns_running.inc()
        theirs_running.inc()
    ours.turns_running.dec()
    theirs_running.dec()

    mine = exposed(ours.render())
    for line in exposed(generate_latest(registry)):
        assert line in mine


def test_tokens_cost_and_a_gauge_read_at_scrape_time() -> None:
    metrics = Metrics()
    metrics.add_tokens(10, 2, 300, 40)
    metrics.add_tokens(1, 1, 0, 0)
    metrics.cost.inc(amount=0.25)
    depth = [4]
    metrics.queue_depth.set_function(lambda: depth[0])
    depth[0] = 9
    value = metrics.registry.get_sample_value
    assert [value("switchboard_tokens_total", {"kind": k}) for k in ("input", "output", "cache_read", "cache_write")] == [
        11.0, 3.0, 300.0, 40.0,
    ]  # fmt: skip
    assert value("switchboard_cost_usd_total") == 0.25
    assert value("switchboard_queue_depth") == 9.0
    assert value("switchboard_inbound_total", {"platform": "telegram"}) is None  # nothing counted yet


def test_a_count_with_the_wrong_labels_is_refused() -> None:
    count = Count("x_total", "x", ["platform", "reason"])
    with pytest.raises(ValueError, match="platform"):
        count.inc("telegram")

"""Prometheus metrics, served as text at ``GET /metrics``.

Each gateway has its own registry, so tests (and several gateways in one
process) never collide on metric names.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.metrics import MetricWrapperBase
from prometheus_client.exposition import CONTENT_TYPE_LATEST

CONTENT_TYPE = CONTENT_TYPE_LATEST


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.inbound = Counter("switchboard_inbound_total", "Inbound messages accepted", ["platform"], registry=r)
        self.ignored = Counter(
            "switchboard_inbound_ignored_total", "Inbound messages not answered, by reason", ["platform", "reason"], registry=r
        )
        self.duplicates = Counter(
            "switchboard_inbound_duplicates_total", "Redelivered inbound events recognised and skipped", ["platform"], registry=r
        )
        self.turns = Counter("switchboard_turns_total", "Agent turns, by outcome", ["platform", "outcome"], registry=r)
        self.errors = Counter("switchboard_errors_total", "Errors, by kind", ["kind"], registry=r)
        self.tokens = Counter(
            "switchboard_tokens_total", "Model tokens: input, output, cache_read, cache_write", ["kind"], registry=r
        )
        self.token_counters = tuple(self.tokens.labels(kind) for kind in ("input", "output", "cache_read", "cache_write"))
        """The four token counters, looked up once (every model call adds to them)."""
        self.cost = Counter("switchboard_cost_usd_total", "Model cost in US dollars", registry=r)
        self.deliveries = Counter("switchboard_delivered_total", "Message chunks delivered", ["platform"], registry=r)
        self.delivery_retries = Counter(
            "switchboard_delivery_retries_total", "Delivery attempts that had to be retried", ["platform", "reason"], registry=r
        )
        self.lane_wait = Histogram(
            "switchboard_lane_wait_seconds",
            "Time a turn waited for a free slot",
            buckets=(0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30),
            registry=r,
        )
        self.turn_seconds = Histogram(
            "switchboard_turn_seconds", "Wall time of agent turns", buckets=(0.5, 1, 2, 5, 10, 30, 60, 120, 300), registry=r
        )
        self.turns_running = Gauge("switchboard_turns_running", "Agent turns running now", registry=r)
        self.queue_depth = Gauge("switchboard_queue_depth", "Messages waiting for their session's turn", registry=r)
        self._children: dict[tuple[int, tuple[str, ...]], MetricWrapperBase] = {}

    def child(self, metric: Counter, *labels: str) -> Counter:
        """``metric.labels(*labels)``, looked up once per label set: every turn counts a few of them.

        Label values come from small fixed sets (platforms, outcomes, reasons), so this stays small.
        """
        key = (id(metric), labels)
        found = self._children.get(key)
        if found is None:
            found = self._children[key] = metric.labels(*labels)
        return found  # type: ignore[return-value]

    def render(self) -> bytes:
        return generate_latest(self.registry)

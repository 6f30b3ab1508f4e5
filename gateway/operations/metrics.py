"""Prometheus metrics, served as text at ``GET /metrics``.

The figures are kept in plain attributes and dicts and handed to prometheus-client only when
/metrics is scraped, by a collector (prometheus-client's documented way to expose figures kept
elsewhere). Its own metric objects take a lock on every update, as they must for threads, and a
turn makes a dozen updates. Every update here happens on the event loop's thread, so none needs a lock.

Each gateway has its own registry, so tests (and several gateways in one process) never collide
on metric names.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator, Mapping, Sequence

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

CONTENT_TYPE = CONTENT_TYPE_LATEST
MAX_STREAKS = 1000
"""Sessions whose compaction streak is kept (the least recently compacted are forgotten first)."""


class Count:
    """A counter, one total per set of label values (``inc("telegram", "answered")``)."""

    __slots__ = ("documentation", "labelnames", "name", "totals")

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.totals: dict[tuple[str, ...], float] = {}

    def inc(self, *labels: str, amount: float = 1.0) -> None:
        if len(labels) != len(self.labelnames):
            raise ValueError(f"{self.name} takes the labels {self.labelnames}, got {labels}")
        self.totals[labels] = self.totals.get(labels, 0.0) + amount

    def family(self) -> Metric:
        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, total in self.totals.items():
            family.add_metric(labels, total)
        return family


class Level:
    """A gauge: moved with ``inc``/``dec``, or read from a function at scrape time."""

    __slots__ = ("documentation", "name", "read", "value")

    def __init__(self, name: str, documentation: str) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0.0
        self.read: Callable[[], float] | None = None

    def inc(self) -> None:
        self.value += 1

    def dec(self) -> None:
        self.value -= 1

    def set_function(self, read: Callable[[], float]) -> None:
        self.read = read

    def family(self) -> Metric:
        return GaugeMetricFamily(self.name, self.documentation, value=self.read() if self.read else self.value)


class Levels:
    """Gauges with labels, all read from one function when /metrics is scraped (label values -> value)."""

    __slots__ = ("documentation", "labelnames", "name", "read")

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str]) -> None:
        self.name = name
        self.documentation = documentation
        self.labelnames = tuple(labelnames)
        self.read: Callable[[], Mapping[tuple[str, ...], float]] = dict

    def set_function(self, read: Callable[[], Mapping[tuple[str, ...], float]]) -> None:
        self.read = read

    def family(self) -> Metric:
        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for labels, value in self.read().items():
            family.add_metric(labels, value)
        return family


class Timing:
    """A histogram of durations in seconds (``observe(0.25)``)."""

    __slots__ = ("bounds", "counts", "documentation", "name", "total")

    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        if list(buckets) != sorted(set(buckets)):
            raise ValueError(f"{name}: bucket bounds must be increasing, got {buckets}")
        self.name = name
        self.documentation = documentation
        self.bounds = tuple(float(b) for b in buckets)
        self.counts = [0] * (len(self.bounds) + 1)  # the last one: above every bound
        self.total = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, seconds)] += 1  # bucket "le" counts values <= its bound
        self.total += seconds

    def family(self) -> Metric:
        cumulative, buckets = 0, []
        for bound, count in zip((*map(floatToGoString, self.bounds), "+Inf"), self.counts):
            cumulative += count
            buckets.append((bound, cumulative))
        return HistogramMetricFamily(self.name, self.documentation, buckets=buckets, sum_value=self.total)


class Metrics(Collector):
    def __init__(self) -> None:
        self.inbound = Count("switchboard_inbound_total", "Inbound messages accepted", ["platform"])
        self.ignored = Count("switchboard_inbound_ignored_total", "Inbound messages not answered, by reason", ["platform", "reason"])
        self.settled = Count(
            "switchboard_inbound_settled_total",
            "Inbound messages finished: answered, command, ignored, stopped, given_up, too_old",
            ["platform", "outcome"],
        )
        self.duplicates = Count(
            "switchboard_inbound_duplicates_total", "Redelivered inbound events recognised and skipped", ["platform"]
        )
        self.turns = Count("switchboard_turns_total", "Agent turns, by outcome", ["platform", "outcome"])
        self.errors = Count("switchboard_errors_total", "Errors, by kind", ["kind"])
        self.tokens = Count("switchboard_tokens_total", "Model tokens: input, output, cache_read, cache_write", ["kind"])
        self.cost = Count("switchboard_cost_usd_total", "Model cost in US dollars")
        self.deliveries = Count("switchboard_delivered_total", "Message chunks delivered", ["platform"])
        self.delivery_retries = Count(
            "switchboard_delivery_retries_total", "Delivery attempts that had to be retried", ["platform", "reason"]
        )
        self.stream_updates = Count(
            "switchboard_stream_updates_total", "Sends and edits of replies shown while they are written", ["platform", "mode"]
        )
        self.media = Count(
            "switchboard_media_total",
            "Files users sent, by kind and what became of them: ok, transcribed, or the reason one was refused",
            ["platform", "kind", "outcome"],
        )
        self.turn_retries = Count(
            "switchboard_turn_retries_total", "Turns tried again after the database failed them, by fault", ["fault"]
        )
        self.lane_wait = Timing(
            "switchboard_lane_wait_seconds", "Time a turn waited for a free slot", (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30)
        )
        self.queue_wait = Timing(
            "switchboard_queue_wait_seconds",
            "Time the oldest message of a turn waited in its session's queue before the turn began",
            (0.001, 0.01, 0.1, 0.5, 1, 2, 5, 10, 30, 60, 300),
        )
        self.turn_seconds = Timing("switchboard_turn_seconds", "Wall time of agent turns", (0.5, 1, 2, 5, 10, 30, 60, 120, 300))
        self.turns_running = Level("switchboard_turns_running", "Agent turns running now")
        self.queue_depth = Level("switchboard_queue_depth", "Messages waiting for their session's turn")
        # Liveness, catch-up and alerts (issue 29): the gauges among them are read at scrape time.
        self.adapter_state = Levels(
            "switchboard_adapter_state", "1 for the state each adapter is in now (running, degraded, failed, ...)",
            ["platform", "state"],
        )
        self.seconds_since_inbound = Levels(
            "switchboard_adapter_seconds_since_inbound", "Seconds since the adapter last received a message", ["platform"]
        )
        self.chat_seconds_since_inbound = Levels(
            "switchboard_chat_seconds_since_inbound",
            "Seconds since a message last arrived from each chat listed in the config (since start where none did)",
            ["platform", "chat"],
        )
        self.probe_at = Levels(
            "switchboard_liveness_probe_timestamp_seconds", "Unix time of the adapter's last liveness probe", ["platform"]
        )
        self.probe_ok = Levels("switchboard_liveness_probe_ok", "1 when the adapter's last liveness probe passed", ["platform"])
        self.probes = Count("switchboard_liveness_probes_total", "Liveness probes, by result: ok, failed", ["platform", "result"])
        self.reconnects = Count(
            "switchboard_adapter_reconnects_total", "Reconnects the gateway asked for after a failed probe", ["platform"]
        )
        self.catch_up = Count(
            "switchboard_catchup_messages_total",
            "Messages read back after a reconnect: found, new (never received live), old (too old to answer)",
            ["platform", "kind"],
        )
        self.alerts = Count(
            "switchboard_alerts_total", "Operator alerts, by condition and event: fired, cleared, suppressed",
            ["condition", "event"],
        )
        self.delivery_failed = Count(
            "switchboard_delivery_failed_total", "Reply chunks given up after trying for undelivered_keep_hours", ["platform"]
        )
        self.compaction_failures = Count("switchboard_compaction_failures_total", "Compactions that failed")
        self.compaction_streaks: dict[str, int] = {}
        """Per session key: compactions failed in a row (0: the last one worked); read by the alerts."""
        self.disk_free_ratio = Level("switchboard_disk_free_ratio", "Share of the home's file system that is free (0-1)")
        self.cluster_replicas = Level("switchboard_cluster_replicas", "Replicas alive on the database (cluster mode)")
        self.cluster_lease_takeovers = Count(
            "switchboard_cluster_lease_takeovers_total",
            "Connection leases this replica took from a replica that died or expired, by platform", ["platform"],
        )
        self.cluster_claim_waits = Timing(
            "switchboard_cluster_claim_wait_seconds",
            "How long a message waited for its conversation's claim to come free on another replica",
            (0.01, 0.05, 0.1, 0.5, 1, 2, 5, 10, 30, 60),
        )
        self.cluster_claim_expiries = Count(
            "switchboard_cluster_claim_expiries_total",
            "Conversations this replica took over because the replica working on them died or expired",
        )
        self.cluster_reaped = Count(
            "switchboard_cluster_replicas_reaped_total", "Replicas this one found dead (expired) and removed"
        )
        self._all: tuple[Count | Level | Levels | Timing, ...] = tuple(
            m for m in vars(self).values() if isinstance(m, Count | Level | Levels | Timing)
        )
        self.registry = CollectorRegistry(auto_describe=True)
        self.registry.register(self)

    def add_tokens(self, input_tokens: int, output_tokens: int, cache_read: int, cache_write: int) -> None:
        """One model call's tokens (every call adds to all four)."""
        totals = self.tokens.totals
        for kind, n in (("input", input_tokens), ("output", output_tokens), ("cache_read", cache_read), ("cache_write", cache_write)):
            totals[(kind,)] = totals.get((kind,), 0.0) + n

    def compaction_done(self, session_key: str, *, failed: bool) -> None:
        """A compaction of the session ``session_key`` ended: counted when it failed, and its streak kept."""
        streaks = self.compaction_streaks
        streak = streaks.pop(session_key, 0)  # popped and put back: the dict stays in order of last use
        if failed:
            self.compaction_failures.inc()
        streaks[session_key] = streak + 1 if failed else 0
        if len(streaks) > MAX_STREAKS:
            del streaks[next(iter(streaks))]

    def collect(self) -> Iterator[Metric]:
        for metric in self._all:
            yield metric.family()

    def render(self) -> bytes:
        return generate_latest(self.registry)

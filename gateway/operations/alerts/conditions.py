"""The conditions an operator is alerted about, read from what the gateway already knows.

Each check, :class:`Watch` reads the adapters' states (``adapter.status()``), the counters of
:class:`Metrics`, the database's health and the home's disk, and says for each condition it can
judge whether it holds now (a :class:`Reading`). It keeps only what a condition needs to be judged
(when an adapter went bad, the model's failures of the last minutes); whether an alert was already
sent for it is the monitor's business (``gateway/operations/alerts/monitor.py``).

| condition | key | holds while | clears when |
|---|---|---|---|
| ``adapter_down`` | ``adapter_down:<platform>`` | degraded or failed for ``degraded_after_minutes`` | running again |
| ``replies_given_up`` | ``replies_given_up:<platform>`` | a reply chunk was given up | a later chunk is delivered |
| ``model_failures`` | ``model_failures`` | ``model_failures`` turns failed in ``model_failures_minutes`` | a turn is answered |
| ``database`` | ``database`` | reads or writes fail (``DatabaseHealth``) | they work again |
| ``disk_low`` | ``disk_low`` | free share below ``disk_free_percent`` | one point above it |
| ``compaction_failing`` | ``compaction_failing:<session key>`` | ``compaction_failures`` failures in a row | it succeeds |
"""

from __future__ import annotations

import shutil
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from adapters.contract import Adapter, AdapterState
from config.alerts import AlertsConfig
from gateway.operations.alerts import texts
from gateway.operations.database_health import DatabaseHealth
from gateway.operations.metrics import Metrics

Severity = Literal["critical", "warning", "info"]
BAD_STATES = frozenset({AdapterState.DEGRADED, AdapterState.FAILED})
MODEL_FAILED = frozenset({"model_unavailable"})
NOT_ANSWERED = frozenset({"model_unavailable", "error"})
DISK_HYSTERESIS = 0.01
"""A disk alert clears one percentage point above its threshold, so a disk hovering at it does not flap."""


class DiskUsage(NamedTuple):
    total: int
    used: int
    free: int


@dataclass(frozen=True, slots=True)
class Reading:
    """One condition as a check sees it: holding or not, and what to say if that is news."""

    key: str
    condition: str
    active: bool
    severity: Severity
    text: str
    platform: str | None = None


class Watch:
    def __init__(
        self,
        settings: AlertsConfig,
        *,
        adapters: Iterable[Adapter],
        metrics: Metrics,
        database: DatabaseHealth,
        home: Path,
        monotonic: Callable[[], float] = time.monotonic,
        disk_usage: Callable[[Path], DiskUsage] = shutil.disk_usage,  # type: ignore[assignment]
    ) -> None:
        self._settings = settings
        self._adapters = list(adapters)
        self._metrics = metrics
        self._database = database
        self._home = home
        self._monotonic = monotonic
        self.disk_usage = disk_usage
        self._bad_since: dict[str, float] = {}
        self._failed_seen = dict.fromkeys((a.platform for a in self._adapters), 0.0)
        self._failed_at_delivered: dict[str, float] = {}
        """Per platform with replies given up: the chunks delivered by then (more later: it cleared)."""
        self._model_failures: deque[tuple[float, float]] = deque()
        """(when, failed turns in total by then), one per check within the window."""
        self._failed_total = 0.0
        self._answered_then: float | None = None
        """Turns answered when the last failure was seen: one more, and the model works again."""

    def read(self, active: Mapping[str, object]) -> list[Reading]:
        """Every condition that can be judged now; ``active``: the keys alerted and not cleared."""
        return [
            *self._adapter_readings(),
            *self._delivery_readings(active),
            *self._model_readings(active),
            self._database_reading(),
            *self._disk_readings(),
            *self._compaction_readings(active),
        ]

    def _adapter_readings(self) -> Iterable[Reading]:
        now = self._monotonic()
        for adapter in self._adapters:
            status, platform = adapter.status(), adapter.platform
            key = f"adapter_down:{platform}"
            if status.state in BAD_STATES:
                since = self._bad_since.setdefault(platform, now)
                if now - since >= self._settings.degraded_after_minutes * 60:
                    yield Reading(key, "adapter_down", True, "critical",
                                  texts.adapter_down(platform, status.state.value, status.detail[:200], now - since),
                                  platform)  # fmt: skip
            else:
                self._bad_since.pop(platform, None)
                if status.state is AdapterState.RUNNING:  # stopping or starting: nothing to say yet
                    yield Reading(key, "adapter_down", False, "critical", texts.adapter_back(platform), platform)

    def _delivery_readings(self, active: Mapping[str, object]) -> Iterable[Reading]:
        failed, delivered = self._metrics.delivery_failed.totals, self._metrics.deliveries.totals
        for platform, seen in self._failed_seen.items():
            total = failed.get((platform,), 0.0)
            key = f"replies_given_up:{platform}"
            if key in active:  # alerted before a restart: the next chunk delivered clears it
                self._failed_at_delivered.setdefault(platform, delivered.get((platform,), 0.0))
            if total > seen:
                self._failed_seen[platform] = total
                self._failed_at_delivered[platform] = delivered.get((platform,), 0.0)
                yield Reading(key, "replies_given_up", True, "warning",
                              texts.replies_given_up(platform, round(total - seen)), platform)  # fmt: skip
            elif delivered.get((platform,), 0.0) > self._failed_at_delivered.get(platform, float("inf")):
                del self._failed_at_delivered[platform]
                yield Reading(key, "replies_given_up", False, "warning", texts.replies_back(platform), platform)

    def _model_readings(self, active: Mapping[str, object]) -> Iterable[Reading]:
        turns = self._metrics.turns.totals
        failed = sum(n for (_, outcome), n in turns.items() if outcome in MODEL_FAILED)
        answered = sum(n for (_, outcome), n in turns.items() if outcome not in NOT_ANSWERED)
        now, window = self._monotonic(), self._settings.model_failures_minutes * 60
        history = self._model_failures
        history.append((now, failed))
        while len(history) > 1 and history[1][0] <= now - window:
            history.popleft()  # the first one kept is the last one at or before the window's start
        recent = failed - (history[0][1] if history[0][0] <= now - window else 0.0)
        if failed > self._failed_total or ("model_failures" in active and self._answered_then is None):
            self._failed_total, self._answered_then = failed, answered  # (or alerted before a restart)
        answered_since = self._answered_then is not None and answered > self._answered_then
        if recent >= self._settings.model_failures and not answered_since:
            yield Reading("model_failures", "model_failures", True, "critical",
                          texts.model_failures(round(recent), self._settings.model_failures_minutes))  # fmt: skip
        elif answered_since:
            yield Reading("model_failures", "model_failures", False, "critical", texts.model_back())

    def _database_reading(self) -> Reading:
        problem = self._database.problem()
        if problem is None:
            return Reading("database", "database", False, "critical", texts.database_back())
        reason, hint = problem
        return Reading("database", "database", True, "critical", texts.database(reason, hint, self._database.waiting))

    def _disk_readings(self) -> Iterable[Reading]:
        threshold = self._settings.disk_free_percent / 100
        ratio, free = self.free_space()
        if threshold <= 0 or ratio is None:
            return
        if ratio < threshold:
            yield Reading("disk_low", "disk_low", True, "warning",
                          texts.disk_low(str(self._home), ratio, free, self._settings.disk_free_percent))  # fmt: skip
        elif ratio >= threshold + DISK_HYSTERESIS:
            yield Reading("disk_low", "disk_low", False, "warning", texts.disk_back(str(self._home), ratio))

    def free_space(self) -> tuple[float | None, int]:
        """The share of the home's file system that is free (None: it cannot be read), and the free bytes."""
        try:
            usage = self.disk_usage(self._home)
        except OSError:
            return None, 0
        return (usage.free / usage.total if usage.total else None), usage.free

    def _compaction_readings(self, active: Mapping[str, object]) -> Iterable[Reading]:
        streaks = self._metrics.compaction_streaks
        for session_key, count in streaks.items():
            if count >= self._settings.compaction_failures:
                yield Reading(f"compaction_failing:{session_key}", "compaction_failing", True, "warning",
                              texts.compaction_failing(session_key, count), session_key.partition(":")[0])  # fmt: skip
        for key in active:
            condition, _, session_key = key.partition(":")
            if condition == "compaction_failing" and streaks.get(session_key) == 0:  # 0: it succeeded since
                yield Reading(key, "compaction_failing", False, "warning", texts.compaction_back(session_key),
                              session_key.partition(":")[0])  # fmt: skip

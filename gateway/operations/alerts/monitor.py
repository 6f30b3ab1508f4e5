"""The alert monitor: every check, conditions that began are alerted once and those that ended once more.

:class:`Alerts` runs :meth:`Alerts.check` every ``alerts.check_every`` seconds. A condition that holds
and was not alerted yet fires (``alert.fired`` in the log, ``switchboard_alerts_total{event="fired"}``);
one alerted that no longer holds clears ("recovered", ``alert.cleared``). Each goes to every
destination in ``alerts.chats`` and ``alerts.webhooks`` that the hour's budget allows
(``destinations.HourlyBudget``; held back: ``alert.held_back``, ``event="suppressed"``), and held-back
alerts are summed up in the next one, or on their own once the hour has room again.

What is alerted, the budget's hour and what it held back are kept in ``alerts.json`` in the home
(0600, replaced whole on every change), not in the database, which may be what fails: after a
restart a condition that still holds is not alerted again, one that ended meanwhile clears, and
the alerts queued in the outbox go out as replies do.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import structlog

from adapters.contract import Adapter
from config.loader import LoadedConfig
from gateway.delivery.outbox import Delivery, Spawn
from gateway.operations.alerts import texts
from gateway.operations.alerts.conditions import Reading, Watch
from gateway.operations.alerts.destinations import Alert, Destination, Dispatch, HourlyBudget
from gateway.operations.alerts.webhook import WEBHOOK_PLATFORM, WebhookSender, webhook_id
from gateway.operations.database_health import DatabaseHealth
from gateway.operations.metrics import Metrics
from storage import StorageEngine

log = structlog.get_logger("gateway.alerts")

STATE_FILE = "alerts.json"


class Alerts:
    def __init__(
        self,
        loaded: LoadedConfig,
        *,
        store: StorageEngine,
        delivery: Delivery,
        adapters: Sequence[Adapter],
        metrics: Metrics,
        database: DatabaseHealth,
        spawn: Spawn,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``clock``: the wall clock alerts are dated and the hourly budget counted by."""
        settings = self.settings = loaded.settings.alerts
        self.sender = WebhookSender(settings.webhooks)
        delivery.add_sender(self.sender)
        self.clock = clock
        self._check_every = settings.check_every
        self._metrics = metrics
        self.watch = Watch(settings, adapters=adapters, metrics=metrics, database=database, home=loaded.home)
        metrics.disk_free_ratio.set_function(lambda: _or_nan(self.watch.free_space()[0]))
        self.dispatch = Dispatch(store, delivery, self.sender, spawn)
        self.destinations = destinations(loaded, {adapter.platform for adapter in adapters})
        self._path = loaded.home / STATE_FILE
        state = _read(self._path)
        self.active: dict[str, dict[str, Any]] = state.get("active", {})
        self._sequence: int = state.get("sequence", 0)
        self.budget = HourlyBudget(settings.max_per_hour, state.get("sent", {}), state.get("held", {}))
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._run(), name="alerts")

    async def stop(self) -> None:
        """Stop checking; alerts not yet delivered stay in the outbox for the next start."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        await self.sender.close()

    async def _run(self) -> None:
        while True:
            try:
                await self.check()
            except Exception as error:  # noqa: BLE001 - a failing check must not end the checks
                log.error("alerts.check_failed", error=f"{type(error).__name__}: {error}", exc_info=error)
            await asyncio.sleep(self._check_every)

    async def check(self) -> list[Alert]:
        """Judge every condition once; returns the alerts raised (fired or cleared)."""
        async with self._lock:
            raised = [alert for reading in self.watch.read(self.active) if (alert := self._news(reading))]
            for alert in raised:
                await self._send(alert)
            await self._sum_up_held()
            if raised:
                self._save()
            return raised

    def _news(self, reading: Reading) -> Alert | None:
        """The alert ``reading`` makes, if it is news (a condition beginning or ending)."""
        now = self.clock()
        episode = self.active.get(reading.key)
        if reading.active and episode is None:
            self._sequence += 1
            episode_id = f"{reading.key}@{int(now)}.{self._sequence}"
            self.active[reading.key] = {"id": episode_id, "since": now}
            log.warning("alert.fired", condition=reading.condition, key=reading.key, severity=reading.severity)
            self._metrics.alerts.inc(reading.condition, "fired")
            return Alert(f"{episode_id}:fired", reading.condition, "fired", reading.severity, reading.platform,
                         reading.text, now)  # fmt: skip
        if not reading.active and episode is not None:
            del self.active[reading.key]
            since = float(episode["since"])
            log.info("alert.cleared", condition=reading.condition, key=reading.key, after_s=round(now - since))
            self._metrics.alerts.inc(reading.condition, "cleared")
            text = f"{reading.text} (Alerted at {texts.clock_time(since)}, {texts.minutes(now - since)} ago.)"
            return Alert(f"{episode['id']}:cleared", reading.condition, "cleared", reading.severity,
                         reading.platform, text, now)  # fmt: skip
        return None

    async def _send(self, alert: Alert) -> None:
        for destination in self.destinations:
            held = self.budget.admit(destination.name, alert.condition, alert.at)
            if held is None:
                log.warning("alert.held_back", alert=alert.id, destination=destination.shown,
                            max_per_hour=self.settings.max_per_hour)  # fmt: skip
                self._metrics.alerts.inc(alert.condition, "suppressed")
                continue
            await self.dispatch.send(alert, destination, held, self.settings.max_per_hour)

    async def _sum_up_held(self) -> None:
        """Alerts held back at a destination whose hour has room again are summed up in one of their own."""
        now = self.clock()
        for destination in self.destinations:
            held = self.budget.held.get(destination.name)
            if not held or not self.budget.room(destination.name, now):
                continue
            self._sequence += 1
            text = texts.held_back(held, self.settings.max_per_hour)
            alert = Alert(f"held_back@{int(now)}.{self._sequence}:fired", "held_back", "fired", "info", None, text, now)
            self.budget.admit(destination.name, alert.condition, now)
            await self.dispatch.send(alert, destination, {}, self.settings.max_per_hour)
            self._save()

    def _save(self) -> None:
        state = {"sequence": self._sequence, "active": self.active, **self.budget.to_dict()}
        partial = self._path.with_suffix(".json.partial")
        try:
            partial.write_text(json.dumps(state), encoding="utf-8")
            partial.chmod(0o600)
            os.replace(partial, self._path)
        except OSError as error:
            log.warning("alerts.state_unsaved", path=str(self._path), error=str(error),
                        hint="alerts still go out; after a restart, a condition that still holds is alerted again")  # fmt: skip


def destinations(loaded: LoadedConfig, connected: set[str]) -> list[Destination]:
    """The configured destinations; a chat on a platform that is not running is left out, with a warning."""
    settings = loaded.settings.alerts
    found = []
    for target in settings.chats:
        platform, _, chat_id = (part.strip() for part in target.partition(":"))
        if platform in connected:
            found.append(Destination(platform, chat_id))
        else:
            log.warning("alerts.chat_skipped", chat=target,
                        reason=f"{platform} is not connected (turned off, or its credentials are missing)")  # fmt: skip
    found += [Destination(WEBHOOK_PLATFORM, webhook_id(webhook)) for webhook in settings.webhooks]
    return found


def _read(path: Path) -> dict[str, Any]:
    """What the last run left in ``alerts.json`` (nothing when there is no such file or it cannot be read)."""
    try:
        state = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as error:
        state = None
        log.warning("alerts.state_unreadable", path=str(path), error=str(error),
                    hint="conditions that still hold are alerted again")  # fmt: skip
    return state if isinstance(state, dict) else {}


def _or_nan(ratio: float | None) -> float:
    """The gauge's value: NaN when the disk cannot be read (0 would read as a full disk)."""
    return float("nan") if ratio is None else ratio

"""The gateway process: adapters in, storage underneath, a health endpoint beside.

:class:`Gateway` owns the running parts and the order in which they start and
stop. Shutdown follows one sequence: stop intake on every adapter, let running
work finish within the drain timeout, close adapters, stop /health, close
storage.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import structlog

from adapters.base import Adapter, AdapterState
from config.loader import LoadedConfig
from gateway.events import InboundMessage
from gateway.health import HealthServer
from gateway.tasks import TaskTracker
from gateway.version import version

if TYPE_CHECKING:
    from storage import Store

log = structlog.get_logger("gateway")


class Gateway:
    def __init__(self, loaded: LoadedConfig, store: Store, adapters: Sequence[Adapter]) -> None:
        self._loaded = loaded
        self._store = store
        self._adapters = list(adapters)
        self._tasks = TaskTracker()
        self._health = HealthServer(self.snapshot, loaded.settings.health.host, loaded.settings.health.port)
        self._started_at = time.monotonic()
        self._stopping = False
        self._inbound = 0

    @property
    def health_url(self) -> str | None:
        return self._health.url

    @property
    def adapters(self) -> list[Adapter]:
        return list(self._adapters)

    async def start(self) -> int:
        """Start every adapter (one failing never stops the others) and /health. Returns how many run."""
        await self._health.start()
        running = 0
        for adapter in self._adapters:
            if await self._start_adapter(adapter):
                running += 1
        log.info("gateway.started", version=version(), adapters=running, of=len(self._adapters))
        return running

    async def _start_adapter(self, adapter: Adapter) -> bool:
        try:
            await adapter.start(self.intake)
        except Exception as error:  # noqa: BLE001 - one platform's failure must not stop the others
            log.error("adapter.start_failed", platform=adapter.platform, error=str(error), exc_info=error)
            return False
        log.info("adapter.started", platform=adapter.platform, detail=adapter.status().detail)
        return True

    async def intake(self, message: InboundMessage) -> None:
        """Accept one inbound message from an adapter."""
        self._inbound += 1
        log.info(
            "inbound.accepted",
            platform=message.platform,
            chat=message.chat_id,
            user=message.user_id,
            event_id=message.event_id,
            chars=len(message.text),
        )

    async def snapshot(self) -> dict[str, Any]:
        """The /health body."""
        now = time.time()
        adapters = {adapter.platform: adapter.status().to_dict(now) for adapter in self._adapters}
        database_ok = await self._database_ok()
        running = [a for a in adapters.values() if a["state"] == AdapterState.RUNNING.value]
        healthy = database_ok and not self._stopping and len(running) == len(adapters) and bool(adapters)
        return {
            "status": "stopping" if self._stopping else ("ok" if healthy else "degraded"),
            "version": version(),
            "uptime_s": round(time.monotonic() - self._started_at, 1),
            "adapters": adapters,
            "database": {"ok": database_ok},
            "inbound_total": self._inbound,
            "tasks_running": len(self._tasks),
        }

    async def _database_ok(self) -> bool:
        try:
            return await asyncio.wait_for(self._store.ping(), timeout=2.0)
        except Exception:  # noqa: BLE001 - /health reports the failure instead of raising
            return False

    async def shutdown(self) -> None:
        """Stop intake, drain running work, close adapters, /health and storage, in that order."""
        if self._stopping:
            return
        self._stopping = True
        drain_timeout = self._loaded.settings.gateway.drain_timeout
        log.info("shutdown.begin", tasks_running=len(self._tasks), drain_timeout=drain_timeout)
        for adapter in self._adapters:
            await self._quietly(adapter.stop_intake(), "adapter.stop_intake_failed", adapter.platform)
        drained = await self._tasks.drain(drain_timeout)
        if drained.cancelled:
            log.warning("shutdown.drain_timeout", finished=drained.finished, cancelled=drained.cancelled)
        for adapter in self._adapters:
            await self._quietly(adapter.close(), "adapter.close_failed", adapter.platform)
        await self._health.stop()
        await self._store.close()
        log.info("storage.closed", path=str(self._loaded.db_path))
        log.info("shutdown.done", finished=drained.finished, cancelled=drained.cancelled)

    @staticmethod
    async def _quietly(step: Any, event: str, platform: str) -> None:
        try:
            await step
        except Exception as error:  # noqa: BLE001 - shutdown continues past a failing adapter
            log.error(event, platform=platform, error=str(error), exc_info=error)

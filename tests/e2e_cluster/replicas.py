"""Several real ``switchboard run`` processes on one database, with Telegram, for the cluster tests and
``bench.cluster``.

Each replica has a home of its own (config, logs) and the same ``storage.url``; with ``cluster`` on, a
distinct ``cluster.replica_id`` and short timings, so a dead replica's work moves within seconds. Its model
key is ``test-<name>``: the fake model server's records say which replica asked (:meth:`Cluster.asker`); it calls
Telegram under ``<api>/<name>/``, so the emulator's records say which replica called (``Call.via``).
Telegram runs in polling mode (one replica holds the poller's lease) or in webhook mode, where every
replica listens on a port of its own behind a :class:`RoundRobinBalancer` that Telegram's webhook names.
Nothing here is timed: waits only stop a hang.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import asyncpg

from tests.adapters.telegram.test_webhook import free_port
from tests.e2e_cluster.balancer import RoundRobinBalancer
from tests.fakes.model_server import ModelServer
from tests.fakes.model_server.records import RequestRecord
from tests.fakes.telegram_api import TelegramAPI
from tests.gateway.conftest import write_config
from tests.gateway.processes import REPO, clean_env, terminate
from tests.waiting import eventually

HANG_GUARD = 120.0
WEBHOOK_SECRET = "cluster-webhook-secret-0123456789abcdef"
WEBHOOK_PATH = "/telegram"
QUICK_TIMINGS = {"heartbeat_every": 0.5, "expire_after": 3.0, "scan_every": 0.5}
"""Cluster timings that keep a test short: a dead replica is noticed within about 3.5 s."""
TELEGRAM_LEASE = "SELECT l.name, r.name, r.expires_at > now() FROM leases l JOIN replicas r ON r.id = l.holder " \
                 "WHERE l.name LIKE 'telegram:%'"  # fmt: skip


class ReplicaProcess:
    """One ``switchboard run`` (``python -m gateway.operations.cli run``) on its own home."""

    def __init__(self, name: str, home: Path, config: Path) -> None:
        self.name = name
        self.home = home
        self.config = config
        self.log = home / "logs" / "gateway.log"
        self.process: subprocess.Popen[bytes] | None = None
        self.exit_code: int | None = None
        self.killed_at: float | None = None
        """time.monotonic() once :meth:`kill` saw the process gone (the emulator stamps its calls with this clock)."""
        self.offset = 0
        """Where this run's lines begin in the log (a replica started again on its home appends to it)."""

    def start(self) -> None:
        self.offset = self.log.stat().st_size if self.log.exists() else 0
        self.exit_code = None
        with (self.home / "stderr.txt").open("ab") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "gateway.operations.cli", "run", "--config", str(self.config)],
                cwd=REPO, env=clean_env(self.home), stdout=subprocess.DEVNULL, stderr=stderr,
            )  # fmt: skip

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def log_lines(self, needle: str) -> list[str]:
        if not self.log.exists():
            return []
        with self.log.open("rb") as log:
            log.seek(self.offset)
            lines = log.read().decode("utf-8", errors="replace").splitlines()
        return [line for line in lines if needle in line]

    def stderr_tail(self) -> str:
        path = self.home / "stderr.txt"
        return path.read_text("utf-8", errors="replace")[-3000:] if path.exists() else ""

    async def wait_log(self, needle: str) -> str:
        """The first log line holding ``needle``; fails, with the process's stderr, if it exits first."""
        assert self.process is not None
        try:
            found = await eventually(lambda: self.log_lines(needle), f"{self.name}: a log line with {needle!r}",
                                     timeout=HANG_GUARD, process=self.process)  # fmt: skip
        except AssertionError as failure:
            raise AssertionError(f"{failure}\n--- {self.name} stderr:\n{self.stderr_tail()}") from None
        return found[0]

    async def health(self) -> dict[str, Any]:
        """``GET /health`` (its body also when it answers 503)."""
        url = (await self.wait_log("health.listening")).split("url=")[1].split()[0]

        def get() -> dict[str, Any]:
            try:
                with urllib.request.urlopen(url, timeout=10) as response:
                    return json.loads(response.read())
            except urllib.error.HTTPError as error:
                return json.loads(error.read())

        return await asyncio.to_thread(get)

    async def kill(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.exit_code = await asyncio.to_thread(self.process.wait)
        self.killed_at = time.monotonic()

    async def stop(self) -> int:
        """SIGTERM (the replica drains and leaves the cluster), then its exit status."""
        assert self.process is not None
        if self.process.poll() is None:
            self.exit_code = await terminate(self.process, limit=HANG_GUARD)
        else:
            self.exit_code = self.process.returncode
        return self.exit_code


class Cluster:
    """``size`` replicas of one bot on ``storage_url`` (None: SQLite in the home, one replica, cluster off)."""

    def __init__(
        self, base: Path, telegram: TelegramAPI, model: ModelServer, storage_url: str | None, *, size: int = 3,
        mode: str = "webhook", cluster: bool = True, timings: dict[str, float] = QUICK_TIMINGS,
        gateway: dict[str, Any] | None = None,
    ) -> None:  # fmt: skip
        assert storage_url is not None or (size == 1 and not cluster), "several replicas need one PostgreSQL"
        self.base, self.telegram, self.model, self.storage_url = base, telegram, model, storage_url
        self.size, self.mode, self.cluster, self.timings = size, mode, cluster, timings
        self.gateway = gateway or {}
        self.replicas: list[ReplicaProcess] = []
        self.balancer: RoundRobinBalancer | None = None

    # -- life -----------------------------------------------------------------------------------

    async def start(self) -> None:
        """Start every replica and wait until each has started (and, in webhook mode, listens)."""
        ports = [free_port() for _ in range(self.size)]
        if self.mode == "webhook":
            self.balancer = RoundRobinBalancer([f"http://127.0.0.1:{port}" for port in ports])
            await self.balancer.start()
        for index, port in enumerate(ports, 1):
            name = f"r{index}"
            home = self.base / name
            replica = ReplicaProcess(name, home, write_config(home, self.model, self._overrides(name, port)))
            self.replicas.append(replica)
            replica.start()
        for replica in self.replicas:
            await replica.wait_log("gateway.started")

    async def stop(self) -> dict[str, int]:
        """SIGTERM every replica still running; each one's exit status (a killed one's too)."""
        codes = {}
        for replica in self.replicas:
            if replica.process is not None:
                codes[replica.name] = await replica.stop() if replica.running else replica.process.returncode
        if self.balancer is not None:
            await self.balancer.stop()
        return codes

    def _overrides(self, name: str, port: int) -> dict[str, Any]:
        telegram: dict[str, Any] = {"token": self.telegram.token, "api_base_url": f"{self.telegram.base_url}/{name}",
                                    "allow_all": True, "require_mention": False}  # fmt: skip
        if self.mode == "webhook":
            assert self.balancer is not None
            telegram |= {"mode": "webhook", "webhook_url": self.balancer.base_url + WEBHOOK_PATH,
                         "webhook_secret": WEBHOOK_SECRET,
                         "webhook_listen": {"host": "127.0.0.1", "port": port}}  # fmt: skip
        else:
            telegram |= {"poll_timeout": 2}  # a new owner's first long poll comes back quickly
        overrides: dict[str, Any] = {
            "model": {"api_key": f"test-{name}"},
            "platforms": {"telegram": telegram, "discord": {"enabled": False}, "slack": {"enabled": False}},
            "gateway": {"streaming": "off", **self.gateway},
        }
        if self.storage_url is not None:
            overrides["storage"] = {"url": self.storage_url}
        if self.cluster:
            overrides["cluster"] = {"enabled": True, "replica_id": name, **self.timings}
        return overrides

    # -- looking in -----------------------------------------------------------------------------

    def named(self, name: str) -> ReplicaProcess:
        return next(replica for replica in self.replicas if replica.name == name)

    def running(self) -> list[ReplicaProcess]:
        return [replica for replica in self.replicas if replica.running]

    def asker(self, record: RequestRecord) -> ReplicaProcess:
        """The replica that made a model request (each has its own model key)."""
        key = record.headers.get("x-api-key") or record.headers.get("authorization", "").removeprefix("Bearer ")
        return self.named(key.removeprefix("test-"))

    async def poller(self) -> str | None:
        """The replica holding Telegram's polling lease while alive, by the database (None: nobody now)."""
        assert self.storage_url is not None
        conn = await asyncpg.connect(self.storage_url)
        try:
            rows = await conn.fetch(TELEGRAM_LEASE)
        finally:
            await conn.close()
        holders = [name for _, name, alive in rows if alive]
        return holders[0] if holders else None

    def failed(self, replica: ReplicaProcess) -> str:
        return f"{replica.name} exited with {replica.exit_code}\n{replica.stderr_tail()}"


def polling_now(telegram: TelegramAPI, since: float) -> list[float]:
    """When getUpdates was called after ``since`` (the emulator's monotonic clock)."""
    return [call.at for call in telegram.calls_to("getUpdates") if call.at > since]


def stopped_with(process: subprocess.Popen[bytes] | None, sig: int = signal.SIGKILL) -> bool:
    return process is not None and process.returncode == -sig

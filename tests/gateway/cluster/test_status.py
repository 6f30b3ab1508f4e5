"""Operating several replicas: what /health, /metrics and `switchboard cluster status` say about the cluster.

Real gateways (the Gateway object with the loopback platform) in cluster mode on one real PostgreSQL
database, and the real CLI process reading it. A lease and a session claim are taken through the
replica's own cluster storage, as the connection and claim code does. A replica is made to miss its
heartbeats by refusing writes to its row in the database (a trigger), not by touching its code.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from tests.fakes.postgres_server import PostgresServer
from tests.gateway.conftest import GatewayFactory, Running, write_config
from tests.gateway.engines import refused
from tests.gateway.processes import switchboard
from tests.fakes.model_server import ModelServer
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(300)
# Each test asks for postgres_dsn before start_gateway, so that its database is dropped only after the gateways
# on it have stopped (fixtures are torn down in the reverse order they were set up).

FAST = {"heartbeat_every": 0.3, "expire_after": 1.5, "scan_every": 0.2}
LEASE = "telegram:poll:4242"
SESSION = "loopback:chat-7"


def cluster(url: str, name: str) -> dict[str, Any]:
    return {"storage": {"url": url}, "cluster": {"enabled": True, "replica_id": name, **FAST}}


async def get(running: Running, path: str = "/health") -> tuple[int, Any]:
    url = running.gateway.health_url
    assert url is not None
    async with aiohttp.ClientSession() as http, http.get(url.replace("/health", path)) as response:
        return response.status, (await response.json() if path == "/health" else await response.text())


async def two_replicas(start_gateway: GatewayFactory, tmp_path: Path, url: str) -> tuple[Running, Running]:
    """Replicas r-a and r-b on ``url``; r-a holds a lease and claims a session."""
    a = await start_gateway(cluster(url, "r-a"), home=tmp_path / "a")
    b = await start_gateway(cluster(url, "r-b"), home=tmp_path / "b")
    assert a.gateway.replica is not None and b.gateway.replica is not None
    assert await a.gateway.replica.storage.lease_acquire(LEASE) is not None
    assert await a.gateway.replica.storage.claim_session(SESSION) is not None
    return a, b


async def test_health_and_metrics_show_this_replica_what_it_holds_and_the_replicas_seen(
    postgres_dsn: str, start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    a, b = await two_replicas(start_gateway, tmp_path, postgres_dsn)
    status, health = await get(a)
    assert status == 200 and health["status"] == "ok", health
    entry = health["cluster"]
    assert entry["replica"] == "r-a" and entry["incarnation"] == a.gateway.replica.id and not entry["expired"]
    (lease,) = entry["leases"]
    assert lease["name"] == LEASE and lease["fence"] > 0 and lease["since_s"] >= 0
    assert entry["sessions_claimed"] == 1 and entry["replicas_alive"] == 2
    seen = {replica["name"]: replica for replica in entry["replicas"]}
    assert set(seen) == {"r-a", "r-b"}
    assert seen["r-a"]["leases"] == [LEASE] and seen["r-b"]["leases"] == []
    assert seen["r-b"]["id"] == b.gateway.replica.id and seen["r-b"]["alive"] and seen["r-b"]["seen_s_ago"] < 60
    assert all(replica["pid"] > 0 and replica["host"] for replica in seen.values())

    status, other = await get(b)
    assert other["cluster"]["replica"] == "r-b" and other["cluster"]["leases"] == []
    assert other["cluster"]["sessions_claimed"] == 0

    _, page = await get(a, "/metrics")
    assert "switchboard_cluster_replicas 2.0" in page, [line for line in page.splitlines() if "cluster" in line]
    assert a.gateway.delivery.budget.share == 2, "each of the two sends half of a platform's overall rate"


async def test_without_cluster_mode_health_has_no_cluster_entry(start_gateway: GatewayFactory) -> None:
    running = await start_gateway()
    status, health = await get(running)
    assert status == 200 and "cluster" not in health


async def test_a_replica_that_missed_its_heartbeats_reports_degraded_until_it_joins_again(
    postgres_dsn: str, start_gateway: GatewayFactory, tmp_path: Path
) -> None:
    running = await start_gateway(cluster(postgres_dsn, "r-a"), home=tmp_path / "a")
    replica = running.gateway.replica
    assert replica is not None
    first = replica.id
    assert (await get(running))[1]["status"] == "ok"
    async with refused(postgres_dsn, "replicas", "INSERT OR UPDATE"):  # its beats, and its joining again, fail
        await eventually(lambda: replica.expiries > 0, "the replica to expire")
        status, health = await get(running)
        assert status == 503 and health["status"] == "degraded", health
        entry = health["cluster"]
        assert entry["expired"] and entry["replica"] == "r-a", entry
        assert "expired" in entry["detail"] and "missed its heartbeats" in entry["detail"], entry
    await eventually(lambda: replica.alive(), "the replica to join again")

    async def ok_again() -> bool:
        status, health = await get(running)
        return status == 200 and health["cluster"]["incarnation"] not in (None, first)

    await eventually(ok_again, "/health to be ok under a new incarnation")


# --- switchboard cluster status -------------------------------------------------------------------


def cli_home(tmp_path: Path, model_server: ModelServer, storage: dict[str, Any] | None = None) -> Path:
    home = tmp_path / "cli"
    write_config(home, model_server, {"storage": storage} if storage else None)
    return home


def status(home: Path, *args: str) -> Any:
    return switchboard("cluster", "status", "--config", str(home / "config.yaml"), *args, home=home)


async def test_cluster_status_prints_the_replicas_the_leases_and_the_sessions_claimed(
    postgres_dsn: str, start_gateway: GatewayFactory, tmp_path: Path, model_server: ModelServer
) -> None:
    a, b = await two_replicas(start_gateway, tmp_path, postgres_dsn)
    home = cli_home(tmp_path, model_server, {"url": postgres_dsn})
    assert a.gateway.replica is not None and b.gateway.replica is not None

    done = await asyncio.to_thread(status, home, "--verbose")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    for replica in (a.gateway.replica, b.gateway.replica):
        (row,) = [line for line in lines if line.startswith(replica.name + " ")]
        assert replica.id in row and " alive " in row, row
    (lease,) = [line for line in lines if line.startswith(LEASE)]
    assert " r-a " in lease and " in " in lease, lease  # its holder, and when the holder's expiry comes
    assert "Sessions claimed: 1 (r-a: 1)" in done.stdout
    assert any(line.startswith(SESSION) and " r-a " in line for line in lines), done.stdout
    assert "cluster.enabled is off" in done.stderr  # the CLI's own configuration is not a replica's

    done = await asyncio.to_thread(status, home, "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    assert {r["name"] for r in document["replicas"]} == {"r-a", "r-b"} and all(r["alive"] for r in document["replicas"])
    (held,) = [lease for lease in document["leases"] if lease["name"] == LEASE]
    assert held["holder"] == a.gateway.replica.id and held["holder_name"] == "r-a" and held["fence"] > 0
    assert held["holder_expires_in_s"] > 0
    assert document["sessions_claimed"] == {"total": 1, "complete": True, "by_replica": {a.gateway.replica.id: 1}}
    assert "sessions" not in document  # only with --verbose
    assert len({r["config"] for r in document["replicas"]}) == 1 and "WARNING" not in lines[0]


async def test_cluster_status_warns_when_the_replicas_run_different_configurations(
    postgres_dsn: str, start_gateway: GatewayFactory, tmp_path: Path, model_server: ModelServer
) -> None:
    await start_gateway(cluster(postgres_dsn, "r-a"), home=tmp_path / "a")
    await start_gateway(cluster(postgres_dsn, "r-b") | {"sessions": {"debounce_ms": 400}}, home=tmp_path / "b")
    home = cli_home(tmp_path, model_server, {"url": postgres_dsn})

    async def warned() -> str | None:
        done = await asyncio.to_thread(status, home)
        return done.stdout if "different configurations" in done.stdout else None

    shown = await eventually(warned, "the replicas' beats to carry their configurations")
    assert "WARNING" in shown and "r-a:" in shown and "r-b:" in shown


async def test_cluster_status_on_a_sqlite_home_says_it_needs_postgresql(tmp_path: Path, model_server: ModelServer) -> None:
    done = await asyncio.to_thread(status, cli_home(tmp_path, model_server))
    assert done.returncode == 2 and done.stdout == ""
    assert "cluster status needs storage.url: postgresql://..." in done.stderr and "Traceback" not in done.stderr


async def test_cluster_status_says_so_when_the_server_does_not_answer(
    tmp_path: Path, model_server: ModelServer, postgres: PostgresServer, postgres_dsn: str
) -> None:
    home = cli_home(tmp_path, model_server, {"url": postgres_dsn})
    await asyncio.to_thread(postgres.pause)
    try:
        done = await asyncio.to_thread(status, home)
    finally:
        await asyncio.to_thread(postgres.resume)
    assert done.returncode == 1 and done.stdout == "" and "Traceback" not in done.stderr, done.stderr
    assert done.stderr.startswith("switchboard cluster status: ") and "pg_isready" in done.stderr, done.stderr

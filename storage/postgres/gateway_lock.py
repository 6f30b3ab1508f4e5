"""Who may run on a PostgreSQL database: one gateway alone, or several replicas in cluster mode, never both.

Two gateways on one database that do not know of each other would each answer every message (the inbox
takes an event once, but both would deliver each other's outbox and run each other's turns). On SQLite a
lock file beside the database keeps the second out (``gateway/operations/instance_lock.py``); here a
gateway holds the advisory lock :data:`GATEWAY_LOCK` on a connection of its own, outside the pool, for as
long as it runs:

* a gateway with ``cluster.enabled`` off holds it **exclusively** (``pg_try_advisory_lock``): a second
  gateway, and any replica, is refused;
* a replica in cluster mode holds it **shared** (``pg_try_advisory_lock_shared``): any number of replicas
  hold it together (sharing the work is the point, ``storage/cluster.py``), and a gateway without cluster
  mode is refused while one of them does, as a replica is while such a gateway holds it exclusively.

The server drops the lock with the connection: at a clean stop, and when the process dies (the server sees
the connection close; across a network, within its TCP keepalive). A server restart drops it too while the
gateway carries on; for replicas that is covered by a second look: a gateway without cluster mode is also
refused while the ``replicas`` table has a row whose expiry is ahead (a replica that still beats). The
connection carries the holder's name (``application_name``: role, pid and host), which a refusal quotes.
"""

from __future__ import annotations

import os
import socket
from typing import Any, Final

import asyncpg

from storage.errors import DatabaseInUseError

__all__ = ["GATEWAY_LOCK", "hold_gateway_lock"]

GATEWAY_LOCK: Final = 0x5357_4244_4741_5445  # "SWBDGATE"
"""The advisory lock key a running gateway holds (advisory locks are per database)."""

_HOLDERS: Final = """
    SELECT a.application_name, coalesce(host(a.client_addr), 'a local socket') AS address, a.backend_start
    FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid
    ORDER BY a.backend_start
"""

_LIVE_REPLICAS: Final = """
    SELECT name, host, pid FROM replicas WHERE expires_at > now() ORDER BY started_at
"""

_NOT_ALONE: Final = (
    "A gateway with cluster.enabled off needs the database alone: stop the replicas, or run this gateway as one "
    "of them (cluster.enabled: true, the same configuration, a cluster.replica_id of its own)"
)
_NOT_SHARED: Final = (
    "It has the database alone (cluster.enabled is off in its configuration): stop it and start it again with "
    "cluster.enabled: true, or point storage.url at another database"
)


async def hold_gateway_lock(
    url: str, *, where: str, timeout: float, connect: dict[str, Any], shared: bool = False
) -> asyncpg.Connection:
    """The connection holding the database's gateway lock (close it to let go), exclusively or ``shared`` (a replica
    in cluster mode); ``DatabaseInUseError`` naming the holder(s) when the database is taken the other way."""
    role = "replica" if shared else "gateway"
    name = f"switchboard {role} pid {os.getpid()} on {socket.gethostname()}"[:63]
    settings = {**connect.get("server_settings", {}), "application_name": name}
    conn = await asyncpg.connect(url, timeout=timeout, **{**connect, "server_settings": settings})
    try:
        take = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
        if await conn.fetchval(f"SELECT {take}($1)", GATEWAY_LOCK):
            replicas = [] if shared else await conn.fetch(_LIVE_REPLICAS)
            if not replicas:
                return conn
            refusal = _replicas_alive(where, replicas)
        else:
            refusal = _taken(where, await conn.fetch(_HOLDERS, GATEWAY_LOCK), shared=shared)
    except BaseException:
        await conn.close()
        raise
    await conn.close()
    raise refusal


def _taken(where: str, holders: list[asyncpg.Record], *, shared: bool) -> DatabaseInUseError:
    """The refusal when the lock could not be had: who holds it, and what to do."""
    who = ", ".join(
        f"{h['application_name'] or 'a client'} (from {h['address']}, connected {h['backend_start']:%Y-%m-%d %H:%M:%S %Z})"
        for h in holders
    ) or "another gateway"
    if shared:  # a replica met a gateway that has the database alone
        return DatabaseInUseError(where, who, what_to_do=_NOT_SHARED)
    if any((h["application_name"] or "").startswith("switchboard replica") for h in holders):
        return DatabaseInUseError(where, who, what_to_do=_NOT_ALONE, what="replicas in cluster mode run")
    return DatabaseInUseError(where, who)


def _replicas_alive(where: str, replicas: list[asyncpg.Record]) -> DatabaseInUseError:
    who = ", ".join(f"replica {r['name']} (pid {r['pid']} on {r['host']})" for r in replicas)
    return DatabaseInUseError(where, who, what_to_do=_NOT_ALONE, what="replicas in cluster mode run")

"""One gateway per PostgreSQL database, as one per SQLite file: a session advisory lock held while it runs.

Two gateways on one database would each answer every message (the inbox takes an event once,
but both would deliver each other's outbox and run each other's turns). On SQLite a lock file
beside the database keeps the second out (``gateway/operations/instance_lock.py``); here the
gateway holds ``pg_try_advisory_lock`` on a connection of its own, outside the pool, for as long
as it runs. The server drops the lock with the connection: at a clean stop, and when the process
dies (the server sees the connection close; across a network, within its TCP keepalive). The
connection carries the holder's name (``application_name``: pid and host), which the refusal
quotes. Running several gateways on one database on purpose is the next issue's (leases); until
then the second is refused.
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

_HOLDER: Final = """
    SELECT a.application_name, coalesce(host(a.client_addr), 'a local socket') AS address, a.backend_start
    FROM pg_locks AS l JOIN pg_stat_activity AS a ON a.pid = l.pid
    WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = ($1::bigint >> 32)::oid AND l.objid = ($1::bigint & 4294967295)::oid
"""


async def hold_gateway_lock(url: str, *, where: str, timeout: float, connect: dict[str, Any]) -> asyncpg.Connection:
    """The connection holding the database's gateway lock (close it to let go); ``DatabaseInUseError`` naming the
    holder when another gateway has it."""
    name = f"switchboard gateway pid {os.getpid()} on {socket.gethostname()}"[:63]
    settings = {**connect.get("server_settings", {}), "application_name": name}
    conn = await asyncpg.connect(url, timeout=timeout, **{**connect, "server_settings": settings})
    try:
        if await conn.fetchval("SELECT pg_try_advisory_lock($1)", GATEWAY_LOCK):
            return conn
        holder = await conn.fetchrow(_HOLDER, GATEWAY_LOCK)
    except BaseException:
        await conn.close()
        raise
    await conn.close()
    who = (f"{holder['application_name'] or 'a client'} (from {holder['address']}, connected "
           f"{holder['backend_start']:%Y-%m-%d %H:%M:%S %Z})" if holder is not None else "another gateway")  # fmt: skip
    raise DatabaseInUseError(where, who)

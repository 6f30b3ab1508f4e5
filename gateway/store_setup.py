"""The store the configuration names (``storage.url``): opened in one place for the gateway, the CLI and the
benchmarks, so each gets the engine the operator chose, SQLite or PostgreSQL, with its settings.
"""

from __future__ import annotations

from typing import Any

from config.loader import LoadedConfig
from storage import StorageEngine, open_store


async def open_configured_store(
    loaded: LoadedConfig, *, wait_for_server: bool = False, exclusive: bool = False, **options: Any
) -> StorageEngine:
    """Open (and migrate) the configured database; ``close()`` it after. A SQLite file's directory is made
    (0700) if missing; ``options`` go to the engine's own ``open``. ``wait_for_server``: a PostgreSQL server that does
    not answer yet is waited for (logged, up to the retry policy's outage), as ``switchboard run`` does. ``exclusive``:
    a PostgreSQL database is held for this gateway alone (a SQLite file is, by ``InstanceLock``), or, in cluster mode
    (``cluster.enabled``), shared with the other replicas and no gateway that would have it alone."""
    storage = loaded.settings.storage
    if loaded.engine == "sqlite":
        loaded.db_path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        return await open_store(loaded.db_path, synchronous=storage.synchronous, **options)
    replica = exclusive and loaded.settings.cluster.enabled
    return await open_store(
        loaded.database_url, password=storage.password, wait_for_server=wait_for_server,
        exclusive=exclusive and not replica, shared=replica, **options,
    )  # fmt: skip


def database_name(loaded: LoadedConfig) -> str:
    """The database as messages name it: the SQLite file's path, or the PostgreSQL URL (no password in it)."""
    return loaded.database_url

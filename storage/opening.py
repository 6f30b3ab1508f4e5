"""Opening the store a configuration names: ``await open_store(url_or_path)``, the one place the engine is chosen.

A path (or ``sqlite:///path``) opens the SQLite ``Store``; ``postgresql://user@host:port/database`` (or
``postgres://``) opens ``PostgresStore``, with ``password`` given apart so the URL, which is logged and
shown, never holds it. Both come back as a ``StorageEngine``: the caller needs nothing engine-specific.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from storage.contract import StorageEngine
from storage.postgres.store import PostgresStore
from storage.store import Store

__all__ = ["engine_of", "open_store"]

POSTGRESQL_SCHEMES = ("postgresql://", "postgres://")


def engine_of(url_or_path: Path | str) -> str:
    """``"postgresql"`` for a PostgreSQL URL, ``"sqlite"`` for anything else (a path, ``sqlite:///path``)."""
    return "postgresql" if str(url_or_path).lower().startswith(POSTGRESQL_SCHEMES) else "sqlite"


async def open_store(
    url_or_path: Path | str, *, synchronous: str = "normal", password: str | None = None, **options: Any
) -> StorageEngine:
    """Open (and migrate) the store at ``url_or_path``; ``close()`` it after. ``synchronous`` is SQLite's,
    ``password`` PostgreSQL's (None: ``PGPASSWORD``, or none); ``options`` go to the engine's own ``open``."""
    if engine_of(url_or_path) == "postgresql":
        if password is not None:
            options["password"] = password
        return await PostgresStore.open(str(url_or_path), **options)
    path = str(url_or_path)
    if path.lower().startswith("sqlite:///"):
        path = path[len("sqlite:///"):]
    return await Store.open(Path(path), synchronous=synchronous, **options)

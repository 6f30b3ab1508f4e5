"""Opening the database file and its connections, with the pragmas each role needs.

Three roles share one WAL database:

* ``WRITER``: the single connection all writes go through (``storage/engine/writer.py``),
  a plain sqlite3 connection in its own thread (``storage/engine/worker.py``).
  Automatic checkpoints are off on it so no commit ever pays for one, and
  so is ``journal_size_limit``: the commit after a WAL restart would pay for
  cutting the file back (``storage/engine/maintenance.py`` does that instead).
* ``READER``: read-only connections for queries; WAL lets them run while a
  write is in progress.
* ``MAINTENANCE``: runs passive checkpoints beside the writer.

Readers and maintenance are aiosqlite connections. Every connection runs in
its own thread, so none of this blocks the event loop.
"""

from __future__ import annotations

import enum
import os
import sqlite3
from pathlib import Path
from typing import Final

import aiosqlite

__all__ = ["BUSY_TIMEOUT_MS", "SYNCHRONOUS_MODES", "Role", "connect", "create_private_file", "open_sqlite"]

SYNCHRONOUS_MODES: Final = frozenset({"normal", "full"})
BUSY_TIMEOUT_MS: Final = 50
"""SQLite's own wait on a lock, per attempt; longer waits are the writer's backoff."""
_READER_CACHE_KIB: Final = 32 * 1024
_READ_MMAP_BYTES: Final = 256 * 1024 * 1024
"""Readers read the database file through a memory map: a page not in the connection's own cache
is then a memory access instead of a ``pread`` and a copy (what a first load of a long history
mostly is; ``bench.storage``'s ``history_load_cold_us`` shows it). Maintenance connections, which
work beside the writer while it appends, read as usual."""


class Role(enum.Enum):
    WRITER = "writer"
    READER = "reader"
    MAINTENANCE = "maintenance"


def create_private_file(path: Path) -> None:
    """Create the database file 0600 (SQLite gives -wal and -shm the same mode)."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)
    os.chmod(path, 0o600)  # in case the umask was stricter than usual about our own bits


def _pragmas(role: Role, synchronous: str) -> list[str]:
    common = [
        f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}",
        "PRAGMA foreign_keys = ON",
        f"PRAGMA synchronous = {synchronous.upper()}",
        "PRAGMA temp_store = MEMORY",
    ]
    if role is Role.WRITER:
        return [
            "PRAGMA journal_mode = WAL",
            *common,
            "PRAGMA wal_autocheckpoint = 0",
            "PRAGMA cache_size = -16384",
        ]
    if role is Role.READER:
        return [
            *common, f"PRAGMA cache_size = -{_READER_CACHE_KIB}", "PRAGMA query_only = ON",
            f"PRAGMA mmap_size = {_READ_MMAP_BYTES}",
        ]  # fmt: skip
    return [*common, "PRAGMA wal_autocheckpoint = 0"]


def _check_synchronous(synchronous: str) -> None:
    if synchronous not in SYNCHRONOUS_MODES:
        raise ValueError(f"synchronous must be one of {sorted(SYNCHRONOUS_MODES)}, not {synchronous!r}")


def open_sqlite(path: Path, role: Role, *, synchronous: str = "normal") -> sqlite3.Connection:
    """A plain connection in autocommit mode (transactions are explicit), pragmas applied."""
    _check_synchronous(synchronous)
    conn = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        for pragma in _pragmas(role, synchronous):
            conn.execute(pragma)
        if role is Role.WRITER:
            mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
            if str(mode).lower() != "wal":
                raise sqlite3.OperationalError(f"could not switch {path} to WAL mode (got {mode!r})")
    except BaseException:
        conn.close()
        raise
    return conn


async def connect(path: Path, role: Role, *, synchronous: str = "normal") -> aiosqlite.Connection:
    """An aiosqlite connection in autocommit mode, pragmas applied (readers and maintenance)."""
    _check_synchronous(synchronous)
    conn = await aiosqlite.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        for pragma in _pragmas(role, synchronous):
            await conn.execute(pragma)
    except BaseException:
        await conn.close()
        raise
    return conn

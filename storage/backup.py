"""Copying the database while the gateway writes to it, checking a copy, and putting one back.

    copy = backup_database(home / "state.db", target / "state.db")   # safe while the gateway runs
    check = check_database(home / "state.db")                        # quick_check + schema version
    restore_database(target / "state.db", home / "state.db", keep=home / "state.db.before-restore")

``backup_database`` uses SQLite's online backup API: every page is copied
inside one read transaction, so the copy is the database as of one commit,
even with a writer busy in another process (in WAL mode a reader never blocks
the writer). The copy is a single self-contained file (rollback journal mode,
no ``-wal`` beside it), created 0600 and checked with ``PRAGMA integrity_check``.

These functions are synchronous and may take a while on a big file: call them
from a command line tool, or through ``asyncio.to_thread`` from async code.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import struct
import sys
import time
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from storage.errors import BackupError, Fault, SchemaError, fault_of
from storage.files import fsync_path
from storage.migrations import read_version
from storage.schema import LATEST

__all__ = ["DatabaseCheck", "backup_database", "check_database", "database_in_use", "restore_database"]

_BUSY_TIMEOUT_MS: Final = 5_000
"""How long a backup or check waits on a lock (only WAL recovery holds one long)."""
_PROGRESS_STEPS: Final = 10_000
"""SQLite virtual machine steps between two looks at a check's ``budget`` (well under a millisecond)."""
_SHM_DMS_BYTE: Final = 128
"""Every connection to a WAL database holds a read lock on this byte of ``-shm``
(the "DMS" lock of SQLite's WAL file format); it tells whether anyone has the file open."""


@dataclass(frozen=True, slots=True)
class DatabaseCheck:
    """What ``check_database`` found. ``problems`` is empty when the file is sound."""

    path: Path
    problems: tuple[str, ...]
    schema_version: int | None
    """The version recorded in the file; None when it could not be read."""
    size: int
    """Bytes of the main file (the ``-wal`` is not counted)."""
    complete: bool = True
    """False when ``budget`` ran out before the check had read the whole file (no problem found so far)."""
    fault: Fault | None = None
    """What kind of trouble the problems are: ``DAMAGED`` when the file is, another fault when it could
    not be read at all (``READ_ONLY`` for a file or directory that cannot be opened, say)."""

    @property
    def ok(self) -> bool:
        return not self.problems


def check_database(path: Path, *, thorough: bool = False, budget: float | None = None) -> DatabaseCheck:
    """``PRAGMA quick_check`` (or ``integrity_check`` with ``thorough``) and the schema version.

    Read-only and safe while the gateway runs. A missing file is a problem, not
    an exception: nothing is created. ``budget``: seconds the check may take; past
    them SQLite is interrupted and the result says ``complete=False`` (a check
    reads every page, about a second per few hundred MB on a common disk).
    """
    if not path.is_file():
        return DatabaseCheck(path, (f"no database file at {path}",), None, 0)
    problems: list[str] = []
    version: int | None = None
    complete = True
    fault: Fault | None = None
    try:
        conn = _open(path)
        try:
            pragma = "integrity_check" if thorough else "quick_check"
            if budget is not None:
                deadline = time.monotonic() + budget
                conn.set_progress_handler(lambda: time.monotonic() > deadline, _PROGRESS_STEPS)
            try:
                rows = [str(row[0]) for row in conn.execute(f"PRAGMA {pragma}")]
            except sqlite3.OperationalError as error:
                if budget is None or "interrupted" not in str(error):
                    raise
                rows, complete = ["ok"], False
            if rows != ["ok"]:
                problems += rows[:5] + ([f"... and {len(rows) - 5} more"] if len(rows) > 5 else [])
                fault = Fault.DAMAGED
            conn.set_progress_handler(None, 0)
            version = read_version(conn)
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        problems.append(str(error))
        fault = fault_of(error) or Fault.DAMAGED
    except SchemaError as error:
        problems.append(str(error))
    if version is not None and version > LATEST:
        problems.append(f"schema version {version} is newer than this build's {LATEST}")
    return DatabaseCheck(path, tuple(problems), version, path.stat().st_size, complete, fault)


def backup_database(source: Path, target: Path) -> DatabaseCheck:
    """Copy ``source`` to a new file ``target`` (0600) as of one commit; verify the copy.

    Raises ``BackupError`` if ``source`` is missing, ``target`` exists, or the
    copy fails its integrity check (the bad copy is removed).
    """
    if not source.is_file():
        raise BackupError(f"there is no database at {source}: nothing to back up")
    _create_private(target)
    try:
        _copy_pages(source, target)
        with closing(sqlite3.connect(target, isolation_level=None)) as copy:
            copy.execute("PRAGMA journal_mode = DELETE")
        fsync_path(target)
        check = check_database(target, thorough=True)
        if not check.ok:
            raise BackupError(f"the copy of {source} failed its integrity check: {'; '.join(check.problems)}")
    except BaseException:
        target.unlink(missing_ok=True)
        raise
    return check


def restore_database(backup: Path, live: Path, *, keep: Path) -> DatabaseCheck:
    """Put ``backup`` in place of ``live``; the current ``live`` (with its ``-wal``) is renamed to ``keep``.

    Refuses (``BackupError``) while any process has ``live`` open, when ``keep``
    already exists, or when the backup is damaged or from a newer build. A
    damaged ``live`` is no obstacle: it is renamed, never read.
    """
    check = check_database(backup, thorough=True)
    if not check.ok:
        raise BackupError(f"the backup {backup} cannot be restored: {'; '.join(check.problems)}")
    if database_in_use(live):
        raise BackupError(f"{live} is open in another process (a running gateway?): stop it, then restore")
    if live.exists():
        if keep.exists():
            raise BackupError(f"{keep} is left from an earlier restore: move it elsewhere, then restore again")
        # Nobody has the file open, so renaming is safe; the -wal travels with it (SQLite
        # finds it by name) and the -shm index is rebuilt from the WAL when keep is opened.
        os.replace(live, keep)
        if Path(f"{live}-wal").exists():
            os.replace(f"{live}-wal", f"{keep}-wal")
        Path(f"{live}-shm").unlink(missing_ok=True)
    return backup_database(backup, live)


def database_in_use(path: Path) -> bool:
    """True while another process has the WAL database ``path`` open (the gateway, ``switchboard sessions``).

    Asks the kernel whether anyone holds a lock on the DMS byte of ``-shm``
    (locks this process holds itself are not reported). No ``-shm``: nobody has it open.
    """
    try:
        fd = os.open(f"{path}-shm", os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        answer = fcntl.fcntl(fd, fcntl.F_GETLK, _flock(fcntl.F_WRLCK, _SHM_DMS_BYTE))
    finally:
        os.close(fd)
    return _lock_type(answer) != fcntl.F_UNLCK


# -- plumbing --------------------------------------------------------------------------------------

# struct flock differs by platform: Linux puts the type first, the BSDs (macOS) put it last.
_FLOCK_LINUX = "hhqqi"
_FLOCK_BSD = "qqihh"


def _flock(kind: int, offset: int) -> bytes:
    if sys.platform.startswith("linux"):
        return struct.pack(_FLOCK_LINUX, kind, os.SEEK_SET, offset, 1, 0)
    return struct.pack(_FLOCK_BSD, offset, 1, 0, kind, os.SEEK_SET)


def _lock_type(raw: bytes) -> int:
    if sys.platform.startswith("linux"):
        return int(struct.unpack(_FLOCK_LINUX, raw)[0])
    return int(struct.unpack(_FLOCK_BSD, raw)[3])


def _open(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, timeout=_BUSY_TIMEOUT_MS / 1000)
    conn.execute("PRAGMA query_only = ON")
    return conn


def _copy_pages(source: Path, target: Path) -> None:
    """All pages in one step: one read transaction, so the copy is one consistent snapshot."""
    try:
        with closing(_open(source)) as src, closing(sqlite3.connect(target, isolation_level=None)) as dst:
            src.backup(dst, pages=-1)
    except sqlite3.Error as error:
        raise BackupError(f"copying {source} to {target} failed: {error}") from error


def _create_private(path: Path) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise BackupError(f"{path} already exists: choose another place, or move it away first") from None
    os.close(fd)
    os.chmod(path, 0o600)

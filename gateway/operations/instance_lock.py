"""One gateway per home and per database: lock files held for as long as ``switchboard run`` runs.

Two gateways on one home would answer every message twice, write the same memory
files and rotate the same log; two on one database (another home whose
``storage.path`` names it) would deliver each other's replies. So ``run`` holds an
exclusive ``flock`` on ``gateway.lock`` in the home and on ``<database>.lock`` beside
the database (``state.db.lock``), both made 0600, until the process ends. The kernel
drops the locks with the process, also after SIGKILL or a crash: a file left behind
is no obstacle, only a lock that is held is. Each file holds its holder's pid, host
and start time, which the refusal quotes. A PostgreSQL database has no file beside it: there
the store holds the database's gateway lock (``storage/postgres/gateway_lock.py``, an advisory
lock on a connection of its own), and the refusal names the holder the same way.

The other commands (``backup``, ``sessions``, ``pairing``, ``doctor``) take no lock and
work beside a running gateway; ``restore`` refuses on its own while the database is open.
"""

from __future__ import annotations

import fcntl
import os
import socket
import time
from collections.abc import Iterable
from pathlib import Path

from config.home import PRIVATE_DIR, PRIVATE_FILE


class AlreadyRunning(Exception):
    """Another process holds one of the locks; the message names it and what to do."""


class CannotLock(Exception):
    """A lock file cannot be made (a read-only disk, no permission); the message says what to make writable."""


class InstanceLock:
    """The locks of one running gateway; :meth:`release` (or the end of the process) lets them go."""

    def __init__(self, paths: Iterable[Path]) -> None:
        self.paths = list(dict.fromkeys(paths))
        self._held: list[int] = []

    @classmethod
    def for_run(cls, home: Path, database: Path | None) -> InstanceLock:
        """The home's lock, and the SQLite file's (None: the database is a server's, which orders its own writers)."""
        paths = [home / "gateway.lock"]
        if database is not None:
            paths.append(database.with_name(database.name + ".lock"))
        return cls(paths)

    def acquire(self) -> InstanceLock:
        """Take every lock, or none: raises :class:`AlreadyRunning` when another process holds one."""
        try:
            for path in self.paths:
                self._held.append(_take(path))
        except BaseException:
            self.release()
            raise
        stamp = f"pid {os.getpid()} on {socket.gethostname()}, started {time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())}\n"
        for fd in self._held:
            os.ftruncate(fd, 0)
            os.pwrite(fd, stamp.encode(), 0)
        return self

    def release(self) -> None:
        held, self._held = self._held, []
        for fd in held:
            os.close(fd)  # closing the descriptor drops its flock

    def __enter__(self) -> InstanceLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


def _take(path: Path) -> int:
    try:
        path.parent.mkdir(mode=PRIVATE_DIR, parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, PRIVATE_FILE)
    except OSError as error:
        raise CannotLock(
            f"cannot make the lock file {path} ({error.strerror or error}): the gateway writes beside its "
            f"home and database, so {path.parent} must be writable by this user (not a read-only disk); "
            "make it writable, or point SWITCHBOARD_HOME / storage.path at a writable place"
        ) from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = os.pread(fd, 200, 0).decode("utf-8", errors="replace").strip() or "pid not yet written"
        os.close(fd)
        what = "this home" if path.name == "gateway.lock" else f"the database {path.with_suffix('')}"
        raise AlreadyRunning(
            f"another Switchboard gateway is running on {what} ({holder}; lock {path}): stop it first "
            "(systemctl stop switchboard, docker compose stop), or give this one its own home (SWITCHBOARD_HOME) "
            "and database (storage.path)"
        ) from None
    except BaseException:
        os.close(fd)
        raise
    return fd

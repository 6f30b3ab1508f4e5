"""Every error the storage package raises, as one tree.

    StorageError
    ├── StoreClosedError        the store was closed (or never opened)
    ├── SchemaError
    │   └── SchemaTooNewError   the database was written by a newer build
    ├── DatabaseInUseError      another gateway runs on the (PostgreSQL) database
    ├── WriteFailedError        a write could not be made durable (carries the sqlite error)
    ├── ReadFailedError         a read failed (carries the sqlite error)
    ├── SessionNotFoundError    no session with that id
    ├── BackupError             a backup or restore could not be made (says what to do)
    └── TitleError
        ├── InvalidTitleError   empty after cleaning, or too long (also a ValueError)
        └── TitleInUseError     another session already holds the title

Callers catch ``StorageError`` for "the database let us down" and the more
specific classes when they can do something about it. sqlite3 exceptions never
escape the package: they are translated here, at the boundary.

``fault_of(error)`` says what kind of trouble a failed read or write met (:class:`Fault`):
the database locked by another process, a full disk, a file that cannot be written, an
I/O error, a damaged file, a database server that cannot be reached; None for everything
else (a constraint our own code broke, a closed store), which trying again would not cure.
It reads both engines' errors: SQLite's result codes, and the PostgreSQL server's SQLSTATE
or a lost connection carried by a ``ReadFailedError``/``WriteFailedError``.
"""

from __future__ import annotations

import enum
import sqlite3

import asyncpg

from storage.postgres.faults import Trouble, trouble_of

__all__ = [
    "BackupError",
    "Fault",
    "InvalidTitleError",
    "ReadFailedError",
    "SchemaError",
    "SchemaTooNewError",
    "SessionNotFoundError",
    "StorageError",
    "StoreClosedError",
    "TitleError",
    "TitleInUseError",
    "WriteFailedError",
    "fault_of",
]


class Fault(enum.Enum):
    """What a failed read or write met, when the database itself is the trouble (not our code)."""

    LOCKED = "locked"
    FULL = "full"
    READ_ONLY = "read_only"
    IO = "io"
    DAMAGED = "damaged"
    UNREACHABLE = "unreachable"

    @property
    def transient(self) -> bool:
        """It may go away while the process runs (the lock released, space freed, the file writable again)."""
        return self is not Fault.DAMAGED

    @property
    def reason(self) -> str:
        return _REASONS[self]


_REASONS = {
    Fault.LOCKED: "the database is locked by another process",
    Fault.FULL: "the disk holding the database is full",
    Fault.READ_ONLY: "the database file cannot be opened or written (read-only, or moved away)",
    Fault.IO: "the database file cannot be read or written (an I/O error)",
    Fault.DAMAGED: "the database file is damaged",
    Fault.UNREACHABLE: "the database server cannot be reached (stopped, restarting, or the network is down)",
}
# SQLite's primary result codes (the low byte of an extended code).
_FAULTS = {5: Fault.LOCKED, 6: Fault.LOCKED, 8: Fault.READ_ONLY, 10: Fault.IO, 11: Fault.DAMAGED, 13: Fault.FULL,
           14: Fault.READ_ONLY, 26: Fault.DAMAGED}  # fmt: skip
"""BUSY, LOCKED, READONLY, IOERR, CORRUPT, FULL, CANTOPEN, NOTADB."""


_SERVER_FAULTS = {"53100": Fault.FULL, "53300": Fault.UNREACHABLE, "25006": Fault.READ_ONLY, "58030": Fault.IO,
                  "XX001": Fault.DAMAGED, "XX002": Fault.DAMAGED}  # fmt: skip
"""PostgreSQL's SQLSTATEs for disk_full, too_many_connections, read_only_sql_transaction (a standby),
io_error, data_corrupted and index_corrupted; a conflict or a lost server is sorted by ``trouble_of``."""
_TROUBLE_FAULTS = {Trouble.SERVER_AWAY: Fault.UNREACHABLE, Trouble.CONFLICT: Fault.LOCKED}


def fault_of(error: BaseException) -> Fault | None:
    """The :class:`Fault` behind a storage error or a sqlite3 error, also one re-raised as another error's
    cause; None when the database is not what failed."""
    seen: BaseException | None = error
    while seen is not None:
        code = getattr(seen, "sqlite_errorcode", None) if isinstance(seen, sqlite3.Error) else None
        if code is not None and code & 0xFF in _FAULTS:  # an error sqlite3 made up itself carries no code
            return _FAULTS[code & 0xFF]
        if isinstance(seen, (ReadFailedError, WriteFailedError)) and not isinstance(seen.cause, sqlite3.Error):
            return _server_fault(seen.cause)
        seen = seen.__cause__
    return None


def _server_fault(cause: BaseException) -> Fault | None:
    """What a PostgreSQL read or write that failed for good met (only a storage error's cause is read this way:
    an ``OSError`` elsewhere, a media file's say, is no database server going away)."""
    state = getattr(cause, "sqlstate", None) if isinstance(cause, asyncpg.PostgresError) else None
    if state in _SERVER_FAULTS:
        return _SERVER_FAULTS[state]
    trouble = trouble_of(cause)
    return None if trouble is None else _TROUBLE_FAULTS[trouble]


class StorageError(Exception):
    """Base class of everything the storage package raises."""


class StoreClosedError(StorageError):
    """An operation was attempted on a store that is closed."""

    def __init__(self, operation: str = "use") -> None:
        super().__init__(f"cannot {operation} the store: it is closed")
        self.operation = operation


class SchemaError(StorageError):
    """The database schema cannot be used by this build."""


class SchemaTooNewError(SchemaError):
    """The database was migrated by a newer build than this one."""

    def __init__(self, path: str, db_version: int, build_version: int) -> None:
        super().__init__(
            f"database {path} has schema version {db_version}, but this build of Switchboard only "
            f"knows versions up to {build_version}. Upgrade Switchboard (or point it at another "
            f"database); nothing in the database was changed."
        )
        self.path = path
        self.db_version = db_version
        self.build_version = build_version


class DatabaseInUseError(StorageError):
    """Another gateway holds the database (``storage/postgres/gateway_lock.py``); says who and what to do."""

    def __init__(
        self, where: str, holder: str, *, what: str = "another gateway runs", what_to_do: str | None = None
    ) -> None:
        what_to_do = what_to_do or (
            "Stop it first (one gateway per database), or point storage.url at a database of this gateway's own"
        )
        super().__init__(f"{what} on the database {where}: {holder}. {what_to_do}")


class WriteFailedError(StorageError):
    """A write was not stored: retries ran out, or SQLite refused it outright."""

    def __init__(self, cause: sqlite3.Error, *, attempts: int) -> None:
        tries = "attempt" if attempts == 1 else "attempts"
        super().__init__(f"write failed after {attempts} {tries}: {cause}")
        self.cause = cause
        self.attempts = attempts
        self.__cause__ = cause


class ReadFailedError(StorageError):
    """A read failed inside SQLite."""

    def __init__(self, cause: sqlite3.Error) -> None:
        super().__init__(f"read failed: {cause}")
        self.cause = cause
        self.__cause__ = cause


class SessionNotFoundError(StorageError, LookupError):
    """No session has this id."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session with id {session_id!r}")
        self.session_id = session_id


class BackupError(StorageError):
    """A backup or restore was refused or failed; the message says what to do."""


class TitleError(StorageError):
    """A session title cannot be used."""


class InvalidTitleError(TitleError, ValueError):
    """The title is too long (empty titles clear the title instead)."""

    def __init__(self, title: str, reason: str) -> None:
        super().__init__(f"invalid session title {title[:40]!r}: {reason}")
        self.title = title
        self.reason = reason


class TitleInUseError(TitleError):
    """Titles are unique; another session holds this one."""

    def __init__(self, title: str, holder_id: str) -> None:
        super().__init__(f"title {title!r} is already used by session {holder_id}")
        self.title = title
        self.holder_id = holder_id

"""The database's health as the gateway sees it: checked before start, watched while running.

Before start, :func:`database_problem` runs ``PRAGMA quick_check`` on the file, within a time
budget (:data:`START_CHECK_BUDGET`): a damaged file stops ``switchboard run`` with what to do
(exit status 2) instead of starting a gateway whose turns then fail one by one.

While running, :class:`DatabaseHealth` keeps what turns met (``failed``: a :class:`storage.Fault`)
and whether the database has come back (``recovered``). ``/health`` shows it as the database's
state with the reason and what to do; the log gets one ``database.degraded`` line a minute per
kind of fault however many turns meet it, and ``database.recovered`` once it is over. A damaged
file stays reported until the gateway is restarted: it does not heal by itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import structlog

from storage import SCHEMA_VERSION, Fault, check_database, fault_of

log = structlog.get_logger("gateway.database")

START_CHECK_BUDGET: Final = 10.0
"""Seconds ``quick_check`` may take at start. It reads every page of the file (about a second per
few hundred MB); on a bigger file it stops there, the gateway starts, and ``database.check_incomplete``
says so (``switchboard doctor`` then checks the whole file)."""
LOG_EVERY: Final = 60.0
"""Seconds between two ``database.degraded`` lines about the same fault."""
RESTORE: Final = "stop the gateway, run `switchboard doctor`, then restore the newest backup: `switchboard restore BACKUP_DIR`"


def database_problem(path: Path, *, budget: float = START_CHECK_BUDGET) -> str | None:
    """Why the database at ``path`` cannot be used (what to do included), or None. Logs what it found."""
    if not path.exists():
        return None
    started = time.monotonic()
    check = check_database(path, budget=budget)
    if check.schema_version is not None and check.schema_version > SCHEMA_VERSION:
        return (f"the database {path} was written by a newer Switchboard (schema version {check.schema_version}, "
                f"this build knows up to {SCHEMA_VERSION}): upgrade Switchboard, or restore a backup made with "
                "this version (`switchboard restore BACKUP_DIR`). The file was left untouched.")  # fmt: skip
    if not check.ok:
        problems = "; ".join(check.problems)
        if check.fault not in (None, Fault.DAMAGED):  # cannot be read here: not damage
            return (f"the database {path} cannot be used: {check.fault.reason} ({problems}); "
                    f"what to do: {_hint(check.fault, path)}")  # fmt: skip
        log.error("database.damaged", path=str(path), problems=problems,
                  hint="run `switchboard doctor`, then restore the newest backup: `switchboard restore BACKUP_DIR`")  # fmt: skip
        return (f"the database {path} is damaged ({problems}). Nothing was changed. Run `switchboard doctor` to "
                "see what is wrong, then restore the newest backup (`switchboard restore BACKUP_DIR`); without a "
                "backup, move the file aside and Switchboard starts with an empty one.")  # fmt: skip
    ms = round((time.monotonic() - started) * 1000)
    if not check.complete:
        log.warning("database.check_incomplete", path=str(path), budget_s=budget, size_mb=round(check.size / 2**20),
                    hint="no damage found in what was read; `switchboard doctor` checks the whole file")  # fmt: skip
    else:
        log.info("database.checked", path=str(path), ms=ms)
    return None


def cannot_open(path: Path | str, error: BaseException) -> str:
    """What to say when the store cannot be opened after all (a damaged file the check did not reach, say)."""
    fault = fault_of(error)
    reason = fault.reason if fault is not None else "it could not be opened"
    return f"{reason} ({path}: {error}); what to do: {_hint(fault, path)}"


def _hint(fault: Fault | None, path: Path | str) -> str:
    """What to do about ``fault`` on the database ``path`` (a SQLite file, or a PostgreSQL server's URL)."""
    server = isinstance(path, str) and path.startswith(("postgresql://", "postgres://"))
    if fault is Fault.UNREACHABLE:
        return (f"check that the PostgreSQL server of {path} runs and answers (`pg_isready -d {path}`, "
                "`switchboard doctor`); the waiting replies then go out by themselves")  # fmt: skip
    if fault is Fault.LOCKED and server:
        return ("transactions kept conflicting on the server (another client holding locks, a long transaction): "
                "look at pg_stat_activity and end the one in the way; the waiting replies then go out by themselves")  # fmt: skip
    if fault is Fault.READ_ONLY and server:
        return f"point storage.url at the primary server: {path} takes no writes (a standby, or read-only mode)"
    if fault is Fault.LOCKED:
        return ("another process holds the database's write lock (an sqlite3 shell, a backup tool, a second gateway): "
                "end it; the waiting replies then go out by themselves")  # fmt: skip
    if fault is Fault.FULL:
        return f"free some space on the disk holding {path}; the waiting replies then go out by themselves"
    if fault is Fault.READ_ONLY:
        return f"make {path} (and its directory) writable for the gateway's user again, or put the file back"
    if fault is Fault.IO:
        return (f"check the disk holding {path} (`dmesg`) and the file's attributes (`lsattr`); the waiting replies "
                "go out once it can be written again")  # fmt: skip
    if server:
        return ("run `switchboard doctor` and read the PostgreSQL server's log; if the data is lost, restore the newest "
                "`pg_dump` with `pg_restore` (see `switchboard restore`)")  # fmt: skip
    return RESTORE


class DatabaseHealth:
    """What turns met in the database while the gateway runs, for /health and the log."""

    def __init__(self, path: Path | str, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path
        self._clock = clock
        self._fault: Fault | None = None
        self._error = ""
        self._since = 0.0
        self._damage: str | None = None
        """The error that showed the file is damaged: kept until restart."""
        self._logged_at: dict[Fault, float] = {}
        self._recovery_logged_at: float | None = None
        self.waiting = 0
        """Turns waiting for the database now (set by the turn retrier)."""

    @property
    def ok(self) -> bool:
        return self._fault is None and self._damage is None

    def failed(self, fault: Fault, error: BaseException) -> None:
        """A read or write met ``fault``; logged at most once a minute per fault, without a traceback."""
        if fault is Fault.DAMAGED:
            self._damage = self._damage or str(error)
        else:
            if self._fault is None:
                self._since = self._clock()
            self._fault, self._error = fault, str(error)
        now = self._clock()
        logged = self._logged_at.get(fault)
        if logged is None or now - logged >= LOG_EVERY:
            self._logged_at[fault] = now
            log.error("database.degraded", fault=fault.value, reason=fault.reason, error=str(error)[:300],
                      turns_waiting=self.waiting, hint=_hint(fault, self._path))  # fmt: skip

    def recovered(self) -> None:
        """Reads and writes work again (a turn went through); a damaged file stays reported."""
        if self._fault is None:
            return
        fault, self._fault = self._fault, None
        now = self._clock()
        if self._recovery_logged_at is None or now - self._recovery_logged_at >= LOG_EVERY:
            self._recovery_logged_at = now
            log.info("database.recovered", fault=fault.value, after_s=round(now - self._since, 1))

    def problem(self) -> tuple[str, str] | None:
        """What turns last met, as (reason, what to do), while it lasts (None: reads and writes work)."""
        fault = Fault.DAMAGED if self._damage is not None else self._fault
        return None if fault is None else (fault.reason, _hint(fault, self._path))

    def to_dict(self, probe_error: BaseException | None = None) -> dict[str, Any]:
        """The ``database`` entry of /health; ``probe_error``: what a read of the tables just now raised."""
        if probe_error is not None:
            fault = fault_of(probe_error)
            if fault is Fault.DAMAGED:
                self.failed(fault, probe_error)
            elif self.ok:
                reason = fault.reason if fault is not None else "the database does not answer"
                return {"ok": False, "reason": f"{reason}: {probe_error}"[:300], "hint": _hint(fault, self._path)}
        if self._damage is not None:
            return {"ok": False, "reason": f"{Fault.DAMAGED.reason}: {self._damage}"[:300],
                    "hint": _hint(Fault.DAMAGED, self._path)}  # fmt: skip
        if self._fault is not None:
            return {"ok": False, "reason": f"{self._fault.reason}: {self._error}"[:300],
                    "hint": _hint(self._fault, self._path), "since_s": round(self._clock() - self._since, 1),
                    "turns_waiting": self.waiting}  # fmt: skip
        return {"ok": True}

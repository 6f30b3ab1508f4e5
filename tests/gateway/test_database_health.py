"""What /health and the log say about a failing database: one line a minute, the reason, a damaged file kept."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from structlog.testing import capture_logs

from gateway.operations.database_health import DatabaseHealth
from storage import Fault, ReadFailedError, WriteFailedError


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def full() -> WriteFailedError:
    error = sqlite3.OperationalError("database or disk is full")
    error.sqlite_errorcode = 13  # type: ignore[attr-defined]
    return WriteFailedError(error, attempts=1)


def test_a_fault_met_by_every_try_is_logged_once_a_minute_and_its_end_once(tmp_path: Path) -> None:
    clock = Clock()
    health = DatabaseHealth(tmp_path / "state.db", clock=clock)
    with capture_logs() as logs:
        for _ in range(120):  # two minutes of tries every second
            health.failed(Fault.FULL, full())
            clock.now += 1
        assert health.to_dict()["ok"] is False
        health.recovered()
        health.recovered()
    events = [entry["event"] for entry in logs]
    assert events == ["database.degraded", "database.degraded", "database.recovered"]
    assert "free some space" in logs[0]["hint"] and "exc_info" not in logs[0]
    assert health.to_dict() == {"ok": True}


def test_a_damaged_file_stays_reported_after_other_turns_go_through(tmp_path: Path) -> None:
    health = DatabaseHealth(tmp_path / "state.db")
    damaged = sqlite3.DatabaseError("database disk image is malformed")
    damaged.sqlite_errorcode = 11  # type: ignore[attr-defined]
    health.failed(Fault.DAMAGED, ReadFailedError(damaged))
    health.recovered()
    entry = health.to_dict()
    assert entry["ok"] is False and "damaged" in entry["reason"] and "switchboard restore" in entry["hint"]
